"""Approval cards: what waits for a human, and the human's answer."""

from __future__ import annotations

import getpass
from datetime import datetime

from rsk.errors import UsageError
from rsk.launch import find_card
from rsk.ledger import Approval, AuditEntry, Card, now
from rsk.store import Store


def who(yes: bool) -> str:
    return f"{getpass.getuser()} ({'--yes' if yes else 'terminal'})"


def list_cards(store: Store, include_decided: bool = False) -> list[Card]:
    cards = store.load().cards
    return cards if include_decided else [c for c in cards if c.status == "pending"]


def approve(
    store: Store, card_id: str, by: str, uses: int = 1, expires: datetime | None = None, note: str = ""
) -> Approval:
    if uses < 1:
        raise UsageError("--uses must be at least 1")
    if expires is not None and expires <= now():
        raise UsageError("--expires is in the past", "give a duration such as 2h or 7d, or a future date")
    with store.transaction() as ledger:
        card = find_card(ledger, card_id)
        if card.status != "pending":
            raise UsageError(f"card {card_id} is already {card.status}", "`rsk approvals --all` shows its decision")
        card.status = "approved"
        card.decided_by = by
        card.decided_at = now()
        card.reason = note
        approval = Approval(
            plan_hash=card.plan_hash,
            uses_left=uses,
            expires=expires,
            decided_by=by,
            note=note,
            card_id=card.id,
        )
        ledger.approvals.append(approval)
    store.audit(
        AuditEntry(
            project=store.project,
            event="approve",
            plan_hash=card.plan_hash,
            request_id=card.request_id,
            rule=approval.id,
            detail=note,
            by=by,
        )
    )
    return approval


def deny(store: Store, card_id: str, by: str, reason: str) -> Card:
    if not reason.strip():
        raise UsageError("a denial needs a --reason", "the reason reaches the agent; say what to do instead")
    with store.transaction() as ledger:
        card = find_card(ledger, card_id)
        if card.status != "pending":
            raise UsageError(f"card {card_id} is already {card.status}")
        card.status = "denied"
        card.decided_by = by
        card.decided_at = now()
        card.reason = reason
    store.audit(
        AuditEntry(
            project=store.project,
            event="deny",
            plan_hash=card.plan_hash,
            request_id=card.request_id,
            rule=card.id,
            detail=reason,
            by=by,
        )
    )
    return card
