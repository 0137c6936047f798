"""A brief plan answer (ADR 0073) stays small for every big batch, so its verdict and warnings are read.

ADR 0073 cuts a plan's `tasks` to the first 50 because a shell agent's tool keeps the first 30,000 characters of an
answer: it "read a list of task plans and lost the verdict". Two more lists of a plan grow with the batch and are
not cut: `prior` (one entry per task the request id already ran: `rsk plan -r R` of a 10,000-task batch that ran,
the replay an agent asks about) and `active_jobs` (every job of the project the cluster's cap counts). Both come
before `warnings` in the answer, so the warnings (the file-here warning of ADR 0074, a lease step's idle GPUs) are
cut off again. And `launch --json --verbose` cuts the plan's tasks without saying so (`tasks_omitted` 0) when the
answer lists fewer tasks than the plan has (the ledger's known jobs of a wiped journal). Pure."""

from __future__ import annotations

from rsk.ledger.guard import Allowed
from rsk.ops.launch import LaunchResult, PlanReport
from rsk.wire.protocol import Plan, Prior, TaskPlan

SHELL_CUT = 30_000  # what a shell agent's tool keeps of an answer (ADR 0073)


def _plan(n: int) -> Plan:
    tasks = [TaskPlan(nodes=1, cpus=1, mem_mb=64, gpus=0, time_min=1, argv=["python3", "t.py", str(i)], key=f"k{i}")
             for i in range(n)]  # fmt: skip
    return Plan(hash="h" * 64, cluster="c", user="u", root="/r", hostkey="k", scripts="s", policy="p", project="p",
                name="job", kind="batch", workdir="/w", path="", partition="cpu", account="", qos="", nodes=1, cpus=1,
                mem_mb=64, gpus=0, time_min=1, env=[], argv=[], tasks=tasks,
                prior=[Prior(idx=i, state="done", job_id=f"74000_{i}", plan_hash="h" * 64) for i in range(n)],
                active=n, active_jobs=[f"74000_{i}" for i in range(n)])  # fmt: skip


def test_a_brief_plan_of_a_big_batch_that_ran_keeps_its_warnings_within_what_an_agent_reads() -> None:
    plan = _plan(10_000)
    report = PlanReport(target="lab", project="p", request_id="sw", plan_hash=plan.hash, would="replay",
                        gpu_hours_worst=0, cpu_hours_worst=1, jobs=10_000, policy_verdict="allow", policy_reasons=[],
                        estimate_start="", plan=plan, warnings=["train.py is a file here, but ..."])  # fmt: skip
    text = report.brief(50).model_dump_json(indent=2)  # as print_json prints it
    assert "train.py is a file here" in text[:SHELL_CUT], f"the warnings start at character {text.find('train.py')}"


def test_a_verbose_brief_launch_answer_says_when_it_cut_the_plans_tasks() -> None:
    plan = _plan(200)
    result = LaunchResult(status="replayed", target="lab", project="p", request_id="sw", job_id="74000_0", plan=plan,
                          tasks=[], plan_hash=plan.hash, allowed_by=Allowed(kind="replay", id="cluster"))  # fmt: skip
    verbose = result.brief(50, plan=True)
    assert verbose.plan is not None
    shown = len(verbose.plan.tasks)
    assert shown == 200 or verbose.tasks_omitted == 200 - shown, f"{shown} of 200 tasks, tasks_omitted 0"
