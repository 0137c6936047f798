"""Settlement on Slurm's word (pure arithmetic) and the broker's bounded watch over unsettled charges."""

from __future__ import annotations

import pytest

from rsk.broker import books
from rsk.ledger import guard
from rsk.ledger.models import Charge, JobCost
from rsk.ledger.store import Store


def test_an_ended_job_counts_its_share_of_the_limit_slurm_reports_or_its_worst_case() -> None:
    cost = JobCost(gpu_hours_worst=2.0, cpu_hours_worst=4.0)
    assert guard.used(cost, (900, 3600)) == (0.5, 1.0)  # a quarter of its limit
    assert guard.used(cost, (7200, 3600)) == (2.0, 4.0)  # never past its worst case
    assert guard.used(cost, None) == (2.0, 4.0)  # Slurm's record was gone
    assert guard.used(cost, (60, None)) == (2.0, 4.0)  # Slurm named no limit


def _submitted(store: Store, target: str, jobs: dict[str, JobCost]) -> None:
    with store.transaction() as ledger:
        ledger.charges.append(Charge(grant_id="g-1", plan_hash="h", request_id="r1", target=target, gpu_hours=1.0,
                                     cpu_hours=1.0, state="submitted", job_costs=jobs))  # fmt: skip


def test_the_watch_polls_only_targets_with_unsettled_jobs_and_settling_is_slurms_word() -> None:
    running, ended = Store("p1"), Store("p2")
    _submitted(running, "lab", {"11": JobCost(gpu_hours_worst=1.0, cpu_hours_worst=1.0)})
    _submitted(ended, "lab", {"12": JobCost(gpu_hours_worst=1.0, cpu_hours_worst=1.0, gpu_hours_used=0.1,
                                            cpu_hours_used=0.1)})  # fmt: skip
    assert guard.held_jobs(running.load(), "lab") == {"11": "r1"}
    assert guard.held_line(guard.held_jobs(running.load(), "lab")) == b"held 11:r1\n"
    polled: list[tuple[str, str]] = []
    assert books.watch_once(lambda target, project: polled.append((project, target))) == 1
    assert polled == [("p1", "lab")]
    assert guard.settle(running, "lab", {"11": None}) == 1  # its record gone: the worst case, said so
    cost = running.archive.charges()[0].job_costs["11"]
    assert cost.gpu_hours_used == 1.0 and cost.at_worst
    assert books.watch_once(lambda target, project: polled.append((project, target))) == 0


