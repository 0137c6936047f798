"""What the pages show, read from the ledger (every request: a local file) and from the clusters (in the
background, at most once an interval however often the page asks: the browser polls, the cluster does not)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from rsk.errors import RskError, StateError
from rsk.ledger.cards import ChainRun, card_kinds, chain_run
from rsk.ledger.grants import GrantView, list_grants, list_rules
from rsk.ledger.models import Approval, Card, DenyRule, tally
from rsk.ledger.store import Store
from rsk.ledger.taskkinds import TaskKinds

RECENT = 20  # decided cards shown below the pending ones
T = TypeVar("T")


@dataclass
class CardsView:
    pending: list[tuple[str, Card]]  # oldest first: the one waiting longest on top
    decided: list[tuple[str, Card]]  # newest decision first
    broken: dict[str, str]  # project -> why its ledger could not be read
    runs: dict[str, ChainRun] = field(default_factory=dict)  # an extension's card id -> what its chain ran so far
    kinds: dict[str, TaskKinds | str] = field(default_factory=dict)  # a batch's card id -> its tasks by kind, or why
    # they cannot be read (ADR 0066)


def cards(projects: list[str], known: dict[str, TaskKinds] | None = None) -> CardsView:
    """Every project's cards, pending and recently decided, with what a card shows beside its plan. `known`: the
    kinds of the batches whose tasks' files were read before, by the file's sha256 (the file is named by the hash of
    what it holds, and was checked when it was read): kept for the next call, for the cards still shown only."""
    pending: list[tuple[str, Card]] = []
    decided: list[tuple[str, Card]] = []
    broken: dict[str, str] = {}
    runs: dict[str, ChainRun] = {}
    for project in projects:
        try:
            store = Store(project)
            ledger = store.load()
            hot = ledger.cards
            pending += [(project, c) for c in hot if c.status == "pending"]
            decided += [(project, c) for c in hot if c.status != "pending"]
            runs |= {c.id: run for c in hot if (run := chain_run(store, ledger, c)) is not None}
        except StateError as exc:
            broken[project] = exc.message
    pending.sort(key=lambda pc: pc[1].created)
    decided.sort(key=lambda pc: pc[1].decided_at or pc[1].created, reverse=True)
    view = CardsView(pending, decided[:RECENT], broken, runs)
    seen = dict(known or {})
    if known is not None:
        known.clear()
    for project, card in view.pending + view.decided:
        kept = seen.get(card.tasks_file) if card.tasks_file else None
        try:
            found = kept if kept is not None else card_kinds(Store(project), card)
        except StateError as exc:
            view.kinds[card.id] = exc.message
            continue
        if found is not None:
            view.kinds[card.id] = found
            if known is not None and card.tasks_file:
                known[card.tasks_file] = found
    return view


@dataclass
class ApprovedView:
    """What one approval (a card approved on its own, no grant) let run: its uses, and GPU- and CPU-hours
    spent (jobs that ended: Slurm's run time) and reserved (jobs still running, and uses that may still
    submit, at their worst case)."""

    approval: Approval
    card: Card | None
    taken: int = 0  # uses that submitted or may still
    gpu_spent: float = 0.0
    gpu_reserved: float = 0.0
    cpu_spent: float = 0.0
    cpu_reserved: float = 0.0


def approved(approvals: list[Approval], cards: list[Card]) -> list[ApprovedView]:
    """Every approval with its card and what its uses cost (pure), newest first."""
    by_id = {c.id: c for c in cards}
    out = []
    for a in approvals:
        v = ApprovedView(a, by_id.get(a.card_id or ""))
        for use in a.uses:
            if use.state == "released":
                continue
            v.taken += 1
            if use.state == "held" and v.card is not None:  # not submitted yet: the plan's worst case
                v.gpu_reserved += v.card.plan.gpu_hours
                v.cpu_reserved += v.card.plan.cpu_hours
            t = tally(use.jobs.values())
            v.gpu_spent, v.cpu_spent = v.gpu_spent + t.gpu_spent, v.cpu_spent + t.cpu_spent
            v.gpu_reserved, v.cpu_reserved = v.gpu_reserved + t.gpu_reserved, v.cpu_reserved + t.cpu_reserved
        out.append(v)
    out.sort(key=lambda v: v.approval.decided_at, reverse=True)
    return out


@dataclass
class BudgetView:
    project: str
    grants: list[GrantView]
    rules: list[DenyRule]
    error: str = ""
    approved: list[ApprovedView] = field(default_factory=list)


def budgets(projects: list[str]) -> list[BudgetView]:
    out = []
    for project in projects:
        store = Store(project)
        try:
            ledger = store.load()
            view = BudgetView(project, list_grants(store), list_rules(store))
            view.approved = approved(ledger.approvals, ledger.cards)
            out.append(view)
        except StateError as exc:
            out.append(BudgetView(project, [], [], exc.message))
    return out


def _in_thread(work: Callable[[], None]) -> None:
    threading.Thread(target=work, daemon=True).start()


@dataclass
class Fresh(Generic[T]):
    """The last value a slow source gave, refreshed in the background when a reader finds it older than
    `every` seconds: a reader never waits for a cluster, and two readers start one refresh."""

    fetch: Callable[[], T]
    every: float = 5.0
    clock: Callable[[], float] = time.monotonic
    spawn: Callable[[Callable[[], None]], None] = _in_thread  # how a refresh runs (a test runs it in place)
    value: T | None = None
    error: str = ""
    at: float | None = None  # when the last refresh ended (clock)
    wall: float | None = None  # the same, as wall time for the page
    _busy: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self) -> tuple[T | None, str, float | None]:
        """(value, error of the last refresh, its wall time); starts a refresh when due."""
        with self._lock:
            due = self.at is None or self.clock() - self.at >= self.every
            if due and not self._busy:
                self._busy = True
            else:
                return self.value, self.error, self.wall
        self.spawn(self._refresh)
        with self._lock:
            return self.value, self.error, self.wall

    def _refresh(self) -> None:
        value: T | None
        try:
            value, error = self.fetch(), ""
        except RskError as exc:
            value, error = self.value, exc.message
        except Exception as exc:  # a bug in one refresh must not stop the page; the page shows it
            value, error = self.value, f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.value, self.error, self.at, self.wall, self._busy = value, error, self.clock(), time.time(), False
