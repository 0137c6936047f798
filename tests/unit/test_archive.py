"""The ledger's archive: what goes cold leaves the hot file whole, and nothing it decided changes."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from rsk.ledger.archive import GRACE, Archive, compact
from rsk.ledger.cards import find_card, list_cards
from rsk.ledger.decide import Facts, decide, usage_by_grant
from rsk.ledger.guard import submitted_jobs
from rsk.ledger.models import Approval, Card, CardPlan, Charge, Grant, JobCost, Ledger, Use, now
from rsk.ledger.store import Store
from rsk.wire.resources import Resources

AT = now()
LONG_AGO = AT - GRACE - timedelta(hours=1)
F = Facts(
    target="lab", plan_hash="h-new", request_id="r-new", partition="gpu", account="", qos="",
    resources=Resources(nodes=1, cpus=1, mem_mb=1024, gpus=1, time_min=60),
    commands=("true",), active=0, gpu_hours=1.0, cpu_hours=1.0,
)  # fmt: skip


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSK_HOME", str(tmp_path / "home"))


def settled(grant: Grant, rid: str, used: float, job: str) -> Charge:
    cost = JobCost(gpu_hours_worst=1.0, cpu_hours_worst=1.0, gpu_hours_used=used, cpu_hours_used=used)
    return Charge(grant_id=grant.id, plan_hash=f"h-{rid}", request_id=rid, target="lab", gpu_hours=1.0,
                  cpu_hours=1.0, state="settled", job_costs={job: cost}, submitted_at=LONG_AGO)  # fmt: skip


def card(status: str, decided_at: object = LONG_AGO, plan_hash: str = "h-c") -> Card:
    plan = CardPlan(target="lab", cluster="c", user="u", command="true", argv=["true"], kind="argv", workdir="/",
                    partition="gpu", account="", qos="", nodes=1, cpus=1, mem_mb=1, gpus=1, time_min=1,
                    gpu_hours=1.0, cpu_hours=1.0, estimate_start="now", policy_verdict="allow",
                    policy_reasons=[])  # fmt: skip
    return Card(plan_hash=plan_hash, request_id="r-c", requester="agent", status=status, target="lab",  # type: ignore[arg-type]
                request={}, plan=plan, decided_at=decided_at)  # fmt: skip


def test_settled_and_released_charges_leave_and_their_grant_keeps_what_they_spent() -> None:
    g = Grant(jobs=3, gpu_hours=10.0)
    released = Charge(grant_id=g.id, plan_hash="h-x", request_id="r-x", target="lab", gpu_hours=1.0,
                      cpu_hours=1.0, state="released", created=LONG_AGO)  # fmt: skip
    fresh = released.model_copy(update={"id": "ch-fresh", "request_id": "r-z", "created": AT - timedelta(hours=1)})
    running = Charge(grant_id=g.id, plan_hash="h-y", request_id="r-y", target="lab", gpu_hours=1.0, cpu_hours=1.0,
                     state="submitted", job_costs={"9": JobCost(gpu_hours_worst=1.0, cpu_hours_worst=1.0)})  # fmt: skip
    lg = Ledger(project="p", grants=[g], charges=[settled(g, "r1", 0.5, "1"), released, running, fresh])
    before = usage_by_grant(lg.charges, grants=lg.grants)[g.id]
    records = compact(lg, AT)
    assert sorted(r.kind for r in records) == ["charge", "charge"]
    # the running one stays: it may still settle; so does one given back within a day (a job found for it is charged)
    assert [ch.request_id for ch in lg.charges] == ["r-y", "r-z"]
    after = usage_by_grant(lg.charges, grants=lg.grants)[g.id]
    assert (after.jobs, after.gpu_hours, after.cpu_hours) == (before.jobs, before.gpu_hours, before.cpu_hours)
    assert (g.archived_jobs, g.archived_gpu_hours) == (1, 0.5)


def test_a_grant_budget_decides_the_same_once_its_history_is_archived() -> None:
    g = Grant(jobs=3)
    lg = Ledger(project="p", grants=[g], charges=[settled(g, f"r{i}", 0.1, str(i)) for i in range(2)])
    assert decide(lg, F, AT).kind == "grant"
    compact(lg, AT)
    assert lg.charges == [] and decide(lg, F, AT).kind == "grant"  # one job left
    lg.charges.append(settled(g, "r3", 0.1, "3"))
    compact(lg, AT)
    d = decide(lg, F, AT)
    assert d.kind == "ask" and d.closest_why == ["needs 1 job(s), 0 of 3 left"]  # three spent: used up


def test_approvals_leave_only_when_they_can_never_allow_or_settle_again() -> None:
    ended = JobCost(gpu_hours_worst=1, cpu_hours_worst=1, gpu_hours_used=0.1, cpu_hours_used=0.1)
    done = Use(request_id="r1", target="lab", state="submitted", submitted_at=LONG_AGO, jobs={"1": ended})
    open_job = done.model_copy(update={"jobs": {"2": JobCost(gpu_hours_worst=1, cpu_hours_worst=1)}})
    used_up = Approval(plan_hash="a", decided_by="h", uses_left=0, uses=[done])
    still_running = Approval(plan_hash="b", decided_by="h", uses_left=0, uses=[open_job])
    held = Approval(plan_hash="c", decided_by="h", uses_left=0, uses=[Use(request_id="r", target="lab", at=LONG_AGO)])
    recent_use = done.model_copy(update={"submitted_at": AT})
    just_used = Approval(plan_hash="d", decided_by="h", uses_left=0, uses=[recent_use])
    expired_long_ago = Approval(plan_hash="e", decided_by="h", expires=LONG_AGO)
    expired_just_now = Approval(plan_hash="f", decided_by="h", expires=AT - timedelta(minutes=1))
    live = Approval(plan_hash="g", decided_by="h", uses_left=2)
    lg = Ledger(project="p", approvals=[used_up, still_running, held, just_used, expired_long_ago, expired_just_now,
                                        live])  # fmt: skip
    records = compact(lg, AT)
    assert sorted(r.entry["plan_hash"] for r in records) == ["a", "e"]  # type: ignore[type-var]
    assert [a.plan_hash for a in lg.approvals] == ["b", "c", "d", "f", "g"]


def test_grants_leave_when_ended_a_day_ago_and_nothing_of_theirs_is_open() -> None:
    old = Grant(revoked=LONG_AGO)
    old_with_running_job = Grant(expires=LONG_AGO)
    recent = Grant(revoked=AT - timedelta(minutes=5))
    live = Grant()
    running = Charge(grant_id=old_with_running_job.id, plan_hash="h", request_id="r", target="lab", gpu_hours=1,
                     cpu_hours=1, state="submitted")  # fmt: skip
    lg = Ledger(project="p", grants=[old, old_with_running_job, recent, live], charges=[running])
    records = compact(lg, AT)
    assert [r.entry["id"] for r in records] == [old.id]
    assert [g.id for g in lg.grants] == [old_with_running_job.id, recent.id, live.id]


def test_cards_leave_once_approved_or_withdrawn_a_day_ago_and_a_denial_stays_to_deny_again() -> None:
    cards = [card("approved"), card("withdrawn"), card("denied"), card("pending", None), card("approved", AT)]
    lg = Ledger(project="p", cards=cards)
    compact(lg, AT)
    assert [c.status for c in lg.cards] == ["denied", "pending", "approved"]
    assert decide(lg, Facts(**{**F.__dict__, "plan_hash": "h-c"}), AT).kind == "deny"


def test_a_write_archives_first_and_what_must_be_remembered_is_still_found(tmp_path: Path) -> None:
    store = Store("p")
    g = Grant(jobs=10)
    gone_card = card("approved")
    with store.transaction() as lg:
        lg.grants.append(g)
        lg.charges.append(settled(g, "old-request", 0.2, "4242"))
        lg.cards.append(gone_card)
    hot = json.loads(store.path.read_text())
    assert hot["charges"] == [] and hot["cards"] == [] and hot["grants"][0]["archived_jobs"] == 1
    lines = [json.loads(x) for x in store.archive.path.read_text().splitlines()]
    assert sorted(x["kind"] for x in lines) == ["card", "charge"]
    # a wiped remote root: the ledger still knows the request's job, so it is never submitted again
    assert submitted_jobs(store.load(), "old-request", "h-old-request", "lab", store.archive) == ["4242"]
    assert submitted_jobs(store.load(), "old-request", "h-old-request", "lab") == []  # only the archive knows
    assert submitted_jobs(store.load(), "other", "h-old-request", "lab", store.archive) == []
    assert find_card(store.load(), gone_card.id, store.archive).status == "approved"
    assert [c.id for c in list_cards(store, include_decided=True)] == [gone_card.id]
    assert list_cards(store) == []


def test_an_entry_archived_twice_is_read_once_and_a_damaged_line_is_skipped(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "archive.jsonl")
    g = Grant(jobs=1)
    lg = Ledger(project="p", grants=[g], charges=[settled(g, "r1", 0.3, "7")])
    records = compact(lg, AT)
    archive.append(records)
    with archive.path.open("a") as fh:
        fh.write('{"schema_version": 1, "kind": "charge", "entry": {"broken\n')
    archive.append(records)  # a crash between the append and the hot file's rewrite, then the next write
    assert [c.request_id for c in archive.charges()] == ["r1"]
    assert [c.request_id for c in archive.charges('"request_id":"r1"')] == ["r1"]
    assert archive.charges('"request_id":"r2"') == []
