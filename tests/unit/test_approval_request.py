"""An approval allows the request its card names (docs/adr/0052): another request of the same plan files its own
card and never takes the use kept for the card's request; uses a human gives beyond that one are open to other
requests of the plan, whose own cards then wait no more. Pure decisions with an injected clock, and the guard's
transaction on a real ledger file (no cluster)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from rsk.errors import PendingApproval
from rsk.ledger.cards import approve, find_card, wait_for_card
from rsk.ledger.decide import Facts, decide, find_approval
from rsk.ledger.guard import Allowed, authorize_in
from rsk.ledger.models import LEDGER_SCHEMA, Approval, Ledger, Use, migrate
from rsk.ledger.store import Store
from rsk.wire.protocol import Plan, Request, TaskPlan
from rsk.wire.resources import Resources

AT = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
F = Facts(
    target="lab", plan_hash="h1", request_id="r-a", partition="cpu", account="", qos="",
    resources=Resources(nodes=1, cpus=1, mem_mb=100, gpus=0, time_min=10),
    commands=("true",), active=0, gpu_hours=0.0, cpu_hours=0.2,
)  # fmt: skip
PROJECT = "p"


def _ledger(*approvals: Approval) -> Ledger:
    return Ledger(project=PROJECT, approvals=list(approvals))


def _approval(left: int = 1, **kw: object) -> Approval:
    return Approval(plan_hash="h1", decided_by="human", uses_left=left, card_id="c-a", request_id="r-a", **kw)  # type: ignore[arg-type]


def test_the_cards_request_runs_on_its_approval_and_another_request_of_the_same_plan_does_not() -> None:
    lg = _ledger(_approval())
    assert decide(lg, F, AT).kind == "approval"
    other = decide(lg, replace(F, request_id="r-b"), AT)
    assert other.kind == "ask"
    assert "allows request r-a (card c-a), not this one" in other.reason


def test_uses_beyond_the_cards_request_are_open_to_others_but_the_one_kept_for_it_never_is() -> None:
    a = _approval(left=2)
    assert find_approval(_ledger(a), "h1", AT, "r-b") is a  # one spare use
    a.uses_left, a.uses = 1, [Use(request_id="r-b", target="lab", state="submitted")]
    assert find_approval(_ledger(a), "h1", AT, "r-c") is None  # the last one is r-a's
    assert find_approval(_ledger(a), "h1", AT, "r-a") is a
    a.uses_left, a.uses = 0, [*a.uses, Use(request_id="r-a", target="lab", state="submitted")]
    assert find_approval(_ledger(a), "h1", AT, "r-a") is None and decide(_ledger(a), F, AT).reason.endswith("used up")


def test_a_use_the_cards_request_gave_back_is_kept_for_it_again() -> None:
    a = _approval(left=2, uses=[Use(request_id="r-a", target="lab", state="released")])
    assert find_approval(_ledger(a), "h1", AT, "r-b") is a  # 2 left, one of them r-a's
    a.uses_left = 1
    assert find_approval(_ledger(a), "h1", AT, "r-b") is None


def test_the_approval_named_for_a_request_is_taken_before_another_requests_spare_uses() -> None:
    spare = _approval(left=3)
    own = Approval(plan_hash="h1", decided_by="human", card_id="c-b", request_id="r-b")
    assert find_approval(_ledger(spare, own), "h1", AT, "r-b") is own


def test_an_approval_from_before_requests_were_named_allows_any_request_of_its_plan() -> None:
    legacy = Approval(plan_hash="h1", decided_by="human", card_id="c-a")
    assert find_approval(_ledger(legacy), "h1", AT, "r-b") is legacy


def test_an_expired_approval_allows_not_even_its_cards_request() -> None:
    a = _approval(expires=AT + timedelta(minutes=5))
    assert decide(_ledger(a), F, AT).kind == "approval"
    later = decide(_ledger(a), F, AT + timedelta(minutes=5))
    assert later.kind == "ask" and "expired at" in later.reason


def test_a_version_10_ledger_names_each_approvals_request_from_its_card() -> None:
    raw = {"schema_version": 10, "project": PROJECT,
           "cards": [{"id": "c-a", "request_id": "r-a"}],
           "approvals": [{"id": "a-1", "card_id": "c-a"}, {"id": "a-2", "card_id": "c-gone"}]}  # fmt: skip
    out = migrate(raw)
    assert out["schema_version"] == LEDGER_SCHEMA
    assert out["approvals"] == [
        {"id": "a-1", "card_id": "c-a", "request_id": "r-a"},
        {"id": "a-2", "card_id": "c-gone"},
    ]


# the guard, on a real ledger file ----------------------------------------------------------------------------------
def _plan() -> Plan:
    task = TaskPlan(nodes=1, cpus=1, mem_mb=100, gpus=0, time_min=10, argv=["true"])
    return Plan(hash="h1", cluster="c", user="u", root="/r", hostkey="k", scripts="s", policy="p", project=PROJECT,
                name="job", kind="argv", workdir="/w", path="", partition="cpu", account="", qos="", nodes=1, cpus=1,
                mem_mb=100, gpus=0, time_min=10, env=[], argv=["true"], tasks=[task])  # fmt: skip


def _decide(rid: str) -> Allowed | PendingApproval:
    store = Store(PROJECT)
    request = Request(project=PROJECT, request_id=rid, argv=["true"], requester="agent")
    with store.transaction() as ledger:
        verdict = authorize_in(store, ledger, "lab", _plan(), request, AT)
    assert isinstance(verdict, Allowed | PendingApproval), verdict
    return verdict


def _card(verdict: Allowed | PendingApproval) -> str:
    assert isinstance(verdict, PendingApproval), verdict
    return str(verdict.details["card_id"])


def test_a_second_request_of_the_same_plan_files_its_own_card_and_cannot_ride_the_firsts_approval() -> None:
    first, second = _decide("r-a"), _decide("r-b")
    assert first.details["new_card"] and second.details["new_card"]  # type: ignore[union-attr]
    card_a, card_b = _card(first), _card(second)
    assert card_a != card_b
    assert _card(_decide("r-b")) == card_b  # the same request finds its own card again
    cards = Store(PROJECT).load().cards
    assert [(c.id, c.request_id) for c in cards] == [(card_a, "r-a"), (card_b, "r-b")]
    approval = approve(Store(PROJECT), card_a, "human")
    assert approval.request_id == "r-a"
    assert _card(_decide("r-b")) == card_b  # r-b still waits on its own card: no ride
    allowed = _decide("r-a")
    assert isinstance(allowed, Allowed) and allowed.kind == "approval" and allowed.id == approval.id
    assert find_card(Store(PROJECT).load(), card_b).status == "pending"


def test_a_spare_use_lets_another_requests_card_go_on_and_its_wait_follows() -> None:
    card_a, card_b = _card(_decide("r-a")), _card(_decide("r-b"))
    with pytest.raises(PendingApproval):
        wait_for_card(Store(PROJECT), card_b, timeout=0)
    approve(Store(PROJECT), card_a, "human", uses=2)
    # r-b's wait returns (a use is open to it) and its launch decides: the spare use, its card withdrawn by rsk
    assert wait_for_card(Store(PROJECT), card_b, timeout=0).id == card_b
    allowed = _decide("r-b")
    assert isinstance(allowed, Allowed) and allowed.kind == "approval"
    b = find_card(Store(PROJECT).load(), card_b)
    assert b.status == "withdrawn" and b.superseded_by == allowed.id
    assert wait_for_card(Store(PROJECT), card_b, timeout=0).status == "withdrawn"  # its wait follows the job
    # the last use is r-a's: a third request asks, r-a runs
    assert isinstance(_decide("r-c"), PendingApproval)
    assert isinstance(_decide("r-a"), Allowed)
