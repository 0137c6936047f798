"""One launch: plan on the cluster, decide from the ledger, submit with the expected hash."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from rsk.cluster.remote import Remote
from rsk.errors import ConflictError, ConnectError, PendingApproval, ProtocolError, RskError
from rsk.ledger import attempts
from rsk.ledger.cards import wait_for_card
from rsk.ledger.guard import (
    Allowed,
    adopt_reconciled,
    allowed_or_raise,
    authorize_in,
    authorize_step_in,
    held_jobs,
    held_line,
    record_outcome,
    request_jobs,
    since_line,
    submitted_jobs,
)
from rsk.ledger.kept import keep
from rsk.ledger.models import now
from rsk.wire import answers
from rsk.wire.protocol import Accepted, Plan, Request, job_order, raise_for_error

if TYPE_CHECKING:
    from datetime import datetime

    from rsk.ledger.models import Ledger
    from rsk.request.code import CodeSnapshot
from rsk.cluster.targets import find_target
from rsk.ledger.store import Store

Progress = Callable[[str], None]


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
    tasks_omitted: int = 0  # a brief answer of a big batch lists its first tasks (`rsk status --batch` has all)
    plan_hash: str
    allowed_by: Allowed
    gpu_hours: float = 0.0  # the worst case the plan reserves (all its jobs)
    cpu_hours: float = 0.0
    code: str = ""  # the code snapshot's digest the jobs run
    plan: Plan | None = None  # the whole plan (--verbose; `rsk plan --json` always has it)
    note: str = ""
    warnings: list[str] = []  # what the caller should know: e.g. a lease step that leaves GPUs idle

    def brief(self, most: int = 0, *, plan: bool = False) -> LaunchResult:
        """What an agent acts on: status, job ids, cost, what allowed it, the plan's hash; the whole plan only with
        `plan`. With `most`, a batch's first `most` tasks (the plan's too) and how many more: an answer stays small
        at 10,000 tasks."""
        kept = self.plan if plan else None
        many = max(len(self.tasks), len(kept.tasks) if kept is not None else 0)
        if not 0 < most < many:
            return self.model_copy(update={"plan": kept})
        return self.model_copy(update={"plan": kept.cut(most) if kept is not None else None,
                                       "tasks": self.tasks[:most], "tasks_omitted": many - most})  # fmt: skip


def submit_entry(request: Request) -> str:
    """The submit program for a request: only opening a lease ships the controller its job runs."""
    return "submit-lease" if request.lease_open else "submit"


def requester() -> str:
    """Who is asking, as far as the environment tells (RSK_REQUESTER overrides)."""
    from rsk.local import caller

    if explicit := caller.getenv("RSK_REQUESTER"):
        return explicit
    names = caller.env_names()
    if caller.getenv("CLAUDECODE") or caller.getenv("CLAUDE_CODE_ENTRYPOINT"):
        agent = "claude-code"
    elif any(k.startswith("CODEX_") for k in names):
        agent = "codex"
    elif any(k.startswith("PI_CODING_AGENT") for k in names):
        agent = "pi"
    else:
        agent = "terminal"
    return f"{agent} ({caller.user()}, pid {caller.ppid()})"


def _with_code(remote: Remote, request: Request, code: CodeSnapshot | None, say: Progress) -> Request:
    """Send the code snapshot (only what the cluster lacks) and bind its digest into the request."""
    if code is None:
        return request
    from rsk.ops.code import sync

    say(f"code: {len(code.files)} files, {code.total_bytes // 1024} KiB, snapshot {code.digest[:12]}")
    sync(remote, request.project, code)
    return request.model_copy(update={"code": code.digest})


def launch(
    target_name: str,
    request: Request,
    wait: float | None = None,
    progress: Progress | None = None,
    code: CodeSnapshot | None = None,
) -> LaunchResult:
    """The whole path: plan, ledger, expect, journal. `wait`: seconds to wait for a human (None: don't)."""
    said = unsent_warnings(request, code)
    with attempts.attempt():  # what this launch holds in the ledger, no other launch gives back
        try:
            result = _launch(target_name, request, wait, progress, code)
        except PendingApproval as pending:  # the agent reads it before the human has to
            if said:
                pending.details["warnings"] = said
            raise
    result.warnings = said + [w for w in result.warnings if w not in said]
    return result


def unsent_warnings(request: Request, code: CodeSnapshot | None) -> list[str]:
    """What a plan should say about files its commands name here that no --code sends (rsk.local.unsent)."""
    from rsk.local.unsent import warning

    if code is not None or request.code or request.script is not None or request.lease_open:
        return []
    said = warning([request.argv, *(t.argv for t in request.tasks)], request.workdir)
    return [said] if said else []


def _some_jobs(jobs: list[str], most: int = 10) -> str:
    """Jobs for a sentence: a sweep's 10,000 are its first few and how many (`details.jobs` the first 50)."""
    shown = ", ".join(jobs[:most])
    return f"job(s) {shown}" if len(jobs) <= most else f"{len(jobs)} jobs ({shown}, ...)"


def _ran_before(exc: ConflictError, ledger: Ledger, target: str, request: Request,
                code: CodeSnapshot | None = None) -> ConflictError:  # fmt: skip
    """A request id used for another plan: when the ledger recorded its jobs, the answer names them, and when the
    launch that ran was made from here, what this one asks differently (`differs`, and `code_added` and
    `code_removed`: files only one of the two snapshots held). A launch repeated as it was can still be another
    plan (every plan binds rsk's own cluster programs, which an upgrade changes): then those jobs are this work's,
    and a new request id would run it a second time."""
    from rsk.ledger.kept import asked

    if exc.code != "request-conflict":
        return exc
    request_id = request.request_id
    before = asked(request.project, request_id)
    if before is not None:
        d = before.differs(request, code)
        fields = d.fields
        exc.details.update(differs=fields, code_added=d.added, code_removed=d.removed, code_changed=d.changed)
        files = "".join(f"; {w} under --code: {', '.join(f[:10])}" for w, f in (("added", d.added),
                        ("gone", d.removed), ("changed", d.changed)) if f)  # fmt: skip
        alike = ": you asked for the same work as then (rsk's programs or the cluster changed since)"
        exc.message += f": it differs in {', '.join(fields)}{files}" if fields else alike
    jobs = sorted(request_jobs(ledger, request_id, target), key=job_order)
    if jobs:
        from rsk.wire.states import SUMMARY_ROWS

        exc.details["jobs"] = jobs[:SUMMARY_ROWS]  # a sweep's first jobs, and how many in all
        exc.details["job_count"] = len(jobs)
        same = before is not None and not exc.details.get("differs")
        exc.hint = (
            f"request id {request_id} already ran as {_some_jobs(jobs)}. "
            + ("You asked for the same work: " if same else "If you asked for the same work, ")
            + f"that is its job (rsk's own programs, bound in every plan, change with an upgrade): follow it with "
            f"`rsk wait -r {request_id}`, and do not launch it again under a new id. For different work, use a new "
            "--request-id"
        )
    return exc


def _launch(
    target_name: str, request: Request, wait: float | None, progress: Progress | None, code: CodeSnapshot | None
) -> LaunchResult:
    say = progress or (lambda _msg: None)
    target = find_target(target_name)
    store = Store(request.project)
    from rsk.cluster.transport import connect  # paramiko loads only when a command needs the cluster

    conn = connect(target)
    try:
        remote = Remote(conn)
        request = _with_code(remote, request.model_copy(update={"hostkey": remote.host_key}), code, say)
        # the ledger's jobs go first: the cluster counts them by id against its cap (a job can rename itself);
        # the decision's transaction uses this same reading of the ledger when nothing changed it since
        ledger = store.view()
        payload = (held_line(held_jobs(ledger, target.name)) + since_line(ledger, target.name, request.request_id)
                   + request.encode())  # fmt: skip
        say(f"planning on {target.name}")
        planned_at = now()
        # one remote program plans, waits while the ledger decides, then submits that very plan (`go`)
        talk = remote.converse(submit_entry(request), "launch", stdin=payload)
        try:
            out = talk.first
            try:
                raise_for_error(out)
            except ConflictError as exc:
                raise _ran_before(exc, ledger, target.name, request, code) from None
            plan = answers.plan(out)
            try:
                allowed, known = allow(store, target.name, plan, request, planned_at, code)
            except PendingApproval as pending:
                if wait is None:
                    raise
                talk.close()
                conn.close()
                card_id = str(pending.details["card_id"])
                say(f"waiting for a human to decide card {card_id}")
                wait_for_card(store, card_id, wait if wait > 0 else None)  # denied: DeniedError
                return launch(target_name, request, wait=None, progress=progress)  # the code is there now
            if known:
                # the ledger recorded this request's jobs, the cluster no longer knows them (a wiped remote
                # root): report them; submitting again would spend a permission that was already used
                accepted = [Accepted(job_id=j, request_id=request.request_id, plan_hash=plan.hash, replay=True)
                            for j in known]  # fmt: skip
                result = _result(target.name, request, plan, allowed, accepted)
                result.note = (
                    "the ledger recorded this request's jobs; the cluster's journal does not show them all: "
                    "not submitted again"
                )
                return result
            if allowed.kind == "replay":
                say("already submitted: replaying")
            say(f"submitting (allowed by {allowed.kind} {allowed.id})")
            try:
                # a replay was decided by nobody: the cluster submits nothing under it (`replay-changed`)
                out = talk.reply("go", plan.hash, mode="replay" if allowed.kind == "replay" else "")
            except (ConnectError, ProtocolError) as exc:  # the outcome is unknown: keep what the request holds
                exc.hint = (
                    f"the outcome is unknown; launch again with --request-id {request.request_id}: "
                    "the cluster's journal and the ledger make sure nothing is submitted twice"
                )
                raise
        finally:
            talk.close()  # without a `go`, the program ends having submitted nothing
        accepted = answers.accepted(out)
        unkept = ""
        if accepted:
            try:  # a batch's tasks, for `rsk retry`; what it asked, for a later conflict
                keep(request, code)
            except OSError as exc:  # jobs run: the ledger records them all the same, and the answer says so
                unkept = f"the request was not kept here ({exc.strerror}): rsk retry and extend cannot plan it again"
        failure: RskError | None = None
        try:
            raise_for_error(out)
        except RskError as exc:
            failure = exc
        if failure is not None and failure.code == "intent-unresolved":
            raise failure  # an earlier launch's outcome is unknown: what the request holds stays held
        if failure is not None and not accepted:  # the program's word alone: Slurm's decides what is given back
            found = _slurm_word(remote, store, target.name, request.project, request.request_id, failure)
            if found:
                accepted = [Accepted(job_id=j, request_id=request.request_id, plan_hash=plan.hash, replay=False)
                            for j in found]  # fmt: skip
                result = _result(target.name, request, plan, allowed, accepted)
                result.warnings.append(
                    f"the cluster's program answered {failure.code} after the go, but Slurm holds job(s) "
                    f"{', '.join(found)} of request {request.request_id}: they are charged (a process of the "
                    "cluster account can answer for rsk's programs: docs/security.md)"
                )
                return result
        # one transaction records what the cluster did: the jobs it accepted, else (on a failure) the holds given back
        record_outcome(store, target.name, allowed, plan, request.request_id, accepted,
                       f"not submitted: {failure.code}" if failure is not None else "")  # fmt: skip
        if failure is not None:
            raise failure
        result = _result(target.name, request, plan, allowed, accepted)
        result.warnings += answers.warnings(out) + step_warnings(ledger, target.name, plan) + chain_warnings(plan)
        result.warnings += [unkept] if unkept else []
        return result
    finally:
        conn.close()


def _slurm_word(
    remote: Remote, store: Store, target: str, project: str, request_id: str, failure: RskError
) -> list[str]:
    """After the go, an error is the cluster program's word alone, and a process of the account on the login node
    can answer in its place (docs/security.md, ADR 0053). Before anything is given back, Slurm is asked: reconcile
    (its evidence of open intents, and the batch scripts of the account's unheld jobs since the request's hold,
    which is still reserved) adopts every job of the request it finds. The jobs so found (charged); none: the
    failure stands and the caller gives the hold back. When Slurm cannot say, the hold stays reserved, as a lost
    answer's does."""
    before = held_jobs(store.view(), target)
    try:
        if failure.code == "lock-held":  # reconcile would wait on the same lock: read Slurm's queue alone
            raise failure
        answer = adopt_reconciled(remote, store, target, project)
    except RskError as exc:  # reconcile takes the project's lock and journal (a full disk): read Slurm's queue alone
        if _listed(remote, project, request_id, before) is False:
            return []
        failure.hint = (
            f"Slurm could not be asked whether request {request_id} has a job ({exc.message}), or lists one: what "
            "it holds stays reserved until `rsk status` or `rsk reconcile` shows, on Slurm's word, whether a job of "
            f"it runs; then launch again with --request-id {request_id}"
        )
        raise failure from None
    if answer.unknown:  # unbooked jobs of the account since the hold: any may be the request's
        failure.hint = (
            f"job(s) {', '.join(answer.unknown)} of the account, submitted since, may be request {request_id}'s (Slurm "
            "did not give their batch script, or it runs a task no journal line names): what the request holds stays "
            "reserved; `rsk status` adopts and charges a job of it that Slurm lists, and `rsk reconcile` says what "
            "is still unknown"
        )
        raise failure
    after = held_jobs(store.view(), target)
    return sorted(j for j, rid in after.items() if rid == request_id and j not in before)


def _listed(remote: Remote, project: str, request_id: str, held: dict[str, str]) -> bool | None:
    """Whether the cluster's status (read-only: no lock, no journal written) lists a job of the request; None when
    it cannot say (Slurm down, or the call fails)."""
    try:
        out = remote.call("status", project, stdin=held_line(held))
        raise_for_error(out)
        st = answers.status(out)
    except RskError:
        return None
    return any(j.rid == request_id for j in st.jobs) if st.slurm_up else None


class PlanReport(BaseModel):
    """What a launch would do now, without doing it: no card is filed, nothing is submitted."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    target: str
    project: str
    request_id: str
    plan_hash: str
    would: Literal["replay", "deny", "approval", "grant", "ask", "lease", "closed"]
    rule: str | None = None  # the deny rule, approval or grant that decides
    reason: str = ""
    closest_grant: str | None = None
    closest_why: list[str] = []
    gpu_hours_worst: float
    cpu_hours_worst: float
    jobs: int
    policy_verdict: str
    policy_reasons: list[str]
    estimate_start: str
    plan: Plan
    warnings: list[str] = []  # what the caller should know: e.g. a lease step that leaves GPUs idle
    # with --code: the snapshot's files as the card would list them (the first 1000), and how many in all
    code_files: list[str] = []
    code_count: int = 0
    tasks_omitted: int = 0  # a brief report of a big batch: its plan lists the first tasks (the card has them all)

    def brief(self, most: int) -> PlanReport:
        """The report with its plan's first `most` tasks and how many more: an answer of 10,000 tasks stays small
        (the hash binds them all, the card shows them all; `rsk plan --json --all` lists every one)."""
        many = max(len(self.plan.tasks), len(self.plan.prior), len(self.plan.active_jobs))
        if many <= most:
            return self
        return self.model_copy(update={"plan": self.plan.cut(most),
                                       "tasks_omitted": max(len(self.plan.tasks) - most, 0)})  # fmt: skip


def preview(target_name: str, request: Request, code: CodeSnapshot | None = None) -> PlanReport:
    """Plan on the cluster and say how the ledger would decide now (rsk plan)."""
    report = _preview(target_name, request, code)
    report.warnings = unsent_warnings(request, code) + report.warnings
    return report


def _preview(target_name: str, request: Request, code: CodeSnapshot | None) -> PlanReport:
    from rsk.ledger.decide import decide
    from rsk.ledger.guard import card_plan, count_active, facts, replaceable

    target = find_target(target_name)
    store = Store(request.project)
    from rsk.cluster.transport import connect

    with connect(target) as conn:
        remote = Remote(conn)
        request = _with_code(remote, request.model_copy(update={"hostkey": remote.host_key}), code, lambda _m: None)
        planned_at = now()
        ledger = store.view()  # a preview binds nothing: one reading serves the cluster's count and the decision
        held = held_line(held_jobs(ledger, target.name)) + since_line(ledger, target.name, request.request_id)
        out = remote.call(submit_entry(request), "plan", stdin=held + request.encode())
    try:
        raise_for_error(out)
    except ConflictError as exc:
        raise _ran_before(exc, ledger, target.name, request, code) from None
    plan = answers.plan(out)
    base = {
        "target": target.name, "project": request.project, "request_id": request.request_id,
        "plan_hash": plan.hash, "gpu_hours_worst": round(plan.gpu_hours, 4),
        "cpu_hours_worst": round(plan.cpu_hours, 4), "jobs": plan.jobs, "policy_verdict": plan.verdict,
        "policy_reasons": plan.reasons, "estimate_start": plan.estimate_start, "plan": plan,
    }  # fmt: skip
    shown = card_plan(target.name, plan, code)  # the snapshot's files, as a card of this plan lists them
    base |= {"code_files": shown.code_files, "code_count": shown.code_count}
    if _replayed(plan) or _known_jobs(ledger, store, request, plan, target.name):
        return PlanReport(would="replay", reason="this request's jobs were submitted already", **base)
    if plan.is_step:
        from rsk.ledger.guard import decide_step

        kind, rule, reason = decide_step(ledger, target.name, plan, request.request_id)
        return PlanReport(would=kind, rule=rule, reason=reason, warnings=step_warnings(ledger, target.name, plan),
                          **base)  # fmt: skip
    active = count_active(ledger, target.name, plan, planned_at, request.request_id)
    replaces = replaceable(ledger, request.request_id, plan.hash)
    d = decide(ledger, facts(target.name, plan, request.request_id, active, replaces), now())
    return PlanReport(would=d.kind, rule=d.rule, reason=d.reason, closest_grant=d.closest_grant,
                      closest_why=d.closest_why, warnings=chain_warnings(plan), **base)  # fmt: skip


def _known_jobs(ledger: Ledger, store: Store, request: Request, plan: Plan, target: str) -> list[str]:
    """The jobs the ledger recorded for this request, unless the cluster shows every one of them as
    submitted (then the cluster replays them, or submits the rest of a batch). The ledger is the
    authority: whatever the cluster's journal says of a request the ledger holds jobs for (wiped, or
    edited by a job), nothing is submitted in their place."""
    jobs = submitted_jobs(ledger, request.request_id, plan.hash, target, store.archive)
    seen = {p.job_id for p in plan.prior if p.state in ("done", "found")}
    return [] if set(jobs) <= seen else jobs


def allow(
    store: Store, target: str, plan: Plan, request: Request, planned_at: datetime, code: CodeSnapshot | None = None
) -> tuple[Allowed, list[str]]:
    """What lets this plan run, decided in one transaction of the ledger (one lock, one read, one write):
    the jobs the ledger recorded for the request (a replay of them, nothing submitted: they come back too),
    a replay the cluster shows, the lease's rules for a step, or the decision (deny, approval, grant) and what
    it holds. PendingApproval when a human must decide; a card filed now is announced (rsk.ledger.notify)."""
    with store.transaction() as ledger:
        known = _known_jobs(ledger, store, request, plan, target)
        if known:
            return Allowed(kind="replay", id="ledger"), known
        replay = _replayed(plan)
        if replay is not None:
            return replay, []
        if plan.is_step:
            verdict = authorize_step_in(store, ledger, target, plan, request)
        else:
            verdict = authorize_in(store, ledger, target, plan, request, planned_at, code)
    # refusals are raised once the transaction is written (what the decision released is given back)
    if isinstance(verdict, PendingApproval) and verdict.details.get("new_card"):
        from rsk.ledger.cards import find_card
        from rsk.ledger.notify import card_filed

        card_filed(find_card(ledger, str(verdict.details["card_id"])), store.project)  # the ledger as written
    return allowed_or_raise(verdict), []


def chain_warnings(plan: Plan) -> list[str]:
    """A chain whose command a shell runs without exec never yields: said before it runs."""
    from rsk.request.chain import shell_warning

    said = shell_warning(plan.tasks[0].argv) if plan.is_chain and plan.tasks else None
    return [said] if said else []


def step_warnings(ledger: Ledger, target: str, plan: Plan) -> list[str]:
    """A step whose CPUs or memory leave some of its lease's GPUs idle while such steps queue: said, with the
    shape that would not (rsk.ops.stepfit)."""
    from rsk.ledger.guard import held_lease
    from rsk.ops.stepfit import Shape, fit_warning

    lease = held_lease(ledger, target, plan.placement) if plan.is_step else None
    if lease is None:
        return []
    r = lease.resources
    said = fit_warning(lease.name, Shape(r.cpus, r.mem_mb, r.gpus), r.nodes, Shape(plan.cpus, plan.mem_mb, plan.gpus))
    return [said] if said else []


def _replayed(plan: Plan) -> Allowed | None:
    """A request whose jobs were all submitted is replayed without a decision (nothing new can run)."""
    if plan.prior and len(plan.prior) == plan.jobs and all(p.state in ("done", "found") for p in plan.prior):
        return Allowed(kind="replay", id="cluster")
    return None


def _result(target: str, request: Request, plan: Plan, allowed: Allowed, accepted: list[Accepted]) -> LaunchResult:
    return LaunchResult(
        status="replayed" if all(a.replay for a in accepted) else "submitted",
        target=target,
        project=request.project,
        request_id=request.request_id,
        job_id=accepted[0].job_id,
        tasks=[TaskJob(task=a.task, job_id=a.job_id) for a in accepted if a.task],
        plan_hash=plan.hash,
        allowed_by=allowed,
        gpu_hours=round(plan.gpu_hours, 4),  # as rsk plan says it (no float noise)
        cpu_hours=round(plan.cpu_hours, 4),
        code=plan.code,
        plan=plan,
    )
