"""The guard: every decision that lets work reach the cluster, under the ledger lock (docs/ledger.md).

A request that may submit is decided whole, every time: deny rules, then a human's denial, then an
approval of its exact plan, then a grant, else a card for a human. A request keeps what it holds (a
reserved charge, a held approval use) only while the decision made now still allows it. The only thing
that skips the decision is a replay: the cluster or the ledger shows the request's jobs were submitted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from rsk.errors import DENIED_HINT, CapReached, ConflictError, DeniedError, PendingApproval, RskError, UsageError
from rsk.ledger import attempts
from rsk.ledger.archive import Archive
from rsk.ledger.cardtasks import keep_tasks, shapes, tasks_digest
from rsk.ledger.decide import Facts, decide, denial, find_approval
from rsk.ledger.models import (
    CARD_FILES,
    CARD_MAX_BYTES,
    CARD_TASK_BYTES,
    CARD_TASKS,
    MAX_PENDING_CARDS,
    UNFOUND,
    Approval,
    AuditEntry,
    Card,
    CardPlan,
    CardTask,
    Charge,
    JobCost,
    Lease,
    LeaseStep,
    Ledger,
    Use,
    now,
    stand_in_open,
    unfound,
)
from rsk.ledger.store import Store
from rsk.local import caller
from rsk.local.project import scope
from rsk.wire import answers
from rsk.wire.answers import ReconcileAnswer
from rsk.wire.protocol import Accepted, Placement, Plan, Request, is_job_id, raise_for_error
from rsk.wire.resources import Resources

if TYPE_CHECKING:
    from rsk.cluster.remote import Remote
    from rsk.request.code import CodeSnapshot


class Allowed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["approval", "grant", "replay", "lease"]
    id: str
    charge_id: str | None = None


def replaceable(ledger: Ledger, request_id: str, plan_hash: str) -> frozenset[str]:
    """The request's reserved charges a decision now replaces or shares: those no live launch holds (they
    are given back), and those of this very plan (one job comes of them, whichever launch submits it)."""
    return frozenset(
        c.id for c in _own_holds(ledger, request_id)[0]
        if c.plan_hash == plan_hash or attempts.current() in c.holders or attempts.all_gone(c.holders)
    )  # fmt: skip


def facts(target: str, plan: Plan, request_id: str, active: int, replaces: frozenset[str] = frozenset()) -> Facts:
    return Facts(
        target=target,
        plan_hash=plan.hash,
        request_id=request_id,
        partition=plan.partition,
        account=plan.account,
        qos=plan.qos,
        resources=plan.largest,
        commands=tuple(plan.commands()),
        active=active,
        jobs=plan.jobs,
        at_once=plan.at_once if plan.at_once is not None else min(plan.jobs, plan.max_running or plan.jobs),
        replaceable=replaces,
        gpu_hours=plan.gpu_hours,
        cpu_hours=plan.cpu_hours,
    )


def plan_tasks(plan: Plan) -> list[CardTask]:
    """A batch's tasks as a card lists them (a plan of any other kind has none there)."""
    if plan.kind != "batch":
        return []
    return [CardTask.model_validate({**t.model_dump(), "needs": [n.wire for n in t.needs]}) for t in plan.tasks]


SUMMARY = 300  # a card's one-line summary of its command keeps this many characters (it shows every task whole)


def listed(tasks: list[CardTask]) -> list[CardTask]:
    """The tasks a card lists of its batch: the first CARD_TASKS, as many of them as fit in CARD_TASK_BYTES (the
    ledger is read on every launch; the rest are beside it: ADR 0060, 0067)."""
    out: list[CardTask] = []
    size = 0
    for t in tasks[:CARD_TASKS]:
        size += len(t.model_dump_json())
        if size > CARD_TASK_BYTES:
            break
        out.append(t)
    return out


def card_plan(target: str, plan: Plan, code: CodeSnapshot | None = None) -> CardPlan:
    """What the card shows; with `code`, the snapshot's files, when its manifest hashes to the plan's digest. A batch
    lists its first CARD_TASKS tasks, the digest of all and their shapes (authorize_in keeps the rest beside it)."""
    files = code is not None and bool(plan.code) and hashlib.sha256(code.manifest.encode()).hexdigest() == plan.code
    tasks = plan_tasks(plan)
    return CardPlan(
        code_files=[f.path for f in code.files[:CARD_FILES]] if files and code else [],
        code_count=len(code.files) if files and code else 0,
        code_bytes=code.total_bytes if files and code else 0,
        target=target,
        cluster=plan.cluster,
        user=plan.user,
        root=plan.root,
        hostkey=plan.hostkey,
        command=plan.command if len(plan.command) <= SUMMARY else plan.command[:SUMMARY] + "...",  # for lists
        argv=plan.argv,
        kind=plan.kind,
        workdir=plan.workdir,
        code=plan.code,
        path=plan.path,
        partition=plan.partition,
        account=plan.account,
        qos=plan.qos,
        **plan.largest.model_dump(),
        env=plan.env,
        script=plan.script,
        tasks=listed(tasks),
        tasks_digest=tasks_digest(tasks) if tasks else "",
        shapes=shapes(tasks),
        max_running=plan.max_running,
        budget_min=plan.budget_min,
        signal_s=plan.signal_s,
        chain_of=plan.chain_of,
        link0=plan.link0,
        attempt_of=plan.attempt_of,
        lease_open=plan.lease_open,
        drain_min=plan.drain_min,
        overrun=plan.overrun,
        gpu_hours=plan.gpu_hours,
        cpu_hours=plan.cpu_hours,
        jobs=plan.jobs,
        estimate_start=plan.estimate_start,
        policy_verdict=plan.verdict,
        policy_reasons=plan.reasons,
    )


# what the ledger already knows of a request ----------------------------------------------------
def submitted_jobs(
    ledger: Ledger, request_id: str, plan_hash: str, target: str, archive: Archive | None = None
) -> list[str]:
    """Jobs the ledger recorded as submitted for this request and plan on this target; with `archive`,
    also those of its charges and approvals that went cold (a request id is remembered for good)."""
    jobs = _jobs_of(ledger.charges, ledger.approvals, request_id, plan_hash, target)
    if not jobs and archive is not None:
        needle = f'"request_id":"{request_id}"'
        jobs = _jobs_of(*archive.uses(needle), request_id, plan_hash, target)
    return jobs


