"""Operating on a project's jobs: status, cancel, reconcile and events (one remote call each)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr

from rsk import answers, guard, safejson, states
from rsk.answers import JobFacts, JournalEvent
from rsk.atomic import write_atomic
from rsk.errors import UsageError
from rsk.paths import check_token, project_dir
from rsk.protocol import Output, Placement, placement, raise_for_error
from rsk.remote import Remote, remote_for
from rsk.states import FINAL, State
from rsk.store import Store


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobState(Model):
    request_id: str
    task: str | None
    job_id: str
    state: State
    exit_code: int | None
    signal: str | None
    elapsed_s: int | None
    limit_s: int | None
    where: str
    submitted: str
    nodes: int | None = None
    cpus: int | None = None
    mem_mb: int | None = None
    gpus: int | None = None
    lease: str | None = None  # a step: the lease it was queued into
    starts: int = 0  # a step: how often a lease's controller journaled starting it
    undecided: str = ""  # a step the ledger never decided: why ("" for every step it allowed, and every job)
    # Slurm's own record of an ended job (run time s, limit s), None while it runs or once Slurm forgot it:
    # what settles its charge (the markers a job writes only describe it); and whether Slurm lists it
    _slurm_record: tuple[int, int | None] | None = PrivateAttr(default=None)
    _slurm_listed: bool = PrivateAttr(default=False)

    @property
    def placement(self) -> Placement:
        """On Slurm, or a step in its lease (rsk.protocol.placement)."""
        return placement(self.job_id, self.lease or "")

    @property
    def gpu_hours_used(self) -> float:
        return (self.gpus or 0) * (self.nodes or 1) * (self.elapsed_s or 0) / 3600

    @property
    def gpu_hours_reserved(self) -> float:
        """What a job not yet finished may still use at worst."""
        if self.state in FINAL:
            return 0.0
        left = max((self.limit_s or 0) - (self.elapsed_s or 0), 0)
        return (self.gpus or 0) * (self.nodes or 1) * left / 3600


class Status(Model):
    schema_version: int = 1
    target: str
    project: str
    slurm: Literal["up", "down"]
    at: str
    jobs: list[JobState]
    counts: dict[str, int] = {}  # jobs per state (after any filter)
    warnings: list[str] = []  # what a human must look at: steps the ledger never decided


def jobs_from(out: Output, slurm_up: bool = True) -> list[JobState]:
    return [job_state(f, slurm_up) for f in answers.status(out).jobs]


def job_state(f: JobFacts, slurm_up: bool = True) -> JobState:
    """One job's state from the facts its @@job line carries (rsk.states decides)."""
    nodes, cpus, mem, gpus = (f.res + [None] * 5)[:4]
    facts = states.Facts(
        squeue=f.sq,
        sacct=f.ac,
        rc=f.rc,
        signal=f.sig or None,
        elapsed_s=f.elapsed,
        limit_s=f.limit,
        cancel_requested=f.cancel,
        slurm_up=slurm_up,
    )
    job = JobState(
        request_id=f.rid,
        task=f.task or None,
        job_id=f.job,
        state=states.job_state(facts),
        exit_code=f.rc if f.rc is not None else f.ac_exit,
        signal=facts.signal if facts.signal not in (None, "none") else None,
        elapsed_s=f.sq_elapsed if f.sq_elapsed is not None else facts.elapsed_s,
        limit_s=f.sq_limit if f.sq_limit is not None else facts.limit_s,
        where=f.where,
        submitted=f.submitted,
        nodes=nodes,
        cpus=cpus,
        mem_mb=mem,
        gpus=gpus,
        lease=f.lease or None,
        starts=f.starts,
    )
    job._slurm_record, job._slurm_listed = _slurm_record(f), bool(f.sq or f.ac)
    return job


