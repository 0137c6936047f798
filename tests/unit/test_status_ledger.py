"""How often a status read touches the ledger: it reads and parses the file once; when Slurm said something
the books must record (a job ended, a lost answer's job found, a job holding more GPUs than its plan), it locks
and writes once more, all of it in one transaction that parses nothing again. The cluster here is a stand-in
that answers a status call (the real one: tests/integration/test_guard.py); the ledger is real."""

from __future__ import annotations

from collections import Counter
from typing import cast

import pytest

from rsk.cluster.remote import Remote
from rsk.ledger.models import Charge, JobCost, Lease, LeaseStep
from rsk.ledger.store import Store
from rsk.ops.status import status_call
from rsk.wire.protocol import Output, parse
from rsk.wire.resources import Resources
from tests.unit.test_launch_ledger import PROJECT, _count

NONCE = "0" * 32


class _Cluster:
    """Answers `status` with these @@job rows; remembers the held line it was sent."""

    def __init__(self, *rows: str, slurm: str = "up") -> None:
        self.rows = rows
        self.slurm = slurm
        self.sent: list[bytes] = []

    def call(self, entry: str, *args: str, stdin: bytes = b"", timeout: float | None = None) -> Output:
        assert entry == "status"
        self.sent.append(stdin)
        lines = [f"status slurm={self.slurm} t=2026-01-01T00:00:00Z project=p", *self.rows, "done rc=0"]
        out = parse("".join(f"@@{NONCE} {r}\n" for r in lines), NONCE)
        assert out is not None
        return out


def _books() -> None:
    """A submitted charge of job 11 (1 GPU for an hour at worst), a reserved one whose answer was lost (request
    r2), and an open lease with one step it allowed."""
    with Store(PROJECT).transaction() as ledger:
        ledger.charges += [
            Charge(grant_id="g-1", plan_hash="h", request_id="r1", target="lab", gpu_hours=1.0, cpu_hours=1.0,
                   state="submitted", job_costs={"11": JobCost(gpu_hours_worst=1.0, cpu_hours_worst=1.0)}),
            Charge(grant_id="g-1", plan_hash="h", request_id="r2", target="lab", gpu_hours=1.0, cpu_hours=1.0),
        ]  # fmt: skip
        ledger.leases.append(Lease(name="L", target="lab", job_id="20", request_id="rl", plan_hash="h",
                                   allowed_by="grant g-1", resources=Resources(nodes=1, cpus=1, mem_mb=100, gpus=0,
                                                                               time_min=60),
                                   steps=[LeaseStep(job_id="20s1", request_id="rs", plan_hash="h")]))  # fmt: skip


RUNNING = "job rid=r1 job=11 sq=RUNNING sq_elapsed=60 sq_limit=3600 res=1,1,100,1,60"
STEP = "job rid=rx job=20s2 st=run st_lease=running lease=L starts=1"  # a step the ledger never allowed


def test_a_status_read_parses_the_ledger_once_and_writes_nothing_when_there_is_nothing_to_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _books()
    before = Store(PROJECT).path.read_bytes()
    counts = _count(monkeypatch)
    cluster = _Cluster(RUNNING, STEP)
    st, _ = status_call(cast(Remote, cluster), "lab", PROJECT)
    assert counts == Counter({"read": 1, "parse": 1})
    assert cluster.sent == [b"held 11:r1\n"]  # the held line comes from that one reading
    assert [j.undecided != "" for j in st.jobs] == [False, True]  # and so does the lease's check
    assert Store(PROJECT).path.read_bytes() == before


def test_what_a_status_read_records_is_one_transaction_on_the_one_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    _books()
    counts = _count(monkeypatch)
    cluster = _Cluster(
        "job rid=r1 job=11 sq=COMPLETED sq_elapsed=900 sq_limit=3600 res=1,1,100,1,60",  # ended: settles
        "job rid=r2 job=12 sq=PENDING sq_limit=3600 res=1,1,100,0,60 sq_shape=1,1,100,2",  # found, and grown
        STEP,
    )
    st, _ = status_call(cast(Remote, cluster), "lab", PROJECT)
    assert counts == Counter({"read": 2, "parse": 1, "lock": 1, "write": 1})
    assert st.jobs[2].undecided
    ledger = Store(PROJECT).load()
    found = next(c for c in ledger.charges if c.request_id == "r2")
    assert found.state == "submitted" and found.job_costs["12"].gpu_hours_worst == 2.0  # adopted, then grown
    settled = Store(PROJECT).archive.charges()
    assert [c.job_costs["11"].gpu_hours_used for c in settled] == [0.25]  # settled on Slurm's word


def test_a_batch_running_more_tasks_than_its_max_running_is_warned_of() -> None:
    """A job of the account raised its array's throttle: Slurm runs more than the plan allows. The books hold (every
    task's worst case is reserved); the human is told (docs/adr/0059)."""
    cost = JobCost(gpu_hours_worst=0.1, cpu_hours_worst=0.1)
    with Store(PROJECT).transaction() as ledger:
        ledger.charges.append(Charge(grant_id="g-1", plan_hash="h", request_id="sw", target="lab", gpu_hours=0.6,
                                     cpu_hours=0.6, jobs=6, state="submitted", max_running=2,
                                     job_costs={f"30_{i}": cost for i in range(6)}))  # fmt: skip

    def rows(running: int) -> list[str]:
        return [f"job rid=sw task=t{i} idx={i} job=30_{i} sq={'RUNNING' if i < running else 'PENDING'} sq_limit=3600 "
                "res=1,1,100,0,60" for i in range(6)]  # fmt: skip

    st, _ = status_call(cast(Remote, _Cluster(*rows(2))), "lab", PROJECT)
    assert not st.warnings
    st, _ = status_call(cast(Remote, _Cluster(*rows(3))), "lab", PROJECT)
    assert len(st.warnings) == 1 and "runs 3 tasks at once, more than the 2" in st.warnings[0]


def test_a_status_read_while_slurm_does_not_answer_settles_nothing() -> None:
    """squeue timed out (a busy controller): job 11's marker says it ended, but only Slurm's word settles a charge,
    and its silence is no word that it forgot the job. The charge stays held (it was settled at its worst case)."""
    _books()
    marked = "job rid=r1 job=11 rc=0 sig=none elapsed=900 limit=3600 res=1,1,100,1,60"
    st, _ = status_call(cast(Remote, _Cluster(marked, slurm="down")), "lab", PROJECT)
    assert st.slurm == "down" and st.jobs[0].state == "succeeded"  # the marker describes how it ended
    charge = next(c for c in Store(PROJECT).load().charges if c.request_id == "r1")
    assert charge.state == "submitted" and charge.job_costs["11"].gpu_hours_used is None
    st, _ = status_call(cast(Remote, _Cluster(marked)), "lab", PROJECT)  # Slurm answers and no longer lists it
    assert [c.job_costs["11"].at_worst for c in Store(PROJECT).archive.charges()] == [True]