def request_jobs(ledger: Ledger, request_id: str, target: str) -> list[str]:
    """Every job the ledger recorded for this request id on this target, whatever its plan."""
    return _jobs_of(ledger.charges, ledger.approvals, request_id, None, target)


def _jobs_of(
    charges: list[Charge], approvals: list[Approval], request_id: str, plan_hash: str | None, target: str
) -> list[str]:
    """The jobs recorded for a request on a target: of one plan, or (None) of any."""
    jobs: list[str] = []
    for ch in charges:
        if ch.request_id == request_id and plan_hash in (None, ch.plan_hash) and ch.target == target:
            jobs += [j for j in ch.job_costs if not unfound(j)]
    for a in approvals:
        if plan_hash in (None, a.plan_hash):
            jobs += [
                j for u in a.uses if u.request_id == request_id and u.target == target for j in u.jobs if not unfound(j)
            ]
    return sorted(set(jobs))


def count_active(ledger: Ledger, target: str, plan: Plan, planned_at: datetime, request_id: str) -> int:
    """The project's jobs that may be pending or running on the target, counted under the lock: what
    the cluster counted when planning, every job submitted since, and every reservation not yet
    submitted. Parallel launches each see the others', so a grant's --max-active holds."""
    active = set(plan.active_jobs)
    held = 0
    for ch in ledger.charges:
        if ch.target != target or ch.request_id == request_id:
            continue
        if ch.state == "reserved":
            held += ch.at_once
            continue
        if ch.state == "submitted":  # a task not found since a lost answer may be pending or running
            held += sum(stand_in_open(j, c) for j, c in ch.job_costs.items())
        if ch.submitted_at is not None and ch.submitted_at >= planned_at:
            active |= _at_once({j for j, c in ch.job_costs.items() if c.gpu_hours_used is None and not unfound(j)},
                               ch.max_running)  # fmt: skip
    for a in ledger.approvals:
        for u in a.uses:
            if u.target != target or u.request_id == request_id:
                continue
            if u.state == "held":
                held += 1
                continue
            if u.state == "submitted":  # a task not found since a lost answer may be pending or running
                held += sum(stand_in_open(j, c) for j, c in u.jobs.items())
            if u.submitted_at is not None and u.submitted_at >= planned_at:
                active |= _at_once({j for j, c in u.jobs.items() if c.gpu_hours_used is None and not unfound(j)},
                                   u.max_running)  # fmt: skip
    return len(active) + held


def _at_once(jobs: set[str], max_running: int | None) -> set[str]:
    """Of a request's jobs not ended, those that count as active: at most its max running (the others wait for
    Slurm's throttle, as the cluster's count says)."""
    return jobs if max_running is None or len(jobs) <= max_running else set(sorted(jobs)[:max_running])


def _own_holds(ledger: Ledger, request_id: str) -> tuple[list[Charge], list[tuple[str, Use]]]:
    charges = [c for c in ledger.charges if c.request_id == request_id and c.state == "reserved"]
    uses = [(a.id, u) for a in ledger.approvals for u in a.uses if u.request_id == request_id and u.state == "held"]
    return charges, uses


def _release_holds(store: Store, ledger: Ledger, request_id: str, reason: str, keep: str | None = None) -> None:
    """Give back what earlier launches of the request hold (except `keep`, and this launch's own, which it
    gives back itself): reserved charges and held approval uses that no live launch holds. A launch still
    under way (waiting for the cluster's lock, say) keeps its hold, whatever a second launch is decided."""
    mine = attempts.current()
    charges, uses = _own_holds(ledger, request_id)
    for ch in charges:
        if ch.id != keep and mine not in ch.holders and attempts.all_gone(ch.holders):
            ch.state = "released"
            ch.reason = reason
            store.audit(_entry(store, "charge-released", ch.plan_hash, request_id, ch.grant_id, reason))
    for approval_id, use in uses:
        if approval_id != keep and mine not in use.holders and attempts.all_gone(use.holders):
            _give_back(store, ledger, approval_id, use, reason)


def _give_back(store: Store, ledger: Ledger, approval_id: str, use: Use, reason: str) -> None:
    use.state = "released"
    approval = next(a for a in ledger.approvals if a.id == approval_id)
    approval.uses_left += 1
    store.audit(_entry(store, "approval-use-released", approval.plan_hash, use.request_id, approval_id, reason))


def _hold(holders: list[str]) -> None:
    """This launch holds it too."""
    mine = attempts.current()
    if mine is not None and mine not in holders:
        holders.append(mine)


def _entry(store: Store, event: str, plan_hash: str, rid: str, rule: str | None, detail: str) -> AuditEntry:
    return AuditEntry(project=store.project, event=event, plan_hash=plan_hash, request_id=rid, rule=rule,
                      detail=detail)  # fmt: skip


def allowed_or_raise(verdict: Allowed | RskError) -> Allowed:
    """What a decision allows; its refusal raised (once the transaction that made it is written)."""
    if isinstance(verdict, RskError):
        raise verdict
    return verdict


def _supersede(store: Store, ledger: Ledger, rid: str, plan_hash: str, kind: str, by: str) -> None:
    """This request's own pending card for this plan no longer waits for a human: a grant allows it now, or an
    approval whose human gave uses beyond its own card's request."""
    for card in ledger.cards:
        if card.status == "pending" and card.request_id == rid and card.plan_hash == plan_hash:
            card.status, card.decided_at = "withdrawn", now()
            card.decided_by, card.superseded_by = f"rsk ({kind} {by} allows request {rid})", by
            store.audit(_entry(store, "withdraw", plan_hash, rid, card.id, f"superseded: {kind} {by} allows it"))