def mark_undecided(st: Status, project: str) -> Status:
    """Every step a lease's controller started is compared with the steps the ledger allowed: one it never
    decided (a job of the cluster account can write into a lease's queue) is marked, with a warning."""
    ledger = Store(project).load()
    for j in st.jobs:
        if j.lease:
            j.undecided = guard.undecided_step(ledger, st.target, j.lease, j.job_id, j.request_id, j.starts)
        if j.undecided:
            st.warnings.append(undecided_warning(j))
    return st


def undecided_warning(j: JobState) -> str:
    return (
        f"undecided step {j.job_id} (request {j.request_id}) ran in lease {j.lease}: {j.undecided}. Any job of "
        "the cluster account can queue steps into the account's leases (docs/security.md); if it is yours and "
        f"its launch was cut off, launch it again with --request-id {j.request_id}"
    )


def _slurm_record(f: JobFacts) -> tuple[int, int | None] | None:
    """Slurm's word on an ended job: squeue's while it lists the job, else sacct's; None otherwise."""
    for state, el, limit in ((f.sq, f.sq_elapsed, f.sq_limit), (f.ac, f.ac_elapsed, f.ac_limit)):
        if states.slurm_ended(state) and el is not None:
            return el, limit
    return None


def settle_ended(target: str, project: str, jobs: list[JobState]) -> int:
    """Charges and approval uses of ended jobs count what Slurm says they used; a job Slurm no longer
    lists (forgotten, MinJobAge) whose end nobody captured counts its worst case."""
    ended: dict[str, guard.SlurmRecord] = {}
    for j in jobs:
        if j._slurm_record is not None:
            ended[j.job_id] = j._slurm_record
        elif j.state in FINAL and not j._slurm_listed:
            ended[j.job_id] = None
    return guard.settle(Store(project), target, ended) if ended else 0


def status_call(remote: Remote, target: str, project: str,
                after: int | None = None) -> tuple[Status, answers.StatusAnswer]:  # fmt: skip
    """The project's jobs: those the journal lists, and every job the ledger holds, found by id."""
    args = [project] if after is None else [project, str(after)]
    store = Store(project)
    held = guard.held_jobs(store.load(), target)
    out = remote.call("status", *args, stdin=guard.held_line(held))
    raise_for_error(out)
    answer = answers.status(out)
    up = answer.slurm_up
    jobs = [job_state(f, slurm_up=up) for f in answer.jobs]
    for j in jobs:  # the ledger's record names a held job's request, whatever the journal says
        if j.job_id in held:
            j.request_id = held[j.job_id]
    st = Status(target=target, project=project, slurm="up" if up else "down", at=answer.at,
                jobs=jobs)  # fmt: skip
    by_request: dict[str, list[str]] = {}
    for j in st.jobs:
        by_request.setdefault(j.request_id, []).append(j.job_id)
    guard.adopt(store, target, by_request)
    settle_ended(target, project, st.jobs)
    return mark_undecided(st, project), answer


def status(target: str, project: str) -> Status:
    with remote_for(target) as remote:
        return status_call(remote, target, project)[0]


def filter_jobs(st: Status, *, job: str | None = None, request_id: str | None = None, active: bool = False,
                limit: int = 0) -> Status:  # fmt: skip
    """Only the jobs asked for (one job, one request's, the live ones, the newest `limit`), counted again."""
    jobs = st.jobs
    if job:
        jobs = [j for j in jobs if j.job_id == job]
        if not jobs:
            raise UsageError(f"no rsk job {job} in project {st.project} on {st.target}", "`rsk status` lists them",
                             details={"code": "not-found"})  # fmt: skip
    if request_id:
        jobs = [j for j in jobs if j.request_id == request_id]
    if active:
        jobs = [j for j in jobs if j.state not in FINAL]
    if limit:
        jobs = jobs[-limit:]
    counts: dict[str, int] = {}
    for j in jobs:
        counts[j.state] = counts.get(j.state, 0) + 1
    return st.model_copy(update={"jobs": jobs, "counts": counts})


