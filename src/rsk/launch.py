"""One launch: plan on the cluster, decide from the ledger, submit with the expected hash."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rsk.decide import Decision, Facts, decide, find_approval
from rsk.errors import ConnectError, DeniedError, PendingApproval, ProtocolError, RskError
from rsk.ledger import AuditEntry, Card, CardPlan, Charge, Ledger, now
from rsk.protocol import Plan, Request, accepted_from, plan_from, raise_for_error
from rsk.remote import Remote
from rsk.store import Store
from rsk.targets import Target, find_target

Progress = Callable[[str], None]


class Allowed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["approval", "grant"]
    id: str
    charge_id: str | None = None


class TaskJob(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str
    job_id: str


class LaunchResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    status: Literal["submitted", "replayed"]
    target: str
    project: str
    request_id: str
    job_id: str  # the job; for a batch, the first task's
    tasks: list[TaskJob] = []  # a batch: each task's own job
    plan_hash: str
    allowed_by: Allowed
    deployed: bool
    plan: Plan


def requester() -> str:
    """Who is asking, as far as the environment tells (RSK_REQUESTER overrides)."""
    if explicit := os.environ.get("RSK_REQUESTER"):
        return explicit
    import getpass

    user = getpass.getuser()
    if os.environ.get("CLAUDECODE") or os.environ.get("CLAUDE_CODE_ENTRYPOINT"):
        agent = "claude-code"
    elif any(k.startswith("CODEX_") for k in os.environ):
        agent = "codex"
    elif any(k.startswith("PI_CODING_AGENT") for k in os.environ):
        agent = "pi"
    else:
        agent = "terminal"
    return f"{agent} ({user}, pid {os.getppid()})"


def facts(target: str, plan: Plan, request_id: str) -> Facts:
    """Per-job values are the largest job's; budgets see the totals (a batch: every task)."""
    batch = plan.kind == "batch"
    return Facts(
        target=target,
        plan_hash=plan.hash,
        request_id=request_id,
        partition=plan.partition,
        account=plan.account,
        nodes=plan.largest("nodes"),
        cpus=plan.largest("cpus"),
        mem_mb=plan.largest("mem_mb"),
        gpus=plan.largest("gpus"),
        time_min=plan.largest("time_min"),
        command=plan.command,
        active=plan.active,
        jobs=plan.jobs,
        batch_gpu_hours=plan.gpu_hours if batch else None,
        batch_cpu_hours=plan.cpu_hours if batch else None,
    )


def card_plan(target: str, plan: Plan) -> CardPlan:
    return CardPlan(
        target=target,
        cluster=plan.cluster,
        user=plan.user,
        command=plan.command,
        argv=plan.argv,
        kind=plan.kind,
        workdir=plan.workdir,
        partition=plan.partition,
        account=plan.account,
        qos=plan.qos,
        nodes=plan.largest("nodes"),
        cpus=plan.largest("cpus"),
        mem_mb=plan.largest("mem_mb"),
        gpus=plan.largest("gpus"),
        time_min=plan.largest("time_min"),
        env_names=[e.split("=", 1)[0] for e in plan.env],
        gpu_hours=plan.gpu_hours,
        cpu_hours=plan.cpu_hours,
        jobs=plan.jobs,
        estimate_start=plan.estimate_start,
        policy_verdict=plan.verdict,
        policy_reasons=plan.reasons,
    )


def _continuing(ledger: Ledger, plan_hash: str, request_id: str) -> Allowed | None:
    """A retry of an allowed request (same id, same plan) reuses its decision and charge."""
    for ch in ledger.charges:
        if ch.request_id == request_id and ch.plan_hash == plan_hash and ch.state != "released":
            return Allowed(kind="grant", id=ch.grant_id, charge_id=ch.id)
    for a in ledger.approvals:
        if a.plan_hash == plan_hash and request_id in a.used_by:
            return Allowed(kind="approval", id=a.id)
    return None


def authorize(store: Store, target: Target, plan: Plan, request: Request) -> Allowed:
    """Decide under the ledger lock; reserve a charge or use an approval; else file or find a card."""
    at = now()
    with store.transaction() as ledger:
        again = _continuing(ledger, plan.hash, request.request_id)
        if again is not None:
            return again
        d: Decision = decide(ledger, facts(target.name, plan, request.request_id), at)
        store.audit(
            AuditEntry(
                project=store.project,
                event="decision",
                plan_hash=plan.hash,
                request_id=request.request_id,
                rule=d.rule,
                detail=d.kind + (f": {d.reason}" if d.reason else ""),
            )
        )
        if d.kind == "deny":
            raise DeniedError(
                f"denied by {d.rule}: {d.reason}",
                "do not try to get around a denial; tell the human and ask what to do instead",
                details={"rule": d.rule, "reason": d.reason, "plan_hash": plan.hash},
            )
        if d.kind == "approval":
            approval = find_approval(ledger, plan.hash, at)
            assert approval is not None
            approval.uses_left -= 1
            approval.used_by.append(request.request_id)
            return Allowed(kind="approval", id=approval.id)
        if d.kind == "grant":
            assert d.rule is not None
            charge = Charge(
                grant_id=d.rule,
                plan_hash=plan.hash,
                request_id=request.request_id,
                target=target.name,
                gpu_hours=plan.gpu_hours,
                cpu_hours=plan.cpu_hours,
                jobs=plan.jobs,
            )
            ledger.charges.append(charge)
            return Allowed(kind="grant", id=d.rule, charge_id=charge.id)
        card = next((c for c in ledger.cards if c.plan_hash == plan.hash and c.status == "pending"), None)
        if card is None:
            card = Card(
                plan_hash=plan.hash,
                request_id=request.request_id,
                requester=request.requester,
                target=target.name,
                request=request.model_dump(),
                plan=card_plan(target.name, plan),
                closest_grant=d.closest_grant,
                closest_why=d.closest_why,
            )
            ledger.cards.append(card)
    raise PendingApproval(
        f"approval needed: card {card.id} waits for a human ({d.reason})",
        f"tell the human: `rsk approvals` shows card {card.id}; `rsk approve {card.id}` allows it. "
        f"Then run `rsk wait {card.id}` (or launch again with --request-id {request.request_id}).",
        details={"card_id": card.id, "plan_hash": plan.hash, "request_id": request.request_id},
    )