def authorize_in(
    store: Store,
    ledger: Ledger,
    target: str,
    plan: Plan,
    request: Request,
    planned_at: datetime,
    code: CodeSnapshot | None = None,
) -> Allowed | RskError:
    """The decision, made on the ledger the caller holds under the lock (its transaction writes what changed):
    a charge or an approval use held, else the error to raise once the ledger is written (a denial, or the
    card filed or found for a human)."""
    at = now()
    rid = request.request_id
    active = count_active(ledger, target, plan, planned_at, rid)
    d = decide(ledger, facts(target, plan, rid, active, replaceable(ledger, rid, plan.hash)), at)
    store.audit(_entry(store, "decision", plan.hash, rid, d.rule, d.kind + (f": {d.reason}" if d.reason else "")))
    if d.kind == "deny":
        _release_holds(store, ledger, rid, f"denied by {d.rule}")
        return DeniedError(
            f"denied by {d.rule}: {d.reason}",
            DENIED_HINT,
            details={"rule": d.rule, "reason": d.reason, "plan_hash": plan.hash},
        )
    other = next((c for c in ledger.cards if c.status == "pending" and c.request_id == rid and c.target == target
                  and c.plan_hash != plan.hash), None)  # fmt: skip
    if other is not None:  # one request id, one plan: a second card would leave the human two to choose from
        return _other_card(other, card_plan(target, plan, code), plan.hash, store.project)
    if d.kind == "approval":
        approval = find_approval(ledger, plan.hash, at, rid)
        assert approval is not None
        _release_holds(store, ledger, rid, "decided again: an approval allows it", keep=approval.id)
        use = next((u for u in approval.uses if u.request_id == rid and u.state == "held"), None)
        if use is None:
            approval.uses_left -= 1
            use = Use(request_id=rid, target=target, max_running=plan.max_running)
            approval.uses.append(use)
        _hold(use.holders)
        _supersede(store, ledger, rid, plan.hash, "approval", approval.id)
        return Allowed(kind="approval", id=approval.id)
    if d.kind == "grant":
        assert d.rule is not None
        charge = next((c for c in _own_holds(ledger, rid)[0] if c.grant_id == d.rule and c.plan_hash == plan.hash),
                      None)  # fmt: skip
        _release_holds(store, ledger, rid, f"decided again: grant {d.rule} allows it",
                       keep=charge.id if charge else None)  # fmt: skip
        if charge is None:
            charge = Charge(grant_id=d.rule, plan_hash=plan.hash, request_id=rid, target=target,
                            gpu_hours=plan.gpu_hours, cpu_hours=plan.cpu_hours, jobs=plan.jobs,
                            max_running=plan.max_running)  # fmt: skip
            ledger.charges.append(charge)
        _hold(charge.holders)
        _supersede(store, ledger, rid, plan.hash, "grant", d.rule)
        return Allowed(kind="grant", id=d.rule, charge_id=charge.id)
    # ask: a card for a human, this request's pending one for this plan or a new one. A card names one request:
    # the human's yes lets that request run, so another request of the same plan files its own (docs/adr/0052)
    _release_holds(store, ledger, rid, f"decided again: {d.reason}")
    card = next((c for c in ledger.cards if c.plan_hash == plan.hash and c.request_id == rid
                 and c.target == target and c.status == "pending"), None)  # fmt: skip
    new_card = card is None
    if card is None:
        filer = caller.user()
        waiting = sum(c.status == "pending" and c.filed_by == filer for c in ledger.cards)
        if waiting >= MAX_PENDING_CARDS:  # the hot ledger is every launch's to read (ADR 0067)
            return CapReached(
                f"{filer} has {waiting} cards waiting for a human in project {store.project}, the most one user may "
                "have (no new card was filed)",
                "wait for the human to decide them (`rsk wait CARD`), or withdraw the ones you no longer need "
                f"(`rsk approvals{scope(store.project, None)}` lists them; `rsk withdraw CARD`), then launch again",
                details={"pending": waiting, "max_pending": MAX_PENDING_CARDS},
                code="cards-cap",
            )
        shown = card_plan(target, plan, code)
        many = len(shown.tasks) < len(plan_tasks(plan))  # a batch's tasks beside the ledger (ADR 0060, 0067)
        card = Card(
            plan_hash=plan.hash,
            request_id=rid,
            requester=request.requester,
            filed_by=filer,
            target=target,
            request=request.model_dump(exclude={"hostkey", "tasks"} if many else {"hostkey"}),
            plan=shown,
            closest_grant=d.closest_grant,
            closest_why=d.closest_why,
        )
        size = len(card.model_dump_json())
        if size > CARD_MAX_BYTES:
            return UsageError(
                f"this launch needs a human's approval, and its card would hold {size // 1024} KiB in the ledger "
                f"(its script, command, environment and code paths), more than {CARD_MAX_BYTES // 1024} KiB: no card "
                "was filed",
                "put the long part in a file of the code you send (--code) and run that, or ask the human for a grant "
                "that covers it",
                details={"card_bytes": size, "max_bytes": CARD_MAX_BYTES},
                code="card-too-big",
            )
        if many:
            card.tasks_file = keep_tasks(store.dir, request, plan_tasks(plan))
        ledger.cards.append(card)
    # what to pass on to the human (addressed to them), and what the agent does next: two fields
    from rsk.ledger.models import tell_human as sentence

    tell_human = sentence(card.id)
    then = f"rsk wait {card.id}{scope(store.project, None)}"
    return PendingApproval(
        f"approval needed: card {card.id} waits for a human ({d.reason}"
        + (f"; closest grant {d.closest_grant}: {'; '.join(d.closest_why)}" if d.closest_grant else "")
        + ")",
        f"tell the human: {tell_human} Then run `{then}` "
        + (
            f"(it returns once the lease runs; or `rsk lease open {plan.lease_open} --request-id {rid}"
            f"{scope(store.project, target)}` again)."
            if plan.lease_open
            else f"(or launch again with --request-id {rid}{scope(store.project, target)})."
        ),
        details={
            "card_id": card.id,
            "plan_hash": plan.hash,
            "request_id": rid,
            "new_card": new_card,
            "tell_human": tell_human,
            "next": then,
            # what no grant covers, as `rsk plan` says it: an agent may offer a smaller ask, or wait (active jobs)
            "closest_grant": d.closest_grant,
            "closest_why": list(d.closest_why),
        },
    )