class CancelResult(Model):
    job_id: str
    request_id: str | None = None
    task: str | None = None
    result: Literal["cancelled", "finished", "not-ours", "failed"]


class CancelReport(Model):
    schema_version: int = 1
    target: str
    project: str
    results: list[CancelResult]


def cancel(target: str, project: str, *, job: str | None = None, request_id: str | None = None,
           batch: str | None = None) -> CancelReport:  # fmt: skip
    given = [(m, v) for m, v in (("job", job), ("rid", request_id), ("batch", batch)) if v]
    if len(given) != 1:
        raise UsageError("say what to cancel: a JOB, or --request-id R, or --batch B")
    mode, value = given[0]
    assert value is not None
    if mode != "job":
        check_token("request id", value)
    # the ledger's jobs are found by id, whatever name a job gave itself
    held = guard.held_jobs(Store(project).load(), target)
    mine = {j: r for j, r in held.items() if (j == value if mode == "job" else r == value)}
    with remote_for(target) as remote:
        out = remote.call("cancel", project, mode, value, stdin=guard.held_line(mine))
    raise_for_error(out)
    results = [
        CancelResult(job_id=c.job, request_id=c.rid or None, task=c.task or None, result=c.result)
        for c in answers.cancel(out)
    ]
    return CancelReport(target=target, project=project, results=results)


class ReconcileItem(Model):
    request_id: str
    plan_hash: str
    result: Literal["reconciled", "abandoned"]
    job_id: str | None = None


class ReconcileReport(Model):
    schema_version: int = 1
    target: str
    project: str
    open_intents: int
    items: list[ReconcileItem]


def reconcile(target: str, project: str) -> ReconcileReport:
    """Resolve intents without outcome on the cluster, then bring the ledger in line: holds of requests
    that have jobs become submitted, those of abandoned intents are released, ended jobs settle."""
    with remote_for(target) as remote:
        out = remote.call("reconcile", project)
        raise_for_error(out)
        answer = answers.reconcile(out)
        status_call(remote, target, project)  # adopts and settles what the cluster knows
    items = [ReconcileItem(request_id=r.rid, plan_hash=r.plan, result=r.result, job_id=r.job) for r in answer.items]
    store = Store(project)
    for item in items:  # the ledger follows what the cluster found
        if item.result == "abandoned":
            guard.release(store, item.request_id, "reconcile: the intent was abandoned (no job exists)")
    return ReconcileReport(target=target, project=project, open_intents=answer.open, items=items)


# events ----------------------------------------------------------------------------
class Event(Model):
    kind: Literal["journal", "state"]
    request_id: str
    task: str | None = None
    job_id: str | None = None
    journal: JournalEvent | None = None
    old_state: str | None = None
    new_state: str | None = None
    exit_code: int | None = None
    at: str | None = None  # when the change was seen (the cluster's clock)


class Events(Model):
    schema_version: int = 1
    target: str
    project: str
    cursor: str
    events: list[Event]
    summary: dict[str, int] = {}  # jobs per state now (the first call gives this instead of the whole journal)
    idle: bool = False  # nothing is pending or running: waiting longer would change nothing
    reset: bool = False  # the cursor was unknown or expired: this answer starts afresh (a summary, no events)
    note: str = ""


def _snapshots(project: str, target: str) -> Path:
    return project_dir(project) / "cursors" / check_token("target", target)


