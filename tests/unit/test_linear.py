"""What a status read or a plan of many tasks does grows with the tasks, never with their square: each list of jobs,
steps or tasks is read a few times for the whole answer, not once for each of its items. Counted here, on lists that
count how often they are read (the growth itself: `bench/run.sh scale`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rsk.ledger import guard
from rsk.ledger.models import Charge, JobCost, Lease, LeaseStep, Ledger
from rsk.ops.status import JobState, Status, explain_queued_steps, mark_undecided
from rsk.request import dag
from rsk.wire.protocol import Need, TaskSpec
from rsk.wire.resources import Resources

N = 300


class Counted(list[Any]):
    """A list that counts how often it is read whole."""

    reads = 0

    def __iter__(self) -> Iterator[Any]:
        self.reads += 1
        return super().__iter__()


class CountedCosts(dict[str, JobCost]):
    reads = 0

    def values(self) -> Any:
        self.reads += 1
        return super().values()


def _lease(steps: list[LeaseStep]) -> Lease:
    return Lease(name="dev", target="lab", job_id="900", request_id="rl", plan_hash="h", allowed_by="grant g",
                 resources=Resources(nodes=1, cpus=4, mem_mb=4000, gpus=4, time_min=60), steps=steps)  # fmt: skip


def _step(k: int, state: str = "running", where: str = "n1") -> JobState:
    return JobState(request_id="st", task=f"t{k}", job_id=f"900s{k}", state=state, exit_code=None, signal=None,
                    elapsed_s=0, limit_s=600, where=where, submitted="", nodes=1, cpus=1, mem_mb=100, gpus=1,
                    lease="dev", starts=1)  # fmt: skip


def test_a_status_of_many_steps_reads_the_leases_steps_once() -> None:
    ledger = Ledger(project="p", leases=[_lease([])])
    steps = Counted(LeaseStep(job_id=f"900s{k}", request_id="st", plan_hash="h") for k in range(N))
    ledger.leases[0].steps = steps
    st = Status(target="lab", project="p", slurm="up", at="", jobs=[_step(k) for k in range(N)] + [_step(N)])
    mark_undecided(st, ledger)
    assert steps.reads == 1
    assert [j.undecided for j in st.jobs[:N]] == [""] * N  # each one the ledger allowed
    assert st.jobs[N].undecided == "no step the ledger allowed has this id and request"


def test_why_many_queued_steps_wait_reads_the_jobs_a_few_times() -> None:
    lease = JobState(request_id="rl", task=None, job_id="900", state="running", exit_code=None, signal=None,
                     elapsed_s=1, limit_s=3600, where="n1", submitted="", nodes=1, cpus=4, mem_mb=4000, gpus=4,
                     lease="dev")  # fmt: skip
    jobs = Counted([lease] + [_step(k) for k in range(4)] + [_step(k, "pending", "(Queued)") for k in range(4, N)])
    explain_queued_steps(jobs)
    assert jobs.reads <= 3
    assert jobs[5].where.startswith("(Queued: it asks 1 CPUs (0 of 4 free), 1 GPUs (0 of 4 free)")  # as before


def test_a_batch_whose_every_job_grew_sums_its_charge_once() -> None:
    costs = CountedCosts({f"5000_{k}": JobCost(gpu_hours_worst=0.0, cpu_hours_worst=1.0) for k in range(N)})
    charge = Charge(grant_id="g", plan_hash="h", request_id="b", target="lab", gpu_hours=0.0, cpu_hours=float(N),
                    state="submitted", jobs=N)  # fmt: skip
    charge.job_costs = costs
    ledger = Ledger(project="p", charges=[charge])
    audited: list[str] = []

    class Books:
        project = "p"

        def audit(self, entry: Any) -> None:
            audited.append(entry.detail)

    grown = guard._grow_in(Books(), ledger, "lab", dict.fromkeys(costs, (0.0, 2.0)))  # type: ignore[arg-type]
    assert grown == N and charge.cpu_hours == 2.0 * N and len(audited) == N  # each job's line in the audit
    assert costs.reads == 2  # its GPU-hours and its CPU-hours, once


def test_a_workflow_in_any_order_is_put_in_order_in_a_few_reads_of_its_tasks() -> None:
    # a chain written backwards: each pass over the file could place only one task of it
    tasks = Counted(TaskSpec(key=f"k{k}", argv=["x"], needs=[Need(task=f"k{k + 1}")] if k < N - 1 else [])
                    for k in range(N))  # fmt: skip
    ordered = dag.check(tasks)
    assert [t.key for t in ordered] == [f"k{k}" for k in reversed(range(N))]
    assert tasks.reads <= 8


def test_a_command_walks_its_young_objects_every_20000_allocations_not_every_700() -> None:
    import gc

    from rsk import entry
    from rsk.wire import answers
    from rsk.wire.protocol import parse

    rows = [
        f"@@N job rid=b task=t{k} idx={k} job=500_{k} sq=PENDING sq_limit=600 res=1,1,64,0,10" for k in range(N * 20)
    ]
    out = parse("\n".join([*rows, "@@N done rc=0"]), "N")
    assert out is not None

    def walks() -> list[int]:
        before = [g["collections"] for g in gc.get_stats()]
        answers.status(out)
        return [g["collections"] - b for g, b in zip(gc.get_stats(), before, strict=True)]

    saved = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)  # Python's default
        default = walks()
        entry.collect_less()
        tuned = walks()
    finally:
        gc.set_threshold(*saved)
    assert default[0] >= 30 and tuned[0] <= 2 and tuned[2] == 0, (default, tuned)  # young walks; full ones