def _other_card(card: Card, mine: CardPlan, plan_hash: str, project: str) -> ConflictError:
    fields, added, removed = card.plan.differs(mine)
    said = ", ".join(fields) or "the cluster's facts"
    files = "".join(f"; {w} under --code: {', '.join(f[:10])}" for w, f in (("added", added), ("gone", removed)) if f)
    return ConflictError(
        f"request id {card.request_id} already waits for a human on card {card.id} with another plan "
        f"(it differs in {said}{files})",
        f"to go on with the card's plan, `rsk wait {card.id}{scope(project, None)}`; to launch this plan instead, "
        f"withdraw that card first (`rsk withdraw {card.id}`) and launch again; for other work, use a new --request-id",
        code="request-conflict",
        details={
            "card_id": card.id,
            "plan_hash": plan_hash,
            "card_plan_hash": card.plan_hash,
            "differs": fields,
            "code_added": added,
            "code_removed": removed,
        },
    )


# leases -----------------------------------------------------------------------------------------
StepVerdict = Literal["deny", "lease", "closed"]


def decide_step(ledger: Ledger, target: str, plan: Plan, request_id: str) -> tuple[StepVerdict, str | None, str]:
    """How a step is decided (pure): ("deny", rule, reason), ("lease", lease id, "") or ("closed", None, why)."""
    denied = denial(ledger, facts(target, plan, request_id, 0), now())
    if denied is not None:
        return "deny", denied.rule, denied.reason
    at = plan.placement
    lease = open_lease(ledger, target, at)
    if lease is None:
        return "closed", None, f"lease {at.lease} (job {at.job}) is not open in this project's ledger on {target}"
    return "lease", lease.id, ""


def authorize_step_in(store: Store, ledger: Ledger, target: str, plan: Plan, request: Request) -> Allowed | RskError:
    """A step queued into a lease: the lease paid for its allocation, so the step is allowed by the lease
    while the ledger holds it open, and only deny rules (and a human's denial of this plan) can stop it.
    Decided on the ledger the caller holds under the lock; a refusal is returned, to raise after it."""
    rid = request.request_id
    kind, rule, reason = decide_step(ledger, target, plan, rid)
    store.audit(_entry(store, "decision", plan.hash, rid, rule, kind + (f": {reason}" if reason else "")))
    if kind == "deny":
        return DeniedError(
            f"denied by {rule}: {reason}",
            DENIED_HINT,
            details={"rule": rule, "reason": reason, "plan_hash": plan.hash},
        )
    if kind == "closed":
        return UsageError(
            reason,
            f"`rsk lease status{scope(store.project, target)}` lists the project's leases; a lease is opened "
            "with `rsk lease open NAME` (a human allows it like any launch)",
        )
    assert rule is not None
    return Allowed(kind="lease", id=rule)


def held_lease(ledger: Ledger, target: str, at: Placement) -> Lease | None:
    """The ledger's lease a step's placement names (open or closed); None for a job on Slurm."""
    if at.kind != "lease":
        return None
    return next((x for x in ledger.leases if x.target == target and x.name == at.lease and x.job_id == at.job), None)


def open_lease(ledger: Ledger, target: str, at: Placement) -> Lease | None:
    lease = held_lease(ledger, target, at)
    return lease if lease is not None and lease.closed is None else None


def _record_lease(
    store: Store, ledger: Ledger, target: str, plan: Plan, request_id: str, allowed: Allowed, job_id: str
) -> None:
    """The cluster accepted a lease's job: the ledger holds it open (once, however often it is replayed)."""
    if any(x.target == target and x.job_id == job_id and x.name == plan.lease_open for x in ledger.leases):
        return
    lease = Lease(name=plan.lease_open, target=target, job_id=job_id, request_id=request_id, plan_hash=plan.hash,
                  allowed_by=f"{allowed.kind} {allowed.id}", resources=plan.resources)  # fmt: skip
    ledger.leases.append(lease)
    store.audit(_entry(store, "lease-opened", plan.hash, request_id, lease.id, f"{plan.lease_open} job {job_id}"))


def _record_steps(ledger: Ledger, target: str, plan: Plan, request_id: str, jobs: list[tuple[str, str]]) -> None:
    """The steps the cluster queued for a request the ledger allowed into a lease ((step id, task) each):
    the lease's record keeps them, once however often they are replayed."""
    lease = held_lease(ledger, target, plan.placement)
    if lease is None or lease.steps is None:
        return
    known = {s.job_id for s in lease.steps}
    for job, task in jobs:
        if job not in known:
            lease.steps.append(LeaseStep(job_id=job, request_id=request_id, plan_hash=plan.hash, task=task))


class StepBooks:
    """The steps the ledger allowed into the target's leases, by lease name, read once for a status of any number of
    steps (pure)."""

    def __init__(self, ledger: Ledger, target: str) -> None:
        self.unrecorded: set[str] = set()  # leases opened by an rsk that did not record their steps
        self.jobs: dict[str, set[str]] = {}  # lease name -> its Slurm jobs
        self.allowed: dict[str, set[tuple[str, str]]] = {}  # lease name -> (step id, request id) it allowed
        for x in ledger.leases:
            if x.target != target:
                continue
            self.jobs.setdefault(x.name, set()).add(x.job_id)
            if x.steps is None:
                self.unrecorded.add(x.name)
            self.allowed.setdefault(x.name, set()).update((st.job_id, st.request_id) for st in x.steps or [])

    def undecided(self, lease: str, job_id: str, request_id: str, starts: int) -> str:
        """Why a step of a lease was never decided by this ledger ("" when it was, or cannot be told): the
        controller started it, but no step the ledger allowed has its id and request, or it started twice."""
        if lease in self.unrecorded or job_id in self.jobs.get(lease, ()):
            return ""  # a lease opened by an rsk that did not record its steps, or the lease's own job
        if (job_id, request_id) not in self.allowed.get(lease, ()):
            return "no step the ledger allowed has this id and request"
        if starts > 1:
            return f"started {starts} times; the ledger allowed it once"
        return ""


def close_lease(store: Store, target: str, name: str, by: str) -> list[Lease]:
    """Steps are no longer allowed into the project's open leases of this name on the target."""
    closed: list[Lease] = []
    with store.transaction() as ledger:
        for x in ledger.leases:
            if x.name == name and x.target == target and x.closed is None:
                x.closed, x.closed_by = now(), by
                closed.append(x)
                store.audit(_entry(store, "lease-closed", x.plan_hash, x.request_id, x.id, f"{name} job {x.job_id}"))
    return closed