def _save_snapshot(project: str, target: str, lines: int, states: dict[str, str]) -> str:
    body = json.dumps(states, sort_keys=True)
    sid = hashlib.sha256(f"{lines}:{body}".encode()).hexdigest()[:12]
    d = _snapshots(project, target)
    path = d / f"{sid}.json"
    if not path.exists():
        write_atomic(path, json.dumps({"lines": lines, "states": states}).encode())
        olds = sorted(d.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for stale in olds[:-64]:  # keep the newest cursors
            stale.unlink(missing_ok=True)
    return f"{lines}.{sid}"


def cursor_line(cursor: str) -> int:
    """The journal line of a cursor. One form serves `rsk journal` and `rsk events`: LINE.SNAPSHOT, where
    the snapshot (job states when events made it) is optional; journal ignores it."""
    lines_s, _, sid = cursor.partition(".")
    if not lines_s.isdigit() or (sid and not sid.isalnum()):
        raise UsageError(f"cursor {cursor!r} is not one rsk gave", "start without --after to get a cursor")
    return int(lines_s)


def _load_snapshot(project: str, target: str, cursor: str) -> tuple[int, dict[str, str] | None]:
    lines_s, _, sid = cursor.partition(".")
    if lines_s.isdigit() and not sid:
        return int(lines_s), None  # a journal's cursor: job states unknown, journal events after it
    if not lines_s.isdigit() or not sid.isalnum():
        raise UsageError(f"cursor {cursor!r} is not one rsk gave", "start without --after to get a cursor")
    d = _snapshots(project, target)
    try:
        data = safejson.loads((d / f"{sid}.json").read_bytes(), max_depth=4)
        snapshot = {str(k): str(v) for k, v in dict(data["states"]).items()}
    except (OSError, ValueError, TypeError, KeyError, safejson.BadJson) as exc:
        raise UsageError(f"cursor {cursor!r} is unknown or expired", "start again without --after",
                         details={"code": "cursor-expired"}) from exc  # fmt: skip
    return int(lines_s), snapshot


def _key(j: JobState) -> str:
    return f"{j.request_id}/{j.task or ''}/{j.job_id}"


def events(target: str, project: str, after: str | None = None, wait: float = 0, poll: float = 2.0,
           reset_expired: bool = False) -> Events:  # fmt: skip
    """What changed since the cursor: new journal events and job state transitions; waits up to `wait` s.
    The first call (no cursor) returns a cursor and a summary of job states, not the whole journal. With
    nothing pending or running, a wait returns at once and says so. With reset_expired, a cursor rsk no
    longer keeps starts afresh (reset=True) instead of failing."""
    reset = False
    try:
        lines, snap = _load_snapshot(project, target, after) if after else (0, {})
    except UsageError as exc:
        if not (reset_expired and exc.details.get("code") == "cursor-expired"):
            raise
        after, lines, snap, reset = None, 0, {}, True
    first = after is None
    old = snap or {}
    deadline = time.monotonic() + wait
    with remote_for(target) as remote:
        while True:
            st, answer = status_call(remote, target, project, after=_END if first else lines)
            new_lines = lines if answer.cursor is None else answer.cursor
            evs: list[Event] = []
            for line in answer.journal:
                je = line.event
                evs.append(Event(kind="journal", request_id=je.request_id, job_id=je.job_id, journal=je, task=je.task))
            states: dict[str, str] = {_key(j): j.state for j in st.jobs}
            summary: dict[str, int] = {}
            for j in st.jobs:
                summary[j.state] = summary.get(j.state, 0) + 1
                before = old.get(_key(j))
                if not first and snap is not None and before != j.state:
                    evs.append(Event(kind="state", request_id=j.request_id, task=j.task, job_id=j.job_id,
                                     old_state=before, new_state=j.state, exit_code=j.exit_code,
                                     at=st.at))  # fmt: skip
            idle = all(j.state in FINAL for j in st.jobs)
            if evs or first or idle or time.monotonic() >= deadline:
                cursor = _save_snapshot(project, target, new_lines, states)
                note = "nothing is pending or running" if idle and not evs and wait > 0 else ""
                if reset:
                    note = "the cursor was unknown or expired: started afresh; changes before now are not listed"
                return Events(target=target, project=project, cursor=cursor, events=evs, summary=summary,
                              idle=idle, reset=reset, note=note)  # fmt: skip
            time.sleep(min(poll, max(deadline - time.monotonic(), 0.1)))


_END = 999_999_999  # an AFTER past any journal's end: only the cursor comes back
