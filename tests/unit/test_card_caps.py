"""An allowed agent cannot grow the human's hot ledger without bound with cards (docs/adr/0067): a card's big tasks
go beside the ledger as many tasks do, a card too big for the ledger is refused, one OS user has at most
MAX_PENDING_CARDS cards waiting in a project, and a card its agent withdraws leaves the hot ledger at once. The guard
on a real ledger file; no cluster."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rsk.errors import CapReached, Exit, PendingApproval, RskError, UsageError
from rsk.ledger.cards import card_request, find_card, whole, withdraw
from rsk.ledger.guard import authorize_in
from rsk.ledger.models import CARD_MAX_BYTES, MAX_PENDING_CARDS
from rsk.ledger.store import Store
from rsk.local.caller import Caller, Rights, acting_for
from rsk.wire.protocol import Plan, Request, TaskPlan
from tests.ui_cards import file_sweep

AT = datetime(2026, 12, 7, tzinfo=UTC)


def _ask(project: str, rid: str, argv: list[str], script: str | None = None) -> RskError:
    """A launch of one command that no grant covers (a GPU): the guard's verdict."""
    request = Request(project=project, request_id=rid, requester="agent", gpus=1, time_min=30, argv=argv,
                      script=script)  # fmt: skip
    plan = Plan(hash=rid.ljust(64, "0"), cluster="c", user="u", root="/r", hostkey="k", scripts="s", policy="p",
                project=project, name="job", kind="script" if script else "argv", workdir="/w", path="",
                partition="gpu", account="", qos="", nodes=1, cpus=1, mem_mb=1000, gpus=1, time_min=30, env=[],
                argv=argv, script=script, tasks=[TaskPlan(nodes=1, cpus=1, mem_mb=1000, gpus=1, time_min=30,
                                                          argv=argv)])  # fmt: skip
    store = Store(project)
    with store.transaction() as ledger:
        verdict = authorize_in(store, ledger, "lab", plan, request, AT)
    assert isinstance(verdict, RskError), verdict
    return verdict


def _as(user: str) -> Caller:
    return Caller(env={}, cwd=Path("/"), ppid=1,
                  rights=Rights(uid=os.getuid() + 1, user=user, owner=False, projects=None))  # fmt: skip


def test_a_batch_of_big_tasks_keeps_them_beside_the_ledger_not_in_it(project: str) -> None:
    """100 tasks of 50 KB commands (5 MB): the card lists the first that fit in a few KB and keeps every one beside
    the ledger (before, the ledger held them twice: 10 MB a card)."""
    card = file_sweep(project, n=100, odd_at=50, argv_bytes=50_000)
    store = Store(project)
    assert card.tasks_file and card.plan.tasks == [] and "tasks" not in card.request
    assert store.path.stat().st_size < 32 * 1024
    assert len(card_request(store, card).tasks) == 100 and len(whole(store, card).plan.tasks) == 100


def test_a_card_too_big_for_the_ledger_is_refused_and_nothing_is_filed(project: str) -> None:
    store = Store(project)
    big = _ask(project, "big-1", ["python", "-c", "x" * (CARD_MAX_BYTES // 2 + 1)])  # in the request and the plan
    assert isinstance(big, UsageError) and big.code == "card-too-big" and big.exit_code == Exit.USAGE
    assert "--code" in (big.hint or "")
    script = _ask(project, "big-2", ["sh"], script="echo hi\n" * (CARD_MAX_BYTES // 8))
    assert isinstance(script, UsageError) and script.code == "card-too-big"
    assert store.load().cards == []
    fine = _ask(project, "small-1", ["python", "-c", "x" * 20_000])
    assert isinstance(fine, PendingApproval)


def test_one_user_has_at_most_max_pending_cards_waiting_and_withdrawing_one_makes_room(project: str) -> None:
    store = Store(project)
    with acting_for(_as("agent1")):
        for i in range(MAX_PENDING_CARDS):
            assert isinstance(_ask(project, f"r-{i}", ["true", str(i)]), PendingApproval)
        over = _ask(project, "r-over", ["true", "over"])
        assert isinstance(over, CapReached) and over.code == "cards-cap" and over.exit_code == Exit.CAP
        assert f"{MAX_PENDING_CARDS} cards waiting" in over.message and "rsk withdraw CARD" in (over.hint or "")
        assert len(store.load().cards) == MAX_PENDING_CARDS
        again = _ask(project, "r-0", ["true", "0"])  # its own pending card's request: the same card, no new one
        assert isinstance(again, PendingApproval) and again.details["new_card"] is False
    with acting_for(_as("agent2")):  # another user (or the human) still files its own
        assert isinstance(_ask(project, "r-other", ["true", "other"]), PendingApproval)
    first = store.load().cards[0]
    with acting_for(_as("agent1")):
        withdraw(store, first.id, "agent")
        assert isinstance(_ask(project, "r-over", ["true", "over"]), PendingApproval)


def test_a_card_its_agent_withdraws_leaves_the_hot_ledger_at_once_and_is_still_found(project: str) -> None:
    store = Store(project)
    card = file_sweep(project, n=3, odd_at=1, argv_bytes=10_000)
    size = store.path.stat().st_size
    withdraw(store, card.id, "agent")
    assert [c.id for c in store.load().cards] == [] and store.path.stat().st_size < size
    found = find_card(store.load(), card.id, store.archive)
    assert found.status == "withdrawn" and found.decided_by == "agent"


@pytest.fixture
def project() -> str:
    return "caps"


def test_a_card_of_one_command_keeps_nothing_beside_the_ledger(project: str) -> None:
    """Only a batch's tasks go beside the ledger: a card of one command says "1 more task(s)" of nothing hidden
    otherwise, and a human who reads that line on every card learns to skip it."""
    assert isinstance(_ask(project, "one-1", ["python", "train.py"]), PendingApproval)
    card = Store(project).load().cards[-1]
    assert not card.tasks_file and "tasks" in card.request