def _costs(plan: Plan, jobs: dict[int, str]) -> dict[str, JobCost]:
    """Each job's worst case, from the task it runs (task index -> job id)."""
    out = {}
    for idx, job in jobs.items():
        task: Resources = plan.tasks[idx] if idx < len(plan.tasks) else plan.tasks[0]
        out[job] = JobCost(gpu_hours_worst=task.gpu_hours, cpu_hours_worst=task.cpu_hours)
    return out


def record_outcome(
    store: Store, target: str, allowed: Allowed, plan: Plan, request_id: str, accepted: list[Accepted], failed: str = ""
) -> None:
    """What the cluster did with a decided request, in one transaction of the ledger (the decision's was
    written before the submit, so a crash in between leaves a reservation, never a job nothing counts): the
    jobs it accepted hold the request's charge or approval use for good, a step joins its lease's record, a
    lease's job opens the lease; when nothing was accepted and the submit `failed` (why), the request's holds
    are given back. Nothing to record (a replay, say): the ledger is not touched."""
    jobs = {a.idx: a.job_id for a in accepted}
    submits = bool(jobs) and allowed.kind not in ("replay", "lease")  # a step costs the lease nothing new
    steps = plan.is_step and bool(accepted)  # what a controller starts is compared with these (rsk status)
    opens = plan.kind == "lease" and bool(accepted)
    gives_back = bool(failed) and not accepted
    if not (submits or steps or opens or gives_back):
        return
    with store.transaction() as ledger:
        if submits:
            _record_submitted(store, ledger, allowed, plan, request_id, jobs)
        if steps:
            _record_steps(ledger, target, plan, request_id, [(a.job_id, a.task or "") for a in accepted])
        if opens:
            _record_lease(store, ledger, target, plan, request_id, allowed, accepted[0].job_id)
        if gives_back:
            _let_go(store, ledger, request_id, failed)


def _record_submitted(
    store: Store, ledger: Ledger, allowed: Allowed, plan: Plan, request_id: str, jobs: dict[int, str]
) -> None:
    """The cluster accepted jobs: the request's charge or approval use is now submitted, for good."""
    costs = _costs(plan, jobs)
    at = now()
    for ch in ledger.charges:
        if ch.id == allowed.charge_id and ch.state in ("reserved", "submitted", "released"):
            # (released: by a human's hand or an older rsk while this launch was under way; the jobs exist,
            # so they count)
            ch.state = "submitted"
            ch.job_costs = {**costs, **ch.job_costs}
            ch.submitted_at = ch.submitted_at or at
            store.audit(_entry(store, "charge-submitted", ch.plan_hash, request_id, ch.grant_id,
                               "jobs " + ",".join(costs)))  # fmt: skip
    for a in ledger.approvals:
        if a.id != allowed.id:
            continue
        for u in a.uses:
            if u.request_id == request_id and (u.state in ("held", "submitted") or _mine(u)):
                if u.state == "released":
                    a.uses_left -= 1  # given back while this launch was under way: its job ran on it
                u.state = "submitted"
                u.jobs = {**costs, **u.jobs}
                u.submitted_at = u.submitted_at or at


def adopt(store: Store, target: str, jobs: dict[str, list[str]]) -> int:
    """Holds whose request the cluster shows jobs for (request id -> job ids) were submitted after all
    (the answer was lost on the way back): record them, so they are never released or reused. The whole
    plan is accounted for: a task no job was found for yet keeps its worst case (an `unfound:N` stand-in)
    until a job of the request is found for it later, and is then charged on Slurm's word like any job."""
    if not any(_holds_for(store.view(), target, jobs)):
        return 0
    with store.transaction() as ledger:
        return _adopt_in(store, ledger, target, jobs)


def adopt_reconciled(remote: Remote, store: Store, target: str, project: str) -> ReconcileAnswer:
    """The cluster's reconcile, asked with the ledger's held jobs and its `since` (so it reads the batch scripts of
    the account's unheld jobs since the oldest hold of unknown outcome, ADR 0039), and every job it found adopted:
    held by id from now on, whatever name the job gives itself."""
    ledger = store.view()
    out = remote.call("reconcile", project, stdin=held_line(held_jobs(ledger, target)) + since_line(ledger, target))
    raise_for_error(out)
    answer = answers.reconcile(out)
    found: dict[str, list[str]] = {}
    for r in answer.items:
        if r.result == "reconciled" and r.job:
            found.setdefault(r.rid, []).append(r.job)
    adopt(store, target, found)
    return answer


def _adopt_in(store: Store, ledger: Ledger, target: str, jobs: dict[str, list[str]]) -> int:
    charges, uses = _holds_for(ledger, target, jobs)
    taken = _taken(ledger)
    count = 0
    for ch in charges:
        n = max(ch.jobs, 1)
        worst = JobCost(gpu_hours_worst=ch.gpu_hours / n, cpu_hours_worst=ch.cpu_hours / n)
        new = [j for j in sorted(set(jobs[ch.request_id])) if j not in taken]
        if not new:  # another hold of the request took them (one job, one book)
            continue
        first = ch.state in ("reserved", "released")
        reopened = ch.state == "settled"  # its stand-ins a human released: a job found since is charged all the same
        given_back = ch.reason if ch.state == "released" else ""
        ch.job_costs = _found(ch.job_costs, new, n, worst, first)
        if first:
            ch.state, ch.submitted_at = "submitted", now()
        ch.state = "submitted"
        detail = "found on the cluster" + ("" if first else " later: jobs " + ",".join(new))
        if reopened:
            detail += " (after its stand-ins were released: charged, and the charge is open again)"
        if given_back:
            detail += f" (after its hold was given back, {given_back!r}: Slurm has its job, so it is charged)"
        if left := sum(stand_in_open(k, c) for k, c in ch.job_costs.items()):
            detail += f"; {left} task(s) of the plan not found yet, held at their worst case"
        taken |= set(new)
        count += 1
        store.audit(_entry(store, "charge-submitted", ch.plan_hash, ch.request_id, ch.grant_id, detail))
    for n, use in uses:
        new = [j for j in sorted(set(jobs[use.request_id])) if j not in taken]
        if not new:
            continue
        first = use.state in ("held", "released")
        if use.state == "released":  # given back: Slurm has its job, so it ran on the approval after all
            next(a for a in ledger.approvals if any(x is use for x in a.uses)).uses_left -= 1
        use.jobs = _found(use.jobs, new, n, JobCost(gpu_hours_worst=0.0, cpu_hours_worst=0.0), first)
        if first:
            use.state, use.submitted_at = "submitted", now()
        taken |= set(new)
        count += 1
    return count


