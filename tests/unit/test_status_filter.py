"""A selection's `counts` describe every job selected, however few are listed (a state filter, a summary, a limit),
so an agent that follows a big batch by its counts reads the batch, never a page of it."""

from __future__ import annotations

import pytest

from rsk.errors import UsageError
from rsk.ops.status import SUMMARY_ROWS, JobState, Status, filter_jobs


def _batch(n: int, failed: int = 0) -> Status:
    def job(i: int) -> JobState:
        state = "failed" if i < failed else "succeeded"
        return JobState(request_id="sw", task=f"t{i}", job_id=f"7_{i}", state=state, exit_code=None, signal=None,
                        elapsed_s=1, limit_s=60, where="n1", submitted="")  # fmt: skip

    other = JobState(request_id="solo", task=None, job_id="8", state="running", exit_code=None, signal=None,
                     elapsed_s=1, limit_s=60, where="n1", submitted="")  # fmt: skip
    return Status(target="lab", project="p", slurm="up", at="", jobs=[*map(job, range(n)), other])


def test_counts_describe_the_whole_batch_not_the_page_shown() -> None:
    st = filter_jobs(_batch(2_000, failed=50), request_id="sw", limit=50)
    assert len(st.jobs) == 50 and st.omitted == 1_950
    assert st.counts == {"succeeded": 1_950, "failed": 50}


def test_a_state_filter_lists_only_those_states_and_counts_every_one() -> None:
    st = filter_jobs(_batch(200, failed=3), request_id="sw", states=["failed"])
    assert [j.task for j in st.jobs] == ["t0", "t1", "t2"] and st.counts == {"succeeded": 197, "failed": 3}
    with pytest.raises(UsageError, match="unknown state 'done'"):
        filter_jobs(_batch(2), states=["done"])


def test_a_big_selection_is_a_summary_unless_every_job_is_asked_for() -> None:
    big = filter_jobs(_batch(2_000, failed=80), request_id="sw", summary=None)
    assert big.summary and len(big.jobs) == SUMMARY_ROWS and {j.state for j in big.jobs} == {"failed"}
    assert big.counts == {"succeeded": 1_920, "failed": 80} and big.omitted == 1_950
    assert len(big.model_dump_json()) < 40_000
    small = filter_jobs(_batch(10, failed=1), request_id="sw", summary=None)
    assert not small.summary and len(small.jobs) == 10
    every = filter_jobs(_batch(2_000), request_id="sw", summary=False)
    assert len(every.jobs) == 2_000 and every.omitted == 0
    project = filter_jobs(_batch(2), summary=True)  # the project's: the running job needs no attention either
    assert project.jobs == [] and project.counts == {"succeeded": 2, "running": 1}


def test_the_projects_summary_counts_each_task_once_as_its_latest_attempt() -> None:
    from rsk.ops.status import count, latest_attempts

    def job(rid: str, task: str, state: str) -> JobState:
        return JobState(request_id=rid, task=task, job_id=f"{rid}-{task}", state=state, exit_code=None, signal=None,
                        elapsed_s=1, limit_s=60, where="", submitted="")  # fmt: skip

    jobs = [
        job("sw.a2", "t1", "succeeded"),
        job("sw", "t0", "succeeded"),
        job("sw", "t1", "failed"),
        job("wf", "train", "failed"),
        job("wf", "eval", "skipped"),
        job("wf.a3", "train", "succeeded"),
        job("wf.a2", "train", "failed"),
        job("wf.a2", "eval", "skipped"),
        job("wf.a3", "eval", "succeeded"),
    ]
    assert count(latest_attempts(jobs)) == {"succeeded": 4}


def test_the_projects_status_lists_a_retried_task_once_and_keeps_what_every_attempt_cost() -> None:
    """Project-wide, a task a retry replaced is neither listed nor counted (`superseded` says how many), and the costs
    still name every attempt's request: a batch whose every task was retried costs what its first try ran too."""
    from rsk.ops.status import RequestCost

    def job(rid: str, task: str, state: str) -> JobState:
        return JobState(request_id=rid, task=task, job_id=f"{rid}-{task}", state=state, exit_code=None, signal=None,
                        elapsed_s=1, limit_s=60, where="", submitted="")  # fmt: skip

    cost = RequestCost(cpu_hours_used=1.0, gpu_hours_used=0.0, cpu_hours_reserved=0.0, gpu_hours_reserved=0.0)
    jobs = [job("sw", "t0", "failed"), job("sw", "t1", "failed"), job("sw.a2", "t0", "succeeded"),
            job("sw.a2", "t1", "succeeded")]  # fmt: skip
    st = Status(target="lab", project="p", slurm="up", at="", jobs=jobs, costs={"sw": cost, "sw.a2": cost})
    now = filter_jobs(st)
    assert [j.job_id for j in now.jobs] == ["sw.a2-t0", "sw.a2-t1"] and now.counts == {"succeeded": 2}
    assert now.superseded == 2 and set(now.costs) == {"sw", "sw.a2"}
    assert filter_jobs(st, job="sw-t0").jobs[0].state == "failed"  # an earlier attempt, read by its id
