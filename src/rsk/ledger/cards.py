"""Approval cards: what waits for a human, finding one, waiting for its answer, and the human's answer."""

from __future__ import annotations

import getpass
import time
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rsk.errors import DENIED_HINT, ConflictError, DeniedError, PendingApproval, UsageError
from rsk.ledger.archive import Archive
from rsk.ledger.cardtasks import card_tasks
from rsk.ledger.models import Approval, AuditEntry, Card, CardTask, JobCost, Ledger, now, tally
from rsk.ledger.models import tell_human as tell_human  # its one wording, with the card
from rsk.ledger.store import Store
from rsk.ledger.taskkinds import TaskKinds, summarize
from rsk.local.paths import attempt_of
from rsk.wire.protocol import Request


def card_request(store: Store, card: Card) -> Request:
    """The request the card was filed for, every task included: what `rsk wait CARD` launches once approved."""
    request = Request.model_validate(card.request)
    full = card_tasks(store.dir, card)
    return request if full is None else request.model_copy(update={"tasks": full.request_tasks})


def whole(store: Store, card: Card) -> Card:
    """The card with every task in its plan (as `rsk approvals show` prints it)."""
    full = card_tasks(store.dir, card)
    if full is None:
        return card
    return card.model_copy(update={"plan": card.plan.model_copy(update={"tasks": full.plan_tasks})})


def batch_tasks(store: Store, card: Card) -> list[CardTask] | None:
    """Every task of a batch's card as its plan runs them (its file beside the ledger read and checked, StateError
    when it was changed); None for a card of any other kind (a chain's links are its tasks, and not a batch)."""
    p = card.plan
    if p.kind != "batch" or p.budget_min is not None or (not p.tasks and not card.tasks_file):
        return None
    full = card_tasks(store.dir, card)
    return full.plan_tasks if full is not None else p.tasks


def card_kinds(store: Store, card: Card) -> TaskKinds | None:
    """A batch's every task by kind (ADR 0066): what the human reads before approving them all; None for a card
    that is not a batch. StateError when its tasks' file beside the ledger was changed."""
    tasks = batch_tasks(store, card)
    return summarize(tasks) if tasks is not None else None


class CardList(BaseModel):
    """`rsk approvals --json` and MCP's approvals: the cards of one project (project None: of every project)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    project: str | None
    cards: list[Card]


class CardAnswer(BaseModel):
    """`rsk approvals show CARD --json`: one card (with `--all`, every task of its batch in its plan), and a batch's
    tasks by kind (ADR 0066)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    project: str
    card: Card
    kinds: TaskKinds | None = None