def _found(costs: dict[str, JobCost], new: list[str], n: int, worst: JobCost, first: bool) -> dict[str, JobCost]:
    """A hold's jobs once `new` were found for it (pure): on the first adoption, the plan's other tasks as
    `unfound:N` stand-ins at their worst case; later, each found job takes a stand-in's place, an open one first,
    else one a human released (the job is charged its task's worst case again: the human's word that the task never
    ran gives way to the cluster's); a job claimed for a request costs, never saves."""
    if first:
        out = {j: worst.model_copy() for j in new}
        return out | {f"{UNFOUND}{i}": worst.model_copy() for i in range(len(new), n)}
    out = dict(costs)
    stand_ins = sorted(k for k, c in out.items() if unfound(k) and c.gpu_hours_used is None)
    stand_ins += sorted(k for k, c in out.items() if unfound(k) and c.gpu_hours_used is not None)
    for k, j in enumerate(new):  # each takes the next stand-in (by index: a batch's thousands stay linear)
        if k >= len(stand_ins):
            out[j] = worst.model_copy()
            continue
        was = out.pop(stand_ins[k])
        out[j] = JobCost(gpu_hours_worst=was.gpu_hours_worst, cpu_hours_worst=was.cpu_hours_worst)
    return out


def _open_to_find(state: str, costs: dict[str, JobCost]) -> bool:
    """Adopted with tasks of its plan not found: still held at their worst case, or released by a human (a job
    found later for the request is charged all the same)."""
    return state in ("submitted", "settled") and any(map(unfound, costs))


def booked(ledger: Ledger, target: str) -> set[str]:
    """Every job id a charge or approval use of the ledger holds on the target (pure)."""
    out = {j for ch in ledger.charges if ch.target == target for j in ch.job_costs}
    return out | {j for a in ledger.approvals for u in a.uses if u.target == target for j in u.jobs}


def _taken(ledger: Ledger) -> set[str]:
    """Every job id some charge or approval use of the ledger already holds."""
    out = {j for ch in ledger.charges for j in ch.job_costs}
    return out | {j for a in ledger.approvals for u in a.uses for j in u.jobs}


def _plan_jobs(ledger: Ledger, approval: Approval) -> int:
    """How many jobs the approved plan submits, as its card said (1 when the card is gone)."""
    card = next((c for c in ledger.cards if c.id == approval.card_id), None)
    return max(card.plan.jobs if card is not None else 1, 1)


def _holds_for(ledger: Ledger, target: str, jobs: dict[str, list[str]]) -> tuple[list[Charge], list[tuple[int, Use]]]:
    """What `jobs` (request id -> job ids the cluster shows) resolves, when a job no book holds is among a
    request's: its reserved charges and held uses, its submitted ones with tasks not found yet, and those given
    back (an error after `go` says nothing was submitted, and the cluster shows a job: its word wins), in that
    order. Each use comes with the number of jobs its plan submits."""
    taken = _taken(ledger)

    def new(rid: str) -> bool:
        return rid in jobs and any(j not in taken for j in jobs[rid])

    def rank(state: str, costs: dict[str, JobCost]) -> int | None:
        if state in ("reserved", "held"):
            return 0
        return 1 if _open_to_find(state, costs) else 2 if state == "released" else None

    charges = sorted(((r, i, c) for i, c in enumerate(ledger.charges) if c.target == target and new(c.request_id)
                      and (r := rank(c.state, c.job_costs)) is not None), key=lambda x: (x[0], x[1]))  # fmt: skip
    uses = sorted(((r, i, (_plan_jobs(ledger, a), u)) for i, (a, u) in enumerate((a, u) for a in ledger.approvals
                   for u in a.uses) if u.target == target and new(u.request_id)
                   and (r := rank(u.state, u.jobs)) is not None), key=lambda x: (x[0], x[1]))  # fmt: skip
    return [c for _, _, c in charges], [u for _, _, u in uses]


def _mine(use: Use) -> bool:
    return attempts.current() in use.holders


def release(store: Store, request_id: str, reason: str) -> None:
    """Nothing was submitted (the cluster refused, sbatch failed, the intent was abandoned): this launch
    lets go of the request's reserved charges and held approval uses, and each one no other live launch
    holds is given back. A submitted one is never released."""
    with store.transaction() as ledger:
        _let_go(store, ledger, request_id, reason)


def _let_go(store: Store, ledger: Ledger, request_id: str, reason: str) -> None:
    mine = attempts.current()
    charges, uses = _own_holds(ledger, request_id)
    for holders in [c.holders for c in charges] + [u.holders for _, u in uses]:
        if mine in holders:
            holders.remove(mine)
    _release_holds(store, ledger, request_id, reason)


SlurmRecord = tuple[int, int | None] | None  # Slurm's word on an ended job: (run time s, limit s); None: gone


def used(cost: JobCost, record: SlurmRecord) -> tuple[float, float]:
    """What an ended job counts (pure): its worst case scaled by the share of its time limit Slurm says it
    ran (at most all of it), nothing when Slurm says it ran no time; its whole worst case when Slurm's record is
    gone or names no limit. Nothing a job writes counts."""
    if record is not None and record[0] == 0:  # Slurm says it ran no time (a pending job cancelled)
        return 0.0, 0.0
    if record is None or not record[1]:
        return cost.gpu_hours_worst, cost.cpu_hours_worst
    share = min(max(record[0], 0) / record[1], 1.0)
    return cost.gpu_hours_worst * share, cost.cpu_hours_worst * share


Held = tuple[float, float]  # a job's worst case at the shape Slurm holds for it: (GPU-hours, CPU-hours)
GROW_SLACK = 1e-9  # float noise between the plan's worst case and the same shape read back from Slurm


def _more(cost: JobCost, held: Held) -> bool:
    return cost.gpu_hours_used is None and (
        held[0] > cost.gpu_hours_worst * (1 + GROW_SLACK) + GROW_SLACK
        or held[1] > cost.cpu_hours_worst * (1 + GROW_SLACK) + GROW_SLACK
    )


