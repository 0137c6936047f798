"""A lost answer's request adopted from what the cluster shows: the whole plan stays on the books. A task no job
was found for keeps its worst case (a stand-in) until a job of the request is found later; the stand-in is
never a job id the cluster is sent, counts against --max-active, and keeps the charge from settling."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rsk.ledger import guard
from rsk.ledger.decide import usage_by_grant
from rsk.ledger.models import Charge
from rsk.ledger.store import Store
from rsk.wire.protocol import Plan

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)  # the clock, injected: the hold was made at T0


def _reserved(store: Store, jobs: int = 2, rid: str = "wf") -> Charge:
    ch = Charge(grant_id="g-1", plan_hash="h", request_id=rid, target="lab", gpu_hours=0.0, cpu_hours=2.0,
                jobs=jobs, created=T0)  # fmt: skip
    with store.transaction() as ledger:
        ledger.charges.append(ch)
    return ch


def _charge(store: Store, rid: str = "wf") -> Charge:
    return next(c for c in store.load().charges if c.request_id == rid)


def _active(store: Store, planned_at: datetime) -> int:
    plan = Plan.model_construct(active_jobs=[])
    return guard.count_active(store.load(), "lab", plan, planned_at, "another")


def test_a_lost_answer_adopted_from_part_of_its_jobs_keeps_the_rest_of_the_plan_at_its_worst_case() -> None:
    store = Store("p1")
    _reserved(store)
    assert guard.adopt(store, "lab", {"wf": ["10_0"]}) == 1  # status listed only t0: t1 was hidden
    ch = _charge(store)
    assert ch.state == "submitted" and set(ch.job_costs) == {"10_0", "unfound:1"}
    assert [c.cpu_hours_worst for c in ch.job_costs.values()] == [1.0, 1.0]
    u = usage_by_grant(store.load().charges)["g-1"]
    assert u.cpu_hours == 2.0 and u.jobs == 2  # the whole plan, as when it was reserved
    assert guard.held_jobs(store.load(), "lab") == {"10_0": "wf"}  # a stand-in is never a job sent to the cluster
    assert guard.submitted_jobs(store.load(), "wf", "h", "lab") == ["10_0"]
    assert _active(store, T0 + timedelta(days=1)) == 1 + 1  # the task not found may pend or run: counted
    assert guard.since_line(store.load(), "lab") != b""  # its outcome is not known whole: reconcile reads since
    assert guard.settle(store, "lab", {"10_0": (60, 600)}) == 1
    assert _charge(store).state == "submitted"  # t0 ended; the plan's t1 is still held at its worst case
    assert usage_by_grant(store.load().charges)["g-1"].cpu_hours == 0.1 + 1.0


def test_a_job_found_later_for_the_request_takes_the_place_of_a_task_not_found_and_settles_on_slurms_word() -> None:
    store = Store("p2")
    _reserved(store)
    guard.adopt(store, "lab", {"wf": ["10_0"]})
    assert guard.adopt(store, "lab", {"wf": ["10_0", "11_1"]}) == 1  # reconcile found t1 by its batch script
    ch = _charge(store)
    assert set(ch.job_costs) == {"10_0", "11_1"} and ch.job_costs["11_1"].cpu_hours_worst == 1.0
    assert guard.held_jobs(store.load(), "lab") == {"10_0": "wf", "11_1": "wf"}  # status shows Slurm's state
    assert guard.since_line(store.load(), "lab") == b""
    assert guard.adopt(store, "lab", {"wf": ["10_0", "11_1"]}) == 0  # nothing new: nothing written
    guard.settle(store, "lab", {"10_0": (60, 600), "11_1": (300, 600)})
    settled = store.archive.charges() or store.load().charges
    assert [c.state for c in settled] == ["settled"]
    assert usage_by_grant(settled)["g-1"].cpu_hours == 0.1 + 0.5


def test_a_found_job_another_book_holds_is_not_taken_again_and_a_whole_charge_takes_no_more() -> None:
    store = Store("p3")
    _reserved(store, jobs=1, rid="a")
    guard.adopt(store, "lab", {"a": ["20"]})
    assert set(_charge(store, "a").job_costs) == {"20"}
    _reserved(store, jobs=2, rid="b")
    assert guard.adopt(store, "lab", {"b": ["20"]}) == 0  # held by a's charge already: b keeps its reservation
    assert _charge(store, "b").state == "reserved"
    assert guard.adopt(store, "lab", {"a": ["21"]}) == 0  # a's plan is whole: nothing joins it
    assert set(_charge(store, "a").job_costs) == {"20"}


def test_two_holds_of_one_request_never_adopt_the_same_job_and_the_one_left_stays_reserved() -> None:
    store = Store("p4")
    first = _reserved(store, jobs=1, rid="r")
    second = _reserved(store, jobs=1, rid="r")  # decided again (another plan) while the first's answer was lost
    assert guard.adopt(store, "lab", {"r": ["30"]}) == 1
    states = {c.id: (c.state, set(c.job_costs)) for c in store.load().charges}
    assert sorted(states.values()) == [("reserved", set()), ("submitted", {"30"})], states
    assert {first.id, second.id} == set(states)


def test_a_job_found_for_a_request_whose_hold_an_error_after_go_gave_back_is_charged() -> None:
    """An `@@error` after `go` (which a process of the account can write in the program's place) gives the hold
    back; the cluster's word wins: a job of the request found after is adopted and charged."""
    store = Store("p5")
    with store.transaction() as ledger:  # made now: a hold given back stays where adoption looks for a day
        ledger.charges.append(Charge(grant_id="g-1", plan_hash="h", request_id="s", target="lab", gpu_hours=0.0,
                                     cpu_hours=1.0))  # fmt: skip
    guard.release(store, "s", "not submitted: sbatch-failed")
    assert _charge(store, "s").state == "released"
    assert usage_by_grant(store.load().charges).get("g-1") is None
    assert guard.adopt(store, "lab", {"s": ["60"]}) == 1  # status lists the request's job, running
    ch = _charge(store, "s")
    assert ch.state == "submitted" and set(ch.job_costs) == {"60"} and ch.job_costs["60"].cpu_hours_worst == 1.0
    assert guard.held_jobs(store.load(), "lab") == {"60": "s"}
    u = usage_by_grant(store.load().charges)["g-1"]
    assert u.jobs == 1 and u.cpu_hours == 1.0
    entry = [e for e in store.read_audit() if e.event == "charge-submitted"][-1]
    assert "given back" in entry.detail and "sbatch-failed" in entry.detail


def test_a_hold_given_back_takes_a_found_job_only_after_the_requests_live_holds() -> None:
    store = Store("p6")
    with store.transaction() as ledger:
        ledger.charges.append(Charge(grant_id="g-1", plan_hash="h1", request_id="s", target="lab", gpu_hours=0.0,
                                     cpu_hours=1.0, state="released", reason="not submitted"))  # fmt: skip
    _reserved(store, jobs=1, rid="s")  # launched again; its answer lost too
    assert guard.adopt(store, "lab", {"s": ["70"]}) == 1
    states = sorted((c.state, tuple(c.job_costs)) for c in store.load().charges)
    assert states == [("released", ()), ("submitted", ("70",))], states


def test_status_warns_of_a_live_job_no_book_holds_and_of_no_other() -> None:
    from rsk.ops.status import JobState, Status, flag_unbooked

    store = Store("p7")
    _reserved(store, jobs=1, rid="a")
    guard.adopt(store, "lab", {"a": ["80"]})

    def job(jid: str, state: str, lease: str | None = None) -> JobState:
        return JobState.model_construct(job_id=jid, request_id="x", state=state, lease=lease)

    jobs = [job("80", "running"), job("81", "running"), job("82", "succeeded"), job("83", "pending", lease="dev")]
    st = flag_unbooked(Status(target="lab", project="p7", slurm="up", at="", jobs=[]).model_copy(update={"jobs": jobs}),
                       store.load())  # fmt: skip
    assert [w.split(" ")[1] for w in st.warnings] == ["81"], st.warnings  # a step is its lease's; ended ones are not
