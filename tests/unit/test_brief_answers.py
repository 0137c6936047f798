"""An answer of a big batch (the CLI's --json and MCP's) stays small: a launch lists its first tasks' jobs and a
plan its first tasks, each with how many more (`rsk status --batch` and the card have them all); a small batch is
whole. Pure."""

from __future__ import annotations

from rsk.ledger.guard import Allowed
from rsk.ops.launch import LaunchResult, PlanReport, TaskJob
from rsk.wire.protocol import Plan, TaskPlan


def test_a_brief_launch_answer_lists_a_big_batchs_first_tasks_and_how_many_more() -> None:
    result = LaunchResult(status="submitted", target="lab", project="p", request_id="sw", job_id="7_0",
                          tasks=[TaskJob(task=f"k{i}", job_id=f"7_{i}") for i in range(10_000)], plan_hash="h",
                          allowed_by=Allowed(kind="grant", id="g-1"))  # fmt: skip
    brief = result.brief(50)
    assert [t.task for t in brief.tasks] == [f"k{i}" for i in range(50)] and brief.tasks_omitted == 9_950
    assert len(brief.model_dump_json()) < 8_000
    assert result.brief().tasks == result.tasks and result.brief().tasks_omitted == 0  # the CLI's: every task


def test_a_brief_plan_report_keeps_the_first_tasks_of_its_plan() -> None:
    tasks = [TaskPlan(nodes=1, cpus=1, mem_mb=64, gpus=0, time_min=1, argv=["python", "t.py", str(i)], key=f"k{i}")
             for i in range(3_000)]  # fmt: skip
    plan = Plan(hash="h" * 64, cluster="c", user="u", root="/r", hostkey="k", scripts="s", policy="p", project="p",
                name="job", kind="batch", workdir="/w", path="", partition="cpu", account="", qos="", nodes=1, cpus=1,
                mem_mb=64, gpus=0, time_min=1, env=[], argv=[], tasks=tasks)  # fmt: skip
    report = PlanReport(target="lab", project="p", request_id="sw", plan_hash=plan.hash, would="ask",
                        gpu_hours_worst=0, cpu_hours_worst=50, jobs=3_000, policy_verdict="ok", policy_reasons=[],
                        estimate_start="", plan=plan)  # fmt: skip
    brief = report.brief(50)
    assert len(brief.plan.tasks) == 50 and brief.tasks_omitted == 2_950 and brief.plan.hash == plan.hash
    assert len(report.plan.tasks) == 3_000  # the report itself is untouched
    small = report.model_copy(update={"plan": plan.model_copy(update={"tasks": tasks[:20]})})
    assert small.brief(50) is small


def test_a_brief_cancel_report_keeps_what_went_wrong_and_the_counts_of_all() -> None:
    from rsk.ops.cancel import CancelReport, CancelResult

    results = [CancelResult(job_id=f"9_{i}", result="cancelled") for i in range(1_000)]
    results[700] = CancelResult(job_id="9_700", result="failed")
    report = CancelReport(target="lab", project="p", counts={"cancelled": 999, "failed": 1}, results=results)
    brief = report.brief(50)
    assert [r.job_id for r in brief.results][:1] == ["9_700"] and len(brief.results) == 51
    assert brief.results_omitted == 949 and brief.counts == {"cancelled": 999, "failed": 1}
    assert report.brief(2_000) is report


