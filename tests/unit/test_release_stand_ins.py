"""A human releases a lost answer's stand-ins (`rsk grant release`): the tasks no job was found for count nothing
and no job from then on, the charge settles, the audit names the human and the reason; a real job is never dropped,
another request's books are never touched, and a job found later for the request is charged all the same."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rsk.errors import ConflictError, UsageError
from rsk.ledger import grants, guard, stand_ins
from rsk.ledger.decide import usage_by_grant
from rsk.ledger.models import Approval, Charge, Use
from rsk.ledger.store import Store
from rsk.wire.protocol import Plan

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)  # the clock, injected: the hold was made at T0


def _adopted(store: Store, rid: str = "wf", target: str = "lab", seen: str = "10_0") -> Charge:
    """A two-task workflow whose answer was lost, adopted from its first task's job alone."""
    ch = Charge(grant_id="g-1", plan_hash="h", request_id=rid, target=target, gpu_hours=0.0, cpu_hours=2.0, jobs=2,
                created=T0)  # fmt: skip
    with store.transaction() as ledger:
        ledger.charges.append(ch)
    assert guard.adopt(store, target, {rid: [seen]}) == 1
    return _charge(store, rid, target)


def _charge(store: Store, rid: str = "wf", target: str = "lab") -> Charge:
    return next(c for c in store.load().charges if c.request_id == rid and c.target == target)


def _active(store: Store) -> int:
    plan = Plan.model_construct(active_jobs=[])
    return guard.count_active(store.load(), "lab", plan, T0 + timedelta(days=1), "another")


def test_a_released_stand_in_counts_nothing_and_the_charge_settles_with_its_job_kept_and_audited() -> None:
    store = Store("rs1")
    ch = _adopted(store)
    assert stand_ins.count(store.load(), "lab", "wf") == 1 and _active(store) == 1 + 1
    guard.settle(store, "lab", {"10_0": (60, 600)})  # t0 ended; t1's stand-in still holds its worst case
    assert _charge(store).state == "submitted"
    shown = grants.stand_ins_by_grant(store.load().charges)  # what `rsk grant list` tells the human
    assert [(h.request_id, h.target, h.count) for h in shown["g-1"]] == [("wf", "lab", 1)]
    [h] = stand_ins.release(store, "lab", "wf", 1, "ann (terminal)", "the submit was cut before t1's sbatch")
    assert h.book == f"charge {ch.id}" and h.stand_ins == ["unfound:1"] and h.jobs == ["10_0"] and h.cpu_hours == 1.0
    after = _charge(store)
    assert after.state == "settled" and set(after.job_costs) == {"10_0", "unfound:1"}  # the job id is kept
    assert after.job_costs["10_0"].cpu_hours_used == pytest.approx(0.1)  # Slurm's word on t0, untouched
    u = usage_by_grant(store.load().charges)["g-1"]
    assert u.jobs == 1 and u.cpu_hours == pytest.approx(0.1)  # the stand-in: no job, no hours
    assert _active(store) == 0
    assert guard.since_line(store.load(), "lab") != b""  # the cluster still looks for a job of the task since the hold
    assert stand_ins.count(store.load(), "lab", "wf") == 0 and grants.stand_ins_by_grant(store.load().charges) == {}
    [entry] = [e for e in store.read_audit() if e.event == "stand-ins-released"]
    assert entry.by == "ann (terminal)" and entry.request_id == "wf" and entry.rule == f"charge {ch.id}"
    assert "never ran" in entry.detail and "cut before t1's sbatch" in entry.detail and "settled" in entry.detail