class Decision(BaseModel):
    """What approving, denying or withdrawing a card did (`rsk approve|deny|withdraw --json`)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    project: str
    card_id: str
    request_id: str
    target: str
    status: Literal["approved", "denied", "withdrawn"]
    by: str
    reason: str = ""  # a denial's reason, an approval's note
    approval: Approval | None = None  # approved: the approval it made (its uses and expiry)

    @classmethod
    def of(cls, project: str, card: Card, approval: Approval | None = None) -> Decision:
        status: Literal["approved", "denied", "withdrawn"]
        status = "approved" if card.status == "approved" else "denied" if card.status == "denied" else "withdrawn"
        return cls(project=project, card_id=card.id, request_id=card.request_id, target=card.target, status=status,
                   by=card.decided_by or "", reason=card.reason or "", approval=approval)  # fmt: skip


def who(yes: bool) -> str:
    return f"{getpass.getuser()} ({'--yes' if yes else 'terminal'})"


def human_context() -> tuple[str | None, list[str]]:
    """Where a human act came from, for the audit: the terminal (None without one) and the chain of
    parent processes (pid, name, command line), nearest first. Evidence for a later look, not proof:
    a same-user agent can fake a terminal (docs/security.md)."""
    import os
    from pathlib import Path

    tty = None
    for fd in (0, 1, 2):
        if os.isatty(fd):
            tty = os.ttyname(fd)
            break
    parents: list[str] = []
    pid = os.getppid()
    while pid > 1 and len(parents) < 12:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            break
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        parents.append(f"{pid} {name}: {cmdline.strip()[:200]}")
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
    return tty, parents


def human_entry(project: str, event: str, by: str, **fields: str | None) -> AuditEntry:
    """An audit entry for a human act, with its terminal and parent process chain."""
    tty, parents = human_context()
    return AuditEntry(project=project, event=event, by=by, tty=tty, parents=parents, **fields)


def list_cards(store: Store, include_decided: bool = False) -> list[Card]:
    """The pending cards; with `include_decided`, every card, those in the archive first."""
    cards = store.load().cards
    if not include_decided:
        return [c for c in cards if c.status == "pending"]
    hot = {c.id for c in cards}
    return [c for c in store.archive.cards() if c.id not in hot] + cards


def projects() -> list[str]:
    """Every project that has a ledger here."""
    from rsk.local.paths import TOKEN, rsk_home

    root = rsk_home() / "projects"
    found = root.glob("*/ledger.json") if root.is_dir() else []
    return sorted(p.parent.name for p in found if TOKEN.fullmatch(p.parent.name))


def cards_everywhere(include_decided: bool = False, broken: list[str] | None = None) -> list[tuple[str, Card]]:
    """(project, card) for every project's cards: what a human sees with --all-projects. A ledger that cannot
    be read is a StateError (exit 6), never an empty list: its cards may be waiting (with `broken`, its project
    is named there instead, for a caller that only counts)."""
    from rsk.errors import StateError
    from rsk.local.caller import rights

    r = rights()
    out: list[tuple[str, Card]] = []
    for project in projects():
        if r is not None and not r.allows(project):
            continue  # through the broker, another user sees only the projects it may use
        try:
            out += [(project, c) for c in list_cards(Store(project), include_decided)]
        except StateError:
            if broken is None:
                raise
            broken.append(project)
    return out


def store_of_card(card_id: str, project: str | None) -> Store:
    """The project whose ledger holds the card: the one given, else whichever has it (ids are unique) among
    the projects the caller may use; a card belongs to its own project, which the caller must be allowed."""
    from rsk.local.paths import check_token

    if project:
        return Store(check_token("project", project))
    for owner, card in cards_everywhere(include_decided=True):
        if card.id == card_id:
            return Store(owner)
    raise UsageError(
        f"no card {card_id!r} in any project you may use", "`rsk approvals --all` lists the cards", code="not-found"
    )


def _same_plan(card: Card, plan_hash: str | None) -> None:
    """The human decides the plan they read: a card whose plan hash is not the one shown is refused."""
    if plan_hash is not None and card.plan_hash != plan_hash:
        raise ConflictError(
            f"card {card.id} is not the plan you read (plan hash {card.plan_hash}, you read {plan_hash})",
            f"read it again: `rsk approvals show {card.id}`, or reload the page",
            details={"card_id": card.id, "plan_hash": card.plan_hash},
        )


def approve(
    store: Store,
    card_id: str,
    by: str,
    uses: int = 1,
    expires: datetime | None = None,
    note: str = "",
    plan_hash: str | None = None,
) -> Approval:
    """Approve a pending card; with `plan_hash`, only while the card binds that plan (what the human read)."""
    if uses < 1:
        raise UsageError("--uses must be at least 1")
    if expires is not None and expires <= now():
        raise UsageError("--expires is in the past", "give a duration such as 2h or 7d, or a future date")
    with store.transaction() as ledger:
        card = find_card(ledger, card_id, store.archive)
        _same_plan(card, plan_hash)
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
            request_id=card.request_id,
        )
        ledger.approvals.append(approval)
    store.audit(
        human_entry(store.project, "approve", by, plan_hash=card.plan_hash, request_id=card.request_id,
                    rule=approval.id, detail=note)
    )  # fmt: skip
    return approval


def deny(store: Store, card_id: str, by: str, reason: str, plan_hash: str | None = None) -> Card:
    if not reason.strip():
        raise UsageError("a denial needs a --reason", "the reason reaches the agent; say what to do instead")
    with store.transaction() as ledger:
        card = find_card(ledger, card_id, store.archive)
        _same_plan(card, plan_hash)
        if card.status != "pending":
            raise UsageError(f"card {card_id} is already {card.status}")
        card.status = "denied"
        card.decided_by = by
        card.decided_at = now()
        card.reason = reason
    store.audit(
        human_entry(store.project, "deny", by, plan_hash=card.plan_hash, request_id=card.request_id,
                    rule=card.id, detail=reason)
    )  # fmt: skip
    return card


def withdraw(store: Store, card_id: str, by: str) -> Card:
    """The agent takes back its own pending card (it no longer needs the work): nothing was spent. Another OS
    user (through the broker) withdraws only a card it filed itself."""
    from rsk.local import caller

    with store.transaction() as ledger:
        card = find_card(ledger, card_id, store.archive)
        if not caller.is_owner() and card.filed_by != caller.user():
            raise UsageError(f"card {card_id} was filed by another user: only they, or the human, withdraw it",
                             "withdraw the cards your own launches filed (`rsk approvals` lists them)")  # fmt: skip
        if card.status != "pending":
            raise UsageError(f"card {card_id} is already {card.status}")
        card.status = "withdrawn"
        card.decided_by = by
        card.decided_at = now()
    store.audit(AuditEntry(project=store.project, event="withdraw", plan_hash=card.plan_hash,
                           request_id=card.request_id, rule=card.id, by=by))  # fmt: skip
    return card


def wait_for_card(store: Store, card_id: str, timeout: float | None, poll: float = 1.0) -> Card:
    """Block until a human decides the card, or an approval of its plan has a use open to its request (or the
    timeout passes: PendingApproval). A denied card is a
    DeniedError, with the human's reason; a withdrawn one too (exit 3, `card-withdrawn`): nothing is filed or
    run for it."""
    from rsk.ledger.decide import find_approval

    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        ledger = store.load()
        card = find_card(ledger, card_id, store.archive)
        if card.status == "denied":
            raise DeniedError(
                f"card {card_id} was denied by {card.decided_by}: {card.reason}",
                DENIED_HINT,
                details={"card_id": card_id, "reason": card.reason},
            )
        if card.status == "withdrawn" and card.superseded_by:
            return card  # a grant allowed its request meanwhile: the launch goes on (a replay once submitted)
        if card.status == "withdrawn":
            raise DeniedError(
                f"card {card_id} was withdrawn by {card.decided_by or 'its agent'}: nothing runs for it",
                f"to run it after all, launch it again (a new card for the human); `rsk approvals show {card_id}` "
                "shows what it was",
                details={"card_id": card_id},
                code="card-withdrawn",
            )
        if card.status != "pending":
            return card
        if find_approval(ledger, card.plan_hash, now(), card.request_id) is not None:
            return card  # a human's spare use of this plan (`--uses N` on another card) lets it run: the launch decides
        if deadline is not None and time.monotonic() >= deadline:
            raise PendingApproval(
                f"card {card_id} is still pending",
                f"ask the human to run `rsk approve {card_id}` or `rsk deny {card_id}`; wait again with "
                f"`rsk wait {card_id}`",
                details={"card_id": card_id},
            )
        time.sleep(poll)


def find_card(ledger: Ledger, card_id: str, archive: Archive | None = None) -> Card:
    """The card in the ledger; with `archive`, also one that went cold (approved or withdrawn long ago)."""
    for c in ledger.cards:
        if c.id == card_id:
            return c
    for c in archive.cards(f'"id":"{card_id}"') if archive is not None else ():
        if c.id == card_id:
            return c
    raise UsageError(
        f"no card {card_id!r} in project {ledger.project}", "`rsk approvals --all` lists cards", code="not-found"
    )


class ChainRun(BaseModel):
    """What a chain ran before an extension's card was filed, on the ledger's books (each link's cost and run
    time as they settled on Slurm's word): what a human weighs against the extension."""

    model_config = ConfigDict(extra="forbid")

    chain: str
    queued: int = 0  # links submitted
    links: int = 0  # of those, links that ran (not the ones Slurm says never started)
    run_s: int = 0  # their run time, as Slurm reported it
    run_unknown: int = 0  # links whose run time the books do not know: still running, or Slurm's record was gone
    gpu_hours: float = 0.0  # spent by the links that ended
    cpu_hours: float = 0.0
    gpu_hours_open: float = 0.0  # the worst case of links not settled yet
    cpu_hours_open: float = 0.0


def chain_run(store: Store, ledger: Ledger, card: Card) -> ChainRun | None:
    """For an extension's card (`rsk extend`), what its chain ran before the card was filed: the jobs of the
    chain's request and its earlier extensions (B, B.a2, ...) on the card's target, from the hot ledger and the
    archive; None for any other card."""
    base = card.plan.chain_of
    if not base:
        return None

    def ours(rid: str, target: str, at: datetime) -> bool:
        return target == card.target and rid != card.request_id and attempt_of(rid)[0] == base and at <= card.created

    hot_charges = {c.id for c in ledger.charges}
    hot_approvals = {a.id for a in ledger.approvals}
    archived_charges, archived_approvals = store.archive.uses(base)
    charges = ledger.charges + [c for c in archived_charges if c.id not in hot_charges]
    approvals = ledger.approvals + [a for a in archived_approvals if a.id not in hot_approvals]
    costs: dict[str, JobCost] = {}
    for ch in charges:
        if ch.state in ("submitted", "settled") and ours(ch.request_id, ch.target, ch.created):
            costs.update(ch.job_costs)
    for a in approvals:
        for u in a.uses:
            if u.state == "submitted" and ours(u.request_id, u.target, u.at):
                costs.update(u.jobs)
    t = tally(costs.values())
    ran = [c for c in costs.values() if not c.never_ran]
    return ChainRun(
        chain=base,
        queued=len(costs),
        links=len(ran),
        run_s=sum(c.run_s or 0 for c in ran),
        run_unknown=sum(c.run_s is None for c in ran),
        gpu_hours=round(t.gpu_spent, 4),
        cpu_hours=round(t.cpu_spent, 4),
        gpu_hours_open=round(t.gpu_reserved, 4),
        cpu_hours_open=round(t.cpu_reserved, 4),
    )