def beyond_worst(ledger: Ledger, target: str, held: dict[str, Held]) -> set[str]:
    """The jobs (of `held`: job id -> worst case at Slurm's shape) that Slurm holds more for than the worst case
    the ledger's decision counted (pure): a job of the account can raise a pending job (docs/adr/0041)."""
    return {j for costs, _ in _cost_owners(ledger, target) for j, c in costs.items() if j in held and _more(c, held[j])}


def grow(store: Store, target: str, held: dict[str, Held]) -> int:
    """Jobs Slurm holds more GPUs or CPUs for than their plan (job id -> worst case at Slurm's shape and limit)
    are charged that worst case, not the plan's: a job of the account can raise a pending job's GRES and CPUs.
    Said in the audit."""
    if not _grows(store.view(), target, held):
        return 0
    with store.transaction() as ledger:
        return _grow_in(store, ledger, target, held)


def _grows(ledger: Ledger, target: str, held: dict[str, Held]) -> bool:
    return bool(beyond_worst(ledger, target, held))


def _grow_in(store: Store, ledger: Ledger, target: str, held: dict[str, Held]) -> int:
    count = 0
    for costs, owner in _cost_owners(ledger, target):
        grown: list[str] = []  # each job's line of the audit
        for job, cost in costs.items():
            if job in held and _more(cost, held[job]):
                gpu, cpu = held[job]
                grown.append(f"job {job}: Slurm holds more than its plan: {max(gpu, cost.gpu_hours_worst):.4f} GPU-h, "
                             f"{max(cpu, cost.cpu_hours_worst):.4f} CPU-h at worst")  # fmt: skip
                cost.gpu_hours_worst = max(cost.gpu_hours_worst, gpu)
                cost.cpu_hours_worst = max(cost.cpu_hours_worst, cpu)
        count += len(grown)
        if grown and isinstance(owner, Charge):  # its worst case: its jobs' together, summed once they all grew
            owner.gpu_hours = max(owner.gpu_hours, sum(c.gpu_hours_worst for c in costs.values()))
            owner.cpu_hours = max(owner.cpu_hours, sum(c.cpu_hours_worst for c in costs.values()))
            for detail in grown:
                store.audit(_entry(store, "charge-grown", owner.plan_hash, owner.request_id, owner.grant_id, detail))
    return count


def left_scope(ledger: Ledger, target: str, job_id: str, partition: str, account: str, qos: str) -> str:
    """Why a job Slurm holds in `partition` (a list when it may start in several), `account` and `qos` is outside
    the scope of what allowed it (pure): its grant's partitions, accounts and QOS, or the partition, account and
    QOS of the plan a human approved. "" when inside, and when the ledger no longer has that grant or card."""
    where: tuple[str, list[str], list[str], list[str]] | None = None
    for ch in ledger.charges:
        if ch.target == target and job_id in ch.job_costs:
            g = next((g for g in ledger.grants if g.id == ch.grant_id), None)
            where = (f"grant {g.id}", g.partitions, g.accounts, g.qos) if g else None
            break
    else:
        for a in ledger.approvals:
            if any(u.target == target and job_id in u.jobs for u in a.uses):
                card = next((c for c in ledger.cards if c.id == a.card_id), None)
                if card is not None:
                    p = card.plan
                    where = (f"approval {a.id}", [p.partition] if p.partition else [],
                             [p.account] if p.account else [], [p.qos] if p.qos else [])  # fmt: skip
                break
    if where is None:
        return ""
    by, partitions, accounts, qoses = where
    why: list[str] = []
    outside = [x for x in partition.split(",") if x] if partitions else []
    outside = [x for x in outside if x not in partitions]
    if outside:
        why.append(f"partition {','.join(outside)} is not in {by}'s {','.join(partitions)}")
    for kind, value, allowed in (("account", account, accounts), ("qos", qos, qoses)):
        value = "" if value == "(null)" else value
        if allowed and value not in allowed:
            why.append(f"{kind} {value or '(none)'} is not in {by}'s {','.join(allowed)}")
    return "; ".join(why)


def settle(store: Store, target: str, ended: dict[str, SlurmRecord], never: Collection[str] = ()) -> int:
    """Jobs that ended (job id -> Slurm's record of it, None when Slurm's record was gone) count what Slurm
    says they used, or their worst case; those in `never` Slurm says ended without ever starting, and count no
    job. Returns how many job costs were settled."""
    if not _settles(store.view(), target, ended):
        return 0  # the common case: no lock, no write
    with store.transaction() as ledger:
        return _settle_in(store, ledger, target, ended, never)


def _settles(ledger: Ledger, target: str, ended: dict[str, SlurmRecord]) -> bool:
    return any(j in ended for j in _open_jobs(ledger, target))


def _settle_in(
    store: Store, ledger: Ledger, target: str, ended: dict[str, SlurmRecord], never: Collection[str] = ()
) -> int:
    count = 0
    for costs, owner in _cost_owners(ledger, target):
        for job, cost in costs.items():
            if job in ended and cost.gpu_hours_used is None:
                record = ended[job]
                cost.gpu_hours_used, cost.cpu_hours_used = used(cost, record)
                cost.at_worst = record is None
                cost.run_s = None if record is None else record[0]
                cost.never_ran = job in never and cost.run_s == 0  # Slurm's word, never a job's: no run time
                count += 1
        if (
            isinstance(owner, Charge)
            and owner.state == "submitted"
            and all(c.gpu_hours_used is not None for c in owner.job_costs.values())
        ):
            owner.state = "settled"
            worst = sum(c.at_worst for c in costs.values())
            detail = f"used {sum(c.gpu_hours_used or 0 for c in costs.values()):.4f} GPU-h"
            if worst:
                detail += f"; {worst} job(s) settled at worst case: Slurm's record was gone"
            if none := sum(c.never_ran for c in costs.values()):
                detail += f"; {none} job(s) never started on Slurm's word: not counted against the jobs budget"
            store.audit(_entry(store, "charge-settled", owner.plan_hash, owner.request_id, owner.grant_id, detail))
    return count