def test_the_watch_leaves_a_project_a_command_of_the_broker_just_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent's `rsk wait` reads the project every few seconds: the poll's own read would only do it again."""
    from rsk.ops import status

    _submitted(Store("p3"), "lab", {"13": JobCost(gpu_hours_worst=1.0, cpu_hours_worst=1.0)})
    clock = [1000.0]
    monkeypatch.setattr(status.time, "monotonic", lambda: clock[0])
    polled: list[str] = []
    monkeypatch.setitem(status._READ, ("p3", "lab"), 995.0)  # read 5 s ago, Slurm answering
    assert books.watch_once(lambda target, project: polled.append(project), fresh_s=15) == 1 and polled == []
    clock[0] = 1011.0  # 16 s ago: the poll reads it
    assert books.watch_once(lambda target, project: polled.append(project), fresh_s=15) == 1 and polled == ["p3"]


def test_only_slurms_word_on_an_ended_job_settles_it_never_the_markers() -> None:
    from rsk.ops.status import jobs_from
    from rsk.wire.protocol import parse

    n = "0" * 32
    rows = [
        "job rid=a job=1 sq=COMPLETED sq_elapsed=60 sq_limit=600 rc=0 elapsed=1 res=1,1,1,0,1",  # squeue's word
        "job rid=b job=2 sq= ac=TIMEOUT ac_elapsed=600 ac_limit=600",  # sacct's, once squeue forgot it
        "job rid=c job=3 sq= rc=0 sig=none elapsed=1 limit=600",  # only its own marker: no record
        "job rid=d job=4 sq=COMPLETING sq_elapsed=60 sq_limit=600",  # not ended yet
    ]
    out = parse("".join(f"@@{n} {r}\n" for r in [*rows, "done rc=0"]), n)
    assert out is not None
    jobs = jobs_from(out)
    assert [j._slurm_record for j in jobs] == [(60, 600), (600, 600), None, None]
    assert [j._slurm_listed for j in jobs] == [True, True, False, True]
    assert jobs[2].state == "succeeded"  # the marker still describes the outcome


def test_a_forged_need_shows_a_task_skipped_but_settles_nothing_slurm_still_lists() -> None:
    """A job writes `needs=` into its request's journal lines so that a pending sibling reads `skipped`: the
    state is shown, but the sibling's charge stays open while Slurm lists it, and skips pass on in order."""
    from rsk.ops.status import jobs_from
    from rsk.wire.protocol import parse

    n = "0" * 32
    rows = [
        "job rid=w idx=0 task=train job=5_0 sq=FAILED sq_elapsed=30 sq_limit=600 res=1,1,1,1,10",
        "job rid=w idx=1 task=eval job=6 sq=PENDING sq_elapsed=0 sq_limit=600 needs=0:ok res=1,1,1,1,10",
        "job rid=w idx=2 task=report job=7 sq=CANCELLED sq_elapsed=0 sq_limit=600 needs=1:ok,0:any res=1,1,1,1,10",
        "job rid=w idx=3 task=tidy job=8 sq=PENDING needs=0:any res=1,1,1,1,10",  # ended edge: waits, runs
        "job rid=w idx=4 task=mine job=9 sq=CANCELLED cancel=1 needs=0:ok",  # rsk cancelled it: cancelled
    ]
    out = parse("".join(f"@@{n} {r}\n" for r in [*rows, "done rc=0"]), n)
    assert out is not None
    jobs = jobs_from(out)
    assert [j.state for j in jobs] == ["failed", "skipped", "skipped", "pending", "cancelled"]
    assert jobs[1].where == "(needs train: failed)" and jobs[2].where == "(needs eval: skipped)"
    assert jobs[1]._slurm_record is None and jobs[1]._slurm_listed  # pending on Slurm's word: not settled
    assert jobs[2]._slurm_record == (0, 600)  # Slurm cancelled it before it ran: settles at nothing


def test_since_is_the_oldest_hold_whose_outcome_the_ledger_does_not_know_less_the_skew() -> None:
    from datetime import UTC, datetime, timedelta

    from rsk.ledger.models import Approval, Ledger, Use

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    ledger = Ledger(
        project="p",
        charges=[
            Charge(grant_id="g", plan_hash="h", request_id="a", target="lab", gpu_hours=0, cpu_hours=1,
                   created=t0 + timedelta(minutes=5)),
            Charge(grant_id="g", plan_hash="h", request_id="b", target="lab", gpu_hours=0, cpu_hours=1,
                   created=t0, state="submitted"),  # its outcome is known: not counted
            Charge(grant_id="g", plan_hash="h", request_id="c", target="other", gpu_hours=0, cpu_hours=1,
                   created=t0),  # another target
        ],
        approvals=[Approval(plan_hash="h", decided_by="human",
                            uses=[Use(request_id="d", target="lab", at=t0 + timedelta(minutes=2))])],
    )  # fmt: skip
    base = int(t0.timestamp()) - guard.SINCE_SKEW_S
    assert guard.since_line(ledger, "lab") == f"since {base + 120}\n".encode()
    assert guard.since_line(ledger, "lab", "a") == f"since {base + 300}\n".encode()
    assert guard.since_line(ledger, "lab", "b") == b""  # nothing whose outcome is unknown: no line
    assert guard.since_line(ledger, "nowhere") == b""


