"""Ledger decisions: pure functions over a Ledger and a plan (no I/O).

Precedence: deny rule > human denial of this plan > exact approval > grant > ask.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from rsk.ledger.models import Approval, Card, Charge, DenyRule, Grant, Ledger, tally
from rsk.wire.resources import Resources


@dataclass(frozen=True)
class Facts:
    """What the ledger needs to know about one plan. Per-job values are the largest task's; budgets
    see the totals; deny rules see every command that would run."""

    target: str
    plan_hash: str
    request_id: str
    partition: str
    account: str
    qos: str
    resources: Resources  # the largest task's
    commands: tuple[str, ...]  # each task's command line; a script's whole text
    active: int  # the project's active rsk jobs on the target, counted under the ledger lock
    jobs: int = 1  # a batch counts each task
    at_once: int | None = None  # how many of them can be active at once (a batch's max running); None: all of them
    gpu_hours: float = 0.0  # worst case of the whole plan
    cpu_hours: float = 0.0
    replaceable: frozenset[str] = frozenset()  # the request's reserved charges this decision replaces or shares


@dataclass
class Decision:
    kind: Literal["deny", "approval", "grant", "ask"]
    rule: str | None = None
    reason: str = ""
    closest_grant: str | None = None
    closest_why: list[str] = field(default_factory=list)


@dataclass
class Usage:
    gpu_hours_spent: float = 0.0  # used by jobs that ended
    gpu_hours_reserved: float = 0.0  # worst case of what is submitted and still runs, or not yet submitted
    cpu_hours_spent: float = 0.0
    cpu_hours_reserved: float = 0.0
    jobs_spent: int = 0  # submitted jobs, but those Slurm says ended without ever starting
    jobs_reserved: int = 0  # allowed, not yet submitted
    jobs_at_worst: int = 0  # ended jobs charged their worst case: Slurm's record of them was gone

    @property
    def gpu_hours(self) -> float:
        return self.gpu_hours_spent + self.gpu_hours_reserved

    @property
    def cpu_hours(self) -> float:
        return self.cpu_hours_spent + self.cpu_hours_reserved

    @property
    def jobs(self) -> int:
        return self.jobs_spent + self.jobs_reserved


def usage_by_grant(
    charges: list[Charge], exclude: Collection[str] = (), grants: Iterable[Grant] = ()
) -> dict[str, Usage]:
    """What each grant has spent and reserved (with `grants`, also what their archived charges spent). The
    reservations named in `exclude` are left out: those a request decided again replaces or shares, so that
    they do not count twice (never one a live launch of another plan still holds)."""
    out: dict[str, Usage] = {}
    for g in grants:
        if g.archived_jobs:
            u = out.setdefault(g.id, Usage())
            u.jobs_spent += g.archived_jobs
            u.gpu_hours_spent += g.archived_gpu_hours
            u.cpu_hours_spent += g.archived_cpu_hours
            u.jobs_at_worst += g.archived_jobs_at_worst
    for ch in charges:
        if ch.state == "released":
            continue
        u = out.setdefault(ch.grant_id, Usage())
        if ch.state == "reserved":
            if ch.id in exclude:
                continue
            u.gpu_hours_reserved += ch.gpu_hours
            u.cpu_hours_reserved += ch.cpu_hours
            u.jobs_reserved += ch.jobs
            continue
        u.jobs_spent += sum(not c.never_ran for c in ch.job_costs.values())  # a job Slurm never started: none
        t = tally(ch.job_costs.values())
        u.gpu_hours_spent += t.gpu_spent
        u.cpu_hours_spent += t.cpu_spent
        u.gpu_hours_reserved += t.gpu_reserved
        u.cpu_hours_reserved += t.cpu_reserved
        u.jobs_at_worst += t.at_worst
    return out


def live(expires: datetime | None, at: datetime) -> bool:
    return expires is None or expires > at


def deny_matches(rule: DenyRule, f: Facts, at: datetime) -> bool:
    if not live(rule.expires, at):
        return False
    checks = [
        rule.target is None or rule.target == f.target,
        rule.partition is None or rule.partition == f.partition,
        rule.account is None or rule.account == f.account,
        rule.qos is None or rule.qos == f.qos,
        rule.gpus_at_least is None or f.resources.total_gpus >= rule.gpus_at_least,
        rule.nodes_at_least is None or f.resources.nodes >= rule.nodes_at_least,
        rule.time_min_at_least is None or f.resources.time_min >= rule.time_min_at_least,
        rule.gpu_hours_at_least is None or f.gpu_hours >= rule.gpu_hours_at_least,
        rule.command is None or any(fnmatch.fnmatchcase(c, rule.command) for c in f.commands),
    ]
    return all(checks)


def grant_gaps(g: Grant, f: Facts, used: Usage, at: datetime) -> list[str]:
    """Why grant g does not cover the plan; empty when it does."""
    why: list[str] = []
    if g.revoked is not None:
        return [f"revoked {g.revoked:%Y-%m-%d %H:%M}"]
    if not live(g.expires, at):
        return [f"expired {g.expires:%Y-%m-%d %H:%M}"] if g.expires else ["expired"]
    if g.targets and f.target not in g.targets:
        why.append(f"target {f.target} not in {','.join(g.targets)}")
    if g.partitions and f.partition not in g.partitions:
        why.append(f"partition {f.partition} not in {','.join(g.partitions)}")
    if g.accounts and f.account not in g.accounts:
        why.append(f"account {f.account or '(none)'} not in {','.join(g.accounts)}")
    if g.qos and f.qos not in g.qos:
        why.append(f"qos {f.qos or '(none)'} not in {','.join(g.qos)}")
    for label, value, ceiling in (
        ("GPUs", f.resources.total_gpus, g.max_gpus),
        ("CPUs", f.resources.total_cpus, g.max_cpus),
        ("memory MB/node", f.resources.mem_mb, g.max_mem_mb),
        ("nodes", f.resources.nodes, g.max_nodes),
        ("time min", f.resources.time_min, g.max_time_min),
    ):
        if ceiling is not None and value > ceiling:
            why.append(f"{label} {value} > ceiling {ceiling}")
    if g.jobs is not None and used.jobs + f.jobs > g.jobs:
        why.append(f"needs {f.jobs} job(s), {max(g.jobs - used.jobs, 0)} of {g.jobs} left")
    if g.gpu_hours is not None and used.gpu_hours + f.gpu_hours > g.gpu_hours + 1e-9:
        why.append(f"needs {f.gpu_hours:.2f} GPU-h, {max(g.gpu_hours - used.gpu_hours, 0):.2f} left")
    if g.cpu_hours is not None and used.cpu_hours + f.cpu_hours > g.cpu_hours + 1e-9:
        why.append(f"needs {f.cpu_hours:.2f} CPU-h, {max(g.cpu_hours - used.cpu_hours, 0):.2f} left")
    at_once = f.jobs if f.at_once is None else f.at_once
    if g.max_active is not None and f.active + at_once > g.max_active:
        if at_once > g.max_active:  # never clears by waiting: the request alone queues more than the grant allows
            why.append(f"queues {at_once} jobs at once (every task or link is queued together, unless "
                       f"--max-running holds them back), at most {g.max_active} active")  # fmt: skip
        else:
            why.append(f"{f.active} jobs active, at most {g.max_active}")
    return why


def find_approval(ledger: Ledger, plan_hash: str, at: datetime, request_id: str = "") -> Approval | None:
    """A live approval of this plan that this request already holds a use of, else the one whose card named this
    request, else one whose human gave uses beyond its card's request (never the use kept for that request)."""
    alive = [a for a in ledger.approvals if a.plan_hash == plan_hash and live(a.expires, at)]
    for a in alive:
        if any(u.request_id == request_id and u.state == "held" for u in a.uses):
            return a
    own = [a for a in alive if a.request_id == request_id]
    return next((a for a in own + alive if a.open_to(request_id)), None)