def keep_books(
    store: Store,
    ledger: Ledger,
    target: str,
    grown: dict[str, Held],
    found: dict[str, list[str]],
    ended: dict[str, SlurmRecord],
    never: Collection[str] = (),
) -> Ledger:
    """What one status read learned, recorded in one transaction, in this order: holds whose jobs the cluster
    shows were submitted (adopt), jobs Slurm holds more GPUs or CPUs for are charged so (grow), ended jobs settle on
    Slurm's word (settle; those in `never` Slurm says never started). `ledger` is the caller's reading of the
    file (its Store's view): when it shows nothing to record, nothing is locked, read or written. Returns the
    ledger as it now is."""
    if not (any(_holds_for(ledger, target, found)) or _grows(ledger, target, grown) or _settles(ledger, target, ended)):
        return ledger
    with store.transaction() as ledger:
        _adopt_in(store, ledger, target, found)
        _grow_in(store, ledger, target, grown)
        _settle_in(store, ledger, target, ended, never)
    return ledger


def held_jobs(ledger: Ledger, target: str) -> dict[str, str]:
    """The jobs rsk submitted on the target that have not settled (job id -> request id): the ledger's
    record, from the submit's own answer. Status, the active count and cancel find them by these ids."""
    held: dict[str, str] = {}
    for ch in ledger.charges:
        if ch.target == target and ch.state == "submitted":
            held |= {j: ch.request_id for j, c in ch.job_costs.items() if c.gpu_hours_used is None and not unfound(j)}
    for a in ledger.approvals:
        for u in a.uses:
            if u.target == target and u.state == "submitted":
                held |= {j: u.request_id for j, c in u.jobs.items() if c.gpu_hours_used is None and not unfound(j)}
    return held


def max_running(ledger: Ledger, target: str) -> dict[str, int]:
    """Each request on the target whose plan's max running the books hold (request id -> K)."""
    out = {ch.request_id: ch.max_running for ch in ledger.charges if ch.target == target and ch.max_running}
    out.update({u.request_id: u.max_running for a in ledger.approvals for u in a.uses
                if u.target == target and u.max_running})  # fmt: skip
    return out


def held_line(held: dict[str, str]) -> bytes:
    """The "held JOB:RID,..." line the cluster's programs read after the frame (docs/protocol.md)."""
    words = [f"{j}:{r}" for j, r in sorted(held.items()) if is_job_id(j)]
    return ("held " + ",".join(words) + "\n").encode()


SINCE_SKEW_S = 300  # the cluster's clock may run behind the ledger's: a wider window only keeps more held


def since_line(ledger: Ledger, target: str, request_id: str | None = None) -> bytes:
    """The "since EPOCH" line the cluster's submit and reconcile read after "held": when the ledger's oldest hold
    on the target whose outcome it does not know (reserved, no job: a launch that lost its answer after `go`, or
    one still deciding; or adopted with tasks no job was found for, their stand-ins held or released by a human)
    was made, less SINCE_SKEW_S; only the request's own with request_id. Empty when there is none. The cluster
    keeps such an intent open while an active job of the account that Slurm took since then is in no book
    (docs/adr/0039), and a job found so for a released stand-in is charged again (docs/adr/0051)."""
    times = [
        c.created
        for c in ledger.charges
        if (c.state == "reserved" or _open_to_find(c.state, c.job_costs))
        and c.target == target
        and request_id in (None, c.request_id)
    ]
    times += [u.at for a in ledger.approvals for u in a.uses
              if (u.state == "held" or _open_to_find(u.state, u.jobs))
              and u.target == target and request_id in (None, u.request_id)]  # fmt: skip
    if not times:
        return b""
    return f"since {max(int(min(times).timestamp()) - SINCE_SKEW_S, 0)}\n".encode()


def _cost_owners(ledger: Ledger, target: str) -> list[tuple[dict[str, JobCost], Charge | Use]]:
    owners: list[tuple[dict[str, JobCost], Charge | Use]] = [
        (ch.job_costs, ch) for ch in ledger.charges if ch.target == target and ch.state == "submitted"
    ]
    owners += [(u.jobs, u) for a in ledger.approvals for u in a.uses if u.target == target and u.state == "submitted"]
    return owners


def request_costs(store: Store, ledger: Ledger, target: str,
                  request_ids: Collection[str]) -> dict[str, dict[str, float]]:  # fmt: skip
    """What each request's submitted jobs count in the books (its charge's or its approval use's, hot or
    archived): CPU-h and GPU-h used by the jobs that ended, and reserved (the worst case) by those not yet ended."""
    wanted = set(request_ids)
    owners = [(c.id, c.request_id, c.target, c.job_costs) for c in ledger.charges]
    owners += [(f"{a.id}/{u.request_id}", u.request_id, u.target, u.jobs) for a in ledger.approvals for u in a.uses]
    for rid in sorted(wanted - {o[1] for o in owners}):  # (a request's charge is archived once it settled)
        charges, approvals = store.archive.uses(f'"request_id":"{rid}"')
        owners += [(c.id, c.request_id, c.target, c.job_costs) for c in charges]
        owners += [(f"{a.id}/{u.request_id}", u.request_id, u.target, u.jobs) for a in approvals for u in a.uses]
    out: dict[str, dict[str, float]] = {}
    seen: set[str] = set()
    for key, rid, tgt, costs in owners:
        if rid not in wanted or tgt != target or key in seen:
            continue
        seen.add(key)  # (the hot ledger's first: a charge is archived only once it settled)
        sums = out.setdefault(rid, dict.fromkeys(("cpu_hours_used", "gpu_hours_used", "cpu_hours_reserved",
                                                   "gpu_hours_reserved"), 0.0))  # fmt: skip
        for c in costs.values():
            if c.gpu_hours_used is None:
                sums["cpu_hours_reserved"] += c.cpu_hours_worst
                sums["gpu_hours_reserved"] += c.gpu_hours_worst
            else:
                sums["cpu_hours_used"] += c.cpu_hours_used or 0.0
                sums["gpu_hours_used"] += c.gpu_hours_used
    return {rid: {k: round(v, 4) for k, v in sums.items()} for rid, sums in out.items()}


def _open_jobs(ledger: Ledger, target: str) -> set[str]:
    return {j for costs, _ in _cost_owners(ledger, target) for j, c in costs.items() if c.gpu_hours_used is None}


# cards ---------------------------------------------------------------------------------------