def test_a_job_found_after_a_release_is_charged_again_and_the_charge_reopens() -> None:
    store = Store("rs2")
    _adopted(store)
    guard.settle(store, "lab", {"10_0": (60, 600)})
    stand_ins.release(store, "lab", "wf", 1, "ann", "never ran")
    assert _charge(store).state == "settled"
    assert [c.request_id for c in store.load().charges] == ["wf"]  # kept hot (never archived): it can still adopt
    assert guard.adopt(store, "lab", {"wf": ["10_0", "11_1"]}) == 1  # the human was wrong: t1's job turns up
    ch = _charge(store)
    assert ch.state == "submitted" and set(ch.job_costs) == {"10_0", "11_1"}
    assert ch.job_costs["11_1"].cpu_hours_worst == 1.0 and ch.job_costs["11_1"].cpu_hours_used is None
    assert guard.held_jobs(store.load(), "lab") == {"11_1": "wf"}  # listed and cancellable by id
    assert usage_by_grant(store.load().charges)["g-1"].jobs == 2 and _active(store) == 1
    assert usage_by_grant(store.load().charges)["g-1"].cpu_hours == pytest.approx(0.1 + 1.0)
    guard.settle(store, "lab", {"11_1": (600, 600)})
    assert usage_by_grant(store.load().charges + store.archive.charges())["g-1"].cpu_hours == pytest.approx(1.1)


def test_a_release_touches_only_the_requests_stand_ins_on_its_target_and_never_a_job() -> None:
    store = Store("rs3")
    _adopted(store, rid="wf")
    _adopted(store, rid="other", seen="20_0")
    _adopted(store, rid="wf", target="lab2", seen="30_0")
    stand_ins.release(store, "lab", "wf", 1, "ann", "")
    assert stand_ins.count(store.load(), "lab", "other") == 1  # another request's stand-in still holds
    assert stand_ins.count(store.load(), "lab2", "wf") == 1  # the same request id on another target too
    assert _charge(store, "wf").job_costs["10_0"].cpu_hours_used is None  # its running job: open, held by id
    assert _charge(store, "wf").state == "submitted"  # settles when its job does
    assert guard.held_jobs(store.load(), "lab") == {"10_0": "wf", "20_0": "other"}
    guard.settle(store, "lab", {"10_0": (60, 600)})
    assert _charge(store, "wf").state == "settled"


def test_a_release_refuses_when_the_books_changed_since_the_evidence_and_writes_nothing() -> None:
    store = Store("rs4")
    _adopted(store)
    before = store.path.read_bytes()
    with pytest.raises(ConflictError) as err:
        stand_ins.release(store, "lab", "wf", 2, "ann", "")  # the evidence counted another stand-in
    assert err.value.code == "books-changed"
    after = store.path.read_bytes()
    assert after == before and stand_ins.count(store.load(), "lab", "wf") == 1
    assert not [e for e in store.read_audit() if e.event == "stand-ins-released"]


def test_an_approval_uses_stand_ins_are_released_and_a_later_job_joins_the_use() -> None:
    store = Store("rs5")
    with store.transaction() as ledger:
        ledger.approvals.append(Approval(plan_hash="h", decided_by="ann", uses_left=0,
                                         uses=[Use(request_id="ap", target="lab", at=T0)]))  # fmt: skip
    guard.adopt(store, "lab", {"ap": ["40"]})
    [use] = store.load().approvals[0].uses
    assert set(use.jobs) == {"40"}  # the card is gone: its plan counts one job, nothing stands in
    with store.transaction() as ledger:  # a plan of three: two tasks not found
        ledger.approvals[0].uses[0].jobs |= {f"unfound:{i}": use.jobs["40"].model_copy() for i in (1, 2)}
    assert _active(store) == 1 + 2  # job 40, and the two tasks not found
    [h] = stand_ins.release(store, "lab", "ap", 2, "ann", "")
    assert h.book.startswith("approval ") and h.stand_ins == ["unfound:1", "unfound:2"]
    assert _active(store) == 1  # job 40 alone
    assert guard.adopt(store, "lab", {"ap": ["40", "41"]}) == 1
    assert "41" in store.load().approvals[0].uses[0].jobs and guard.held_jobs(store.load(), "lab") == {
        "40": "ap",
        "41": "ap",
    }


def test_the_human_command_refuses_a_request_with_nothing_held_before_asking_the_cluster() -> None:
    from rsk.ops.release import release

    with pytest.raises(UsageError) as err:
        release("lab", "rs6", "nothing", "ann", "")  # no remote is opened: the lab target is not even read
    assert err.value.code == "not-found" and "holds no stand-in" in str(err.value)