def denied_card(ledger: Ledger, plan_hash: str) -> Card | None:
    for c in reversed(ledger.cards):
        if c.plan_hash == plan_hash and c.status == "denied":
            return c
    return None


def denial(ledger: Ledger, f: Facts, at: datetime) -> Decision | None:
    """A live deny rule that matches, else a human's denial of this plan, else None."""
    for rule in ledger.deny_rules:
        if deny_matches(rule, f, at):
            return Decision("deny", rule.id, rule.reason)
    card = denied_card(ledger, f.plan_hash)
    if card is not None:
        return Decision("deny", card.id, card.reason or "a human denied this plan")
    return None


def decide(ledger: Ledger, f: Facts, at: datetime) -> Decision:
    if (denied := denial(ledger, f, at)) is not None:
        return denied
    approval = find_approval(ledger, f.plan_hash, at, f.request_id)
    if approval is not None:
        return Decision("approval", approval.id)
    usage = usage_by_grant(ledger.charges, exclude=f.replaceable, grants=ledger.grants)
    best: tuple[int, str, list[str]] | None = None
    for g in ledger.grants:
        gaps = grant_gaps(g, f, usage.get(g.id, Usage()), at)
        if not gaps:
            return Decision("grant", g.id)
        if best is None or len(gaps) < best[0]:
            best = (len(gaps), g.id, gaps)
    why_no_approval = stale_approval(ledger, f.plan_hash, at, f.request_id)
    if best is None:
        return Decision("ask", reason=why_no_approval or "no grant exists for this project", closest_why=["no grants"])
    return Decision(
        "ask", reason=why_no_approval or "no grant covers this plan", closest_grant=best[1], closest_why=best[2]
    )


def stale_approval(ledger: Ledger, plan_hash: str, at: datetime, request_id: str = "") -> str:
    """Why an approval of this plan does not allow this request (expired, used up, another request's), or ""."""
    for a in reversed(ledger.approvals):
        if a.plan_hash != plan_hash:
            continue
        if a.expires is not None and a.expires <= at:
            return f"approval {a.id} of this plan expired at {a.expires:%Y-%m-%d %H:%M} UTC"
        if a.uses_left <= 0:
            return f"approval {a.id} of this plan is used up"
        if request_id and not a.open_to(request_id):  # its use is kept for the request its card named
            return (f"approval {a.id} of this plan allows request {a.request_id} (card {a.card_id}), not this one: "
                    "a human decides this request's own card")  # fmt: skip
    return ""