def test_a_verbose_brief_launch_answer_keeps_the_plan_with_its_first_tasks() -> None:
    """`rsk launch --json --verbose` of a big batch: the plan, cut as the task list is (`--all` keeps every one)."""
    tasks = [TaskPlan(nodes=1, cpus=1, mem_mb=64, gpus=0, time_min=1, argv=["true"], key=f"k{i}") for i in range(200)]
    plan = Plan(hash="h" * 64, cluster="c", user="u", root="/r", hostkey="k", scripts="s", policy="p", project="p",
                name="job", kind="batch", workdir="/w", path="", partition="cpu", account="", qos="", nodes=1, cpus=1,
                mem_mb=64, gpus=0, time_min=1, env=[], argv=[], tasks=tasks)  # fmt: skip
    result = LaunchResult(status="submitted", target="lab", project="p", request_id="sw", job_id="7_0", plan=plan,
                          tasks=[TaskJob(task=f"k{i}", job_id=f"7_{i}") for i in range(200)], plan_hash=plan.hash,
                          allowed_by=Allowed(kind="grant", id="g-1"))  # fmt: skip
    verbose = result.brief(50, plan=True)
    assert verbose.plan is not None and len(verbose.plan.tasks) == 50 and verbose.plan.hash == plan.hash
    assert len(verbose.tasks) == 50 and verbose.tasks_omitted == 150
    assert result.brief(50).plan is None  # without --verbose: no plan
    every = result.brief(0, plan=True)
    assert every.plan is not None and len(every.plan.tasks) == 200 and len(every.tasks) == 200


def test_a_brief_cancel_refusal_names_every_job_it_could_not_cancel_and_the_counts() -> None:
    """A cancel whose error document is its answer (`not-ours`, `cancel-failed`) is as brief as its report."""
    import pytest

    from rsk.errors import UnavailableError
    from rsk.ops.cancel import CancelReport, CancelResult, refused

    results = [CancelResult(job_id=f"9_{i}", result="cancelled") for i in range(1_000)]
    results[3] = results[999] = CancelResult(job_id="9_x", result="failed")
    report = CancelReport(target="lab", project="p", counts={"cancelled": 998, "failed": 2}, results=results)
    with pytest.raises(UnavailableError) as raised:
        refused(report.brief(50))
    details = raised.value.details
    said = details["results"]
    assert isinstance(said, list) and len(said) == 52 and [r["result"] for r in said[:2]] == ["failed", "failed"]
    assert details["counts"] == {"cancelled": 998, "failed": 2} and details["results_omitted"] == 948


def test_a_brief_batch_fetch_lists_what_lacks_first_then_what_came_now() -> None:
    """`rsk fetch --batch B --result` of 300 tasks: those without a result, then the ones fetched by this call, then
    those already there, 50 in all; `without`, `fetched` and `already` count every task."""
    from rsk.ops.fetch import BatchFetchReport, BatchResultReport, ResultReport, TaskFetch, TaskResult

    def res(i: int) -> TaskResult:
        if i % 100 == 7:
            return TaskResult(task=f"k{i}", job_id=f"5_{i}", state="failed", result=None, why="exit 1")
        got = ResultReport(target="lab", project="p", job_id=f"5_{i}", to=f"/r/k{i}", files=[], file_count=1,
                           bytes=0 if i < 250 else 10, already=i < 250)  # fmt: skip
        return TaskResult(task=f"k{i}", job_id=f"5_{i}", state="succeeded", result=got)

    tasks = [res(i) for i in range(300)]
    report = BatchResultReport(target="lab", project="p", batch="b", to="/r", tasks=tasks, fetched=297, already=247,
                               without=["k7", "k107", "k207"], bytes=500)  # fmt: skip
    brief = report.brief(50)
    assert [t.task for t in brief.tasks[:3]] == ["k7", "k107", "k207"]  # no result: first
    assert all(t.result is not None and not t.result.already for t in brief.tasks[3:50])  # then what came now
    assert brief.tasks_omitted == 250 and brief.without == report.without and brief.fetched == 297
    assert report.brief(300) is report
    files = [TaskFetch(task=f"k{i}", job_id=f"5_{i}", state="succeeded", files=[], missing=["m.json"] if i == 280
                       else []) for i in range(300)]  # fmt: skip
    fetched = BatchFetchReport(target="lab", project="p", batch="b", tasks=files, bytes=0, incomplete=1).brief(50)
    assert fetched.tasks[0].task == "k280" and len(fetched.tasks) == 50 and fetched.tasks_omitted == 250
    assert fetched.incomplete == 1