def test_only_slurms_word_that_a_job_never_started_gives_its_job_count_back() -> None:
    """A chain's link Slurm removed (an earlier link succeeded), a workflow's task skipped, a job cancelled while
    it pended: squeue says CANCELLED after no run time on no node, and the job counts no job against the grant.
    A job that started cannot read so: Slurm keeps its nodes (or, for a failed one, its reason), whatever its
    markers and journal say."""
    from rsk.ledger.decide import usage_by_grant
    from rsk.ops.status import ended_records, jobs_from
    from rsk.wire.protocol import parse

    n = "0" * 32
    rows = [
        "job rid=c idx=0 task=link1 job=21 sq=COMPLETED sq_elapsed=40 sq_limit=60 where=n1 res=1,1,1,0,1",
        "job rid=c idx=1 task=link2 job=22 sq=CANCELLED sq_elapsed=0 sq_limit=60 where= res=1,1,1,0,1",
        "job rid=c idx=2 task=link3 job=23 sq=CANCELLED sq_elapsed=0 sq_limit=60 rc= elapsed=0 res=1,1,1,0,1",
        # it ran and cancelled itself within its first second: Slurm names its node
        "job rid=x job=24 sq=CANCELLED sq_elapsed=0 sq_limit=60 where=n2 res=1,1,1,0,1",
        # it failed at once: Slurm gives its reason, not an empty place
        "job rid=y job=25 sq=FAILED sq_elapsed=0 sq_limit=60 where=(NonZeroExitCode) res=1,1,1,0,1",
        # its own marker says it never ran; squeue says it is still listed, running
        "job rid=z job=26 sq=RUNNING sq_elapsed=5 sq_limit=60 where=n1 rc=0 elapsed=0 res=1,1,1,0,1",
        # squeue forgot it and only its marker speaks: counted as run
        "job rid=w job=27 sq= rc=0 sig=none elapsed=0 limit=60 res=1,1,1,0,1",
    ]
    out = parse("".join(f"@@{n} {r}\n" for r in [*rows, "done rc=0"]), n)
    assert out is not None
    jobs = jobs_from(out)
    assert [j.job_id for j in jobs if j._never_started] == ["22", "23"]
    store = Store("p")
    costs = {j.job_id: JobCost(gpu_hours_worst=0.0, cpu_hours_worst=1 / 60) for j in jobs}
    _submitted(store, "lab", costs)
    never = {j.job_id for j in jobs if j._never_started}
    assert guard.settle(store, "lab", ended_records(jobs), never) == 6  # 26 still runs
    charge = store.load().charges[0]
    assert [j for j, c in charge.job_costs.items() if c.never_ran] == ["22", "23"]
    assert charge.job_costs["27"].at_worst and not charge.job_costs["27"].never_ran
    assert [charge.job_costs[j].run_s for j in ("21", "22", "27")] == [40, 0, None]  # Slurm's run time, if known
    assert usage_by_grant([charge])["g-1"].jobs_spent == 5  # of 7 submitted, 2 never started
    assert guard.settle(store, "lab", {"26": (30, 60)}) == 1  # the last one ends: the charge settles and goes cold
    archived = store.archive.charges()[0]
    assert sum(c.never_ran for c in archived.job_costs.values()) == 2
    audit = [e.detail for e in store.read_audit() if e.event == "charge-settled"]
    assert audit and "2 job(s) never started on Slurm's word" in audit[-1]


def test_a_settled_chain_archived_keeps_only_the_jobs_that_ran_in_its_grants_count() -> None:
    from datetime import UTC, datetime

    from rsk.ledger.archive import compact
    from rsk.ledger.decide import usage_by_grant
    from rsk.ledger.models import Grant, Ledger

    def cost(never: bool) -> JobCost:
        return JobCost(gpu_hours_worst=1.0, cpu_hours_worst=1.0, gpu_hours_used=0.0 if never else 0.5,
                       cpu_hours_used=0.0 if never else 0.5, never_ran=never)  # fmt: skip

    g = Grant(id="g-1", jobs=3)
    ledger = Ledger(project="p", grants=[g], charges=[
        Charge(grant_id="g-1", plan_hash="h", request_id="c", target="lab", gpu_hours=3.0, cpu_hours=3.0, jobs=3,
               state="settled", job_costs={"1": cost(False), "2": cost(True), "3": cost(True)})])  # fmt: skip
    before = usage_by_grant(ledger.charges, grants=ledger.grants)["g-1"]
    assert len(compact(ledger, datetime.now(UTC))) == 1 and not ledger.charges
    after = usage_by_grant(ledger.charges, grants=ledger.grants)["g-1"]
    assert before.jobs_spent == after.jobs_spent == 1 and g.archived_jobs == 1
