"""Which tasks a retry plans (pure): the named or failed ones, what they skipped, needs met by success."""

from __future__ import annotations

import pytest

from rsk.errors import UsageError
from rsk.ops.retry import choose, next_attempt
from rsk.ops.status import JobState, attempt_of, of_request
from rsk.wire.protocol import Need, Request, TaskSpec
from rsk.wire.states import State


def _req() -> Request:
    t = [TaskSpec(key="prep", argv=["p"])]
    t += [TaskSpec(key=f"train{i}", argv=["t"], needs=[Need(task="prep")]) for i in range(2)]
    t += [TaskSpec(key=f"eval{i}", argv=["e"], needs=[Need(task=f"train{i}")]) for i in range(2)]
    t += [TaskSpec(key="report", argv=["r"], needs=[Need(task="eval0"), Need(task="eval1", on="ended")])]
    return Request(project="p", request_id="wf", tasks=t)


def _job(task: str, state: State, rid: str = "wf", job: str = "1") -> JobState:
    return JobState(request_id=rid, task=task, job_id=job, state=state, exit_code=None, signal=None, elapsed_s=None,
                    limit_s=None, where="", submitted="")  # fmt: skip


STATES: dict[str, State] = {"prep": "succeeded", "train0": "succeeded", "train1": "failed", "eval0": "succeeded",
                            "eval1": "skipped", "report": "skipped"}  # fmt: skip


def test_failed_takes_what_failed_and_what_it_skipped_and_keeps_only_needs_among_them() -> None:
    latest = {k: _job(k, s) for k, s in STATES.items()}
    tasks = choose(_req(), latest, [], failed=True)
    assert [t.key for t in tasks] == ["train1", "eval1", "report"]
    assert tasks[0].needs == []  # prep succeeded: a need met
    assert [n.task for n in tasks[1].needs] == ["train1"]
    assert [(n.task, n.on) for n in tasks[2].needs] == [("eval1", "ended")]


def test_a_named_task_must_have_ended_without_success_and_its_failed_needs_come_too() -> None:
    latest = {k: _job(k, s) for k, s in STATES.items()}
    with pytest.raises(UsageError, match="train0 is succeeded"):
        choose(_req(), latest, ["train0"], failed=False)
    with pytest.raises(UsageError, match="eval1 needs train1, which is failed"):
        choose(_req(), latest, ["eval1"], failed=False)
    with pytest.raises(UsageError, match="no task nope"):
        choose(_req(), latest, ["nope"], failed=False)
    running = {**latest, "train1": _job("train1", "running")}
    with pytest.raises(UsageError, match="train1 is running"):
        choose(_req(), running, ["train1"], failed=False)
    lost = {**latest, "train1": _job("train1", "lost")}
    with pytest.raises(UsageError, match="train1, which is lost: retry it too"):  # lost: only when named
        choose(_req(), lost, [], failed=True)
    assert [t.key for t in choose(_req(), lost, ["train1"], failed=False)] == ["train1", "eval1", "report"]


def test_attempts_are_numbered_and_status_shows_each_tasks_latest_with_its_history() -> None:
    assert attempt_of("wf") == ("wf", 1) and attempt_of("wf.a3") == ("wf", 3)
    assert next_attempt("wf", ["wf", "wf.a2", "other.a7"]) == "wf.a3"
    jobs = [_job("train1", "failed", "wf", "5"), _job("train0", "succeeded", "wf", "6"),
            _job("train1", "succeeded", "wf.a2", "9"), _job("x", "failed", "other", "7")]  # fmt: skip
    jobs[0].needs = ["prep"]  # the first attempt needed prep; the retry needed nothing (prep had succeeded)
    shown = {j.task: j for j in of_request(jobs, "wf")}
    assert shown["train1"].needs == ["prep"]  # the batch's graph, whichever attempt is shown
    assert set(shown) == {"train0", "train1"}
    assert shown["train1"].attempt == 2 and shown["train1"].state == "succeeded"
    assert [(h.attempt, h.job_id, h.state) for h in shown["train1"].history] == [(1, "5", "failed")]
    assert [j.job_id for j in of_request(jobs, "wf.a2")] == ["9"]


def test_a_pending_task_says_what_it_waits_for_and_a_workflow_reads_in_levels() -> None:
    from rsk.ops.status import Status, filter_jobs, jobs_from
    from rsk.wire.protocol import parse

    n = "0" * 32
    rows = [
        "job rid=w idx=0 task=prep job=5 sq=RUNNING sq_elapsed=3 sq_limit=600",
        "job rid=w idx=1 task=train job=6_1 sq=PENDING where=(Dependency) needs=0:ok",
        "job rid=w idx=2 task=report job=7 sq=PENDING where=(Dependency) needs=1:ok,0:any",
    ]
    out = parse("".join(f"@@{n} {r}\n" for r in [*rows, "done rc=0"]), n)
    assert out is not None
    jobs = jobs_from(out)
    assert [j.where for j in jobs] == ["", "(waits for prep)", "(waits for train, prep)"]
    st = filter_jobs(Status(target="lab", project="p", slurm="up", at="now", jobs=jobs), request_id="w")
    assert st.levels == [{"running": 1}, {"pending": 1}, {"pending": 1}]


def test_only_retry_and_extend_name_attempts() -> None:
    from rsk.request.spec import LaunchSpec, build_request

    with pytest.raises(UsageError, match="ends like an attempt"):
        build_request(LaunchSpec(argv=["true"], request_id="wf.a7"), "p", "me")
    assert build_request(LaunchSpec(argv=["true"], request_id="wf.alpha"), "p", "me").request_id == "wf.alpha"


def test_a_batch_cancelled_midway_is_told_as_cancelled_not_as_a_failure_to_fix() -> None:
    from rsk.ops.status import JobState
    from rsk.ops.wait import _hint

    def job(i: int, state: str) -> JobState:
        return JobState(request_id="cs", task=f"t{i}", job_id=f"9_{i}", state=state, exit_code=None, signal=None,
                        elapsed_s=None, limit_s=60, where="", submitted="")  # fmt: skip

    hint = _hint([job(0, "succeeded"), *(job(i, "cancelled") for i in range(1, 4))], done=True)
    assert hint.startswith("3 of 4 were cancelled before they ended (none failed)"), hint
    assert "rsk logs" not in hint and "rsk retry --batch cs --failed" in hint
    mixed = _hint([job(0, "failed"), job(1, "cancelled")], done=True)
    assert "2 of 2 did not succeed; see `rsk logs 9_0 --stream stderr`" in mixed, mixed