def settle(store: Store, allowed: Allowed, job_id: str | None, reason: str = "") -> None:
    """Mark a reserved charge spent (with its job) or released (nothing was submitted)."""
    if allowed.charge_id is None:
        return
    with store.transaction() as ledger:
        for ch in ledger.charges:
            if ch.id == allowed.charge_id and ch.state == "reserved":
                ch.state = "spent" if job_id else "released"
                ch.job_id = job_id
                ch.reason = reason
                store.audit(
                    AuditEntry(
                        project=store.project,
                        event=f"charge-{ch.state}",
                        plan_hash=ch.plan_hash,
                        request_id=ch.request_id,
                        rule=ch.grant_id,
                        detail=reason or (f"job {job_id}" if job_id else ""),
                    )
                )


def wait_for_card(store: Store, card_id: str, timeout: float | None, poll: float = 1.0) -> Card:
    """Block until a human decides the card (or the timeout passes: PendingApproval)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        card = find_card(store.load(), card_id)
        if card.status != "pending":
            return card
        if deadline is not None and time.monotonic() >= deadline:
            raise PendingApproval(
                f"card {card_id} is still pending",
                f"ask the human to run `rsk approve {card_id}` or `rsk deny {card_id}`; wait again with "
                f"`rsk wait {card_id}`",
                details={"card_id": card_id},
            )
        time.sleep(poll)


def find_card(ledger: Ledger, card_id: str) -> Card:
    from rsk.errors import UsageError

    for c in ledger.cards:
        if c.id == card_id:
            return c
    raise UsageError(f"no card {card_id!r} in project {ledger.project}", "`rsk approvals --all` lists cards")


def launch(
    target_name: str,
    request: Request,
    wait: float | None = None,
    progress: Progress | None = None,
) -> LaunchResult:
    """The whole path: plan, ledger, expect, journal. `wait`: seconds to wait for a human (None: don't)."""
    say = progress or (lambda _msg: None)
    target = find_target(target_name)
    store = Store(request.project)
    payload = request.encode()
    from rsk.transport import Connection  # paramiko loads only when a command needs the cluster

    conn = Connection(target)
    try:
        remote = Remote(conn)
        say(f"planning on {target.name}")
        out = remote.call("submit.sh", "plan", stdin=payload)
        raise_for_error(out)
        plan = plan_from(out)
        try:
            allowed = authorize(store, target, plan, request)
        except PendingApproval as pending:
            if wait is None:
                raise
            card_id = str(pending.details["card_id"])
            conn.close()
            say(f"waiting for a human to decide card {card_id}")
            card = wait_for_card(store, card_id, wait if wait > 0 else None)
            if card.status == "denied":
                raise DeniedError(
                    f"card {card.id} was denied by {card.decided_by}: {card.reason}",
                    "do not try to get around a denial; tell the human and ask what to do instead",
                    details={"card_id": card.id, "reason": card.reason},
                ) from None
            conn = Connection(target)
            remote = Remote(conn)
            allowed = authorize(store, target, plan, request)
        say(f"submitting (allowed by {allowed.kind} {allowed.id})")
        try:
            out = remote.call("submit.sh", "submit", "--rs-expect", plan.hash, stdin=payload)
        except (ConnectError, ProtocolError) as exc:  # the outcome is unknown: keep the charge reserved
            exc.hint = (
                f"the outcome is unknown; launch again with --request-id {request.request_id}: "
                "the cluster's journal makes sure nothing is submitted twice"
            )
            raise
        try:
            raise_for_error(out)
        except RskError as exc:
            settle(store, allowed, None, reason=exc.code)
            raise
        accepted = accepted_from(out)
        settle(store, allowed, ",".join(a.job_id for a in accepted))
        return LaunchResult(
            status="replayed" if all(a.replay for a in accepted) else "submitted",
            target=target.name,
            project=request.project,
            request_id=request.request_id,
            job_id=accepted[0].job_id,
            tasks=[TaskJob(task=a.task, job_id=a.job_id) for a in accepted if a.task],
            plan_hash=plan.hash,
            allowed_by=allowed,
            deployed=remote.deployed_now,
            plan=plan,
        )
    finally:
        conn.close()
