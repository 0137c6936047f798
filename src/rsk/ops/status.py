"""A project's jobs as the cluster and the ledger see them: status in one remote call, filtered and settled."""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr

from rsk.cluster.remote import Remote, remote_for
from rsk.errors import UsageError, not_ours
from rsk.ledger import guard
from rsk.ledger.models import Ledger
from rsk.ledger.store import Store
from rsk.ops.board import BatchView
from rsk.ops.board import attempt_of as attempt_of  # its one reading, with the views it groups
from rsk.wire import answers, states
from rsk.wire.answers import JobFacts
from rsk.wire.protocol import Output, Placement, placement, raise_for_error
from rsk.wire.resources import Resources
from rsk.wire.states import ATTENTION, FINAL, STATES, SUMMARY_ROWS, State


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Attempt(Model):
    """An earlier attempt of a task (`rsk retry`)."""

    attempt: int
    request_id: str
    job_id: str
    state: State


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
    needs: list[str] = []  # a workflow's task: the tasks it waits for
    attempt: int = 1  # `rsk retry`: which attempt of its task this job is
    link: str = ""  # a chain's link: "K/N"
    result: bool = False  # it published a result ($RSK_OUT, whole): `rsk fetch JOB --result`
    history: list[Attempt] = []  # with --batch: the task's earlier attempts
    undecided: str = ""  # a step the ledger never decided: why ("" for every step it allowed, and every job)
    slurm_holds: str = ""  # Slurm holds more for it than its plan (raised while it pended): what, and it is charged so
    # Slurm's own record of an ended job (run time s, limit s), None while it runs or once Slurm forgot it:
    # what settles its charge (the markers a job writes only describe it); and whether Slurm lists it
    _slurm_record: tuple[int, int | None] | None = PrivateAttr(default=None)
    _slurm_listed: bool = PrivateAttr(default=False)
    # its worst case at the shape Slurm holds (GPU-h, CPU-h: charged when more than the ledger's), and where Slurm
    # holds it (partition, account, QOS: compared with the scope of what allowed it)
    _held_hours: guard.Held | None = PrivateAttr(default=None)
    _held_where: tuple[str, str, str] | None = PrivateAttr(default=None)
    _never_started: bool = PrivateAttr(default=False)  # Slurm says it ended without starting: it counts no job

    @property
    def placement(self) -> Placement:
        """On Slurm, or a step in its lease (rsk.wire.protocol.placement)."""
        return placement(self.job_id, self.lease or "")

    @property
    def resources(self) -> Resources:
        """Its shape as Slurm reported it (what it did not report counts as one node and nothing else)."""
        return Resources(nodes=self.nodes or 1, cpus=self.cpus or 0, mem_mb=self.mem_mb or 0, gpus=self.gpus or 0,
                         time_min=(self.limit_s or 0) // 60)  # fmt: skip

    @property
    def gpu_hours_used(self) -> float:
        return self.resources.gpu_hours_over(self.elapsed_s or 0)

    @property
    def gpu_hours_reserved(self) -> float:
        """What a job not yet finished may still use at worst (an ending job has run: Slurm says it ended)."""
        if self.state in FINAL or self.state == "ending":
            return 0.0
        return self.resources.gpu_hours_over((self.limit_s or 0) - (self.elapsed_s or 0))

    @property
    def cpu_hours_used(self) -> float:
        return self.resources.cpu_hours_over(self.elapsed_s or 0)

    @property
    def cpu_hours_reserved(self) -> float:
        if self.state in FINAL or self.state == "ending":
            return 0.0
        return self.resources.cpu_hours_over((self.limit_s or 0) - (self.elapsed_s or 0))


class ChainProgress(Model):
    """How far a chain got, for deciding on `rsk extend`: the last link that ran of all its links, and the run
    time its links used of the budget (their limits in all), in seconds. `text` is the table's line."""

    request_id: str  # the chain: its first request id (an extension's links count with it)
    link: int  # the last link that ran (the first while none has)
    links: int  # its links in all, an extension's included
    run_time_s: int
    budget_s: int  # the limits of its links that started or may still start (as `rsk extend` counts them)
    left_s: int  # what its links not ended may still run: 0 once every link ended (extend to go on)
    unused_s: int = 0  # the limits of its links that never started (not needed, cancelled first): given back
    text: str  # "link K/N, run time H:MM:SS / H:MM:SS" (and what was given back)


def chains_of(target: str, jobs: list[JobState]) -> list[ChainProgress]:
    """Every chain among the jobs (with its extensions), in submission order."""
    grouped: dict[str, list[JobState]] = {}
    for j in jobs:
        if j.link:
            grouped.setdefault(attempt_of(j.request_id)[0], []).append(j)
    out = []
    for base, links in grouped.items():
        view = BatchView(target, base, links)
        if (c := view.chain_facts) is not None:
            out.append(ChainProgress(request_id=base, link=c.link, links=c.links, run_time_s=c.run_time_s,
                                     budget_s=c.budget_s, left_s=c.left_s, unused_s=c.unused_s,
                                     text=view.chain))  # fmt: skip
    return out


class RequestCost(Model):
    """What a request's jobs count in the ledger's books (its charge's or its approval use's, a grant's or a card's):
    CPU-h and GPU-h used by those that ended (on Slurm's word), reserved (at worst) by those still live."""

    cpu_hours_used: float
    gpu_hours_used: float
    cpu_hours_reserved: float
    gpu_hours_reserved: float


class Status(Model):
    schema_version: int = 2
    target: str
    project: str
    slurm: Literal["up", "down"]
    at: str
    jobs: list[JobState]
    counts: dict[str, int] = {}  # jobs per state: every job selected (the batch's, request's or project's)
    omitted: int = 0  # jobs selected that `jobs` does not list (a state filter, a summary, a limit)
    # the project's jobs a later attempt of their task replaced (`rsk retry`): neither listed nor counted (`rsk status
    # --batch B` shows each task's attempts); `rsk status JOB` still reads one
    superseded: int = 0
    summary: bool = False  # `jobs` lists only the jobs that need attention (not succeeded, running or pending)
    warnings: list[str] = []  # what a human must look at: steps the ledger never decided
    levels: list[dict[str, int]] = []  # with --batch, a workflow: each level's tasks per state
    chain: str = ""  # with --request-id, a chain: "link K/N, run time T / BUDGET"
    chains: list[ChainProgress] = []  # every chain among the jobs: its links and run time, done and left
    costs: dict[str, RequestCost] = {}  # per request shown: what the books charge it (ADR 0069)


def jobs_from(out: Output, slurm_up: bool = True) -> list[JobState]:
    return jobs_of(answers.status(out).jobs, slurm_up)


def jobs_of(facts: list[JobFacts], slurm_up: bool = True) -> list[JobState]:
    """Each job's state from its facts, a chain's links known as links (their wrapper's exit is the chain's signal),
    then what a workflow's and a chain's order says of the tasks that will never run."""
    number = _link_numbers(facts)
    jobs = [job_state(f, slurm_up, link=id(f) in number) for f in facts]
    _mark_skipped(facts, jobs, number)
    return jobs


def _link_numbers(facts: list[JobFacts]) -> dict[int, int]:
    """A chain (and its extensions, B.a2, ...): its links are tasks link1 .. linkN, numbered across them (by the id
    of each link's facts)."""
    chains = {attempt_of(f.rid)[0] for f in facts if any(cond == "notok" for _, cond in f.needs)}
    return {id(f): int(f.task[4:]) for f in facts
            if attempt_of(f.rid)[0] in chains and f.task.startswith("link") and f.task[4:].isdigit()}  # fmt: skip


def _mark_skipped(facts: list[JobFacts], jobs: list[JobState], number: dict[int, int]) -> None:
    """A workflow's task whose needed task ended in a way its need excludes is `skipped`, naming that task (a
    skip passes on: tasks are taken in a workflow's order, each after what it needs); a pending one says what
    it waits for. A chain's link that Slurm stopped at its time limit is `stopped`: the next link goes on."""
    by_idx = {(f.rid, f.idx): j for f, j in zip(facts, jobs, strict=True) if f.idx is not None}
    size: dict[str, int] = {}
    for f in facts:
        if id(f) in number:
            size[attempt_of(f.rid)[0]] = max(size.get(attempt_of(f.rid)[0], 0), number[id(f)])
    by_key: dict[tuple[str, str], JobState] = {}  # the tasks marked so far, by request and key
    for f, j in sorted(zip(facts, jobs, strict=True), key=lambda p: (p[0].rid, p[0].idx or 0)):
        if id(f) in number:
            j.link = f"{number[id(f)]}/{size[attempt_of(f.rid)[0]]}"
        if id(f) in number and j.state == "timed-out":
            j.state, j.where = "stopped", "(time-limit)"
        elif id(f) in number and j.state == "stopped":
            j.where = f"({f.stop})"
            if f.stop in ("time-limit", "budget-spent") and j.exit_code is not None and 0 < j.exit_code < 128 \
                    and j.exit_code != 75:  # fmt: skip
                # told, then exited with its own code (not 75, not killed): a crash after the signal reads so too
                j.where = f"({f.stop}: exit {j.exit_code} after SIGUSR1)"
        if not f.needs or f.cancel:
            continue
        by_key[(f.rid, j.task or j.job_id)] = j
        needs = [(other.task or other.job_id, cond, other.state) for i, cond in f.needs
                 if (other := by_idx.get((f.rid, i))) is not None]  # fmt: skip
        j.needs = [key for key, _, _ in needs]
        cause = states.skipped_by(j.state, needs)
        if cause is not None:
            j.state = "skipped"
            ended = next(st for key, _, st in needs if key == cause)
            j.where = _unneeded(cause, ended, by_key.get((f.rid, cause))) if id(f) in number \
                else f"(needs {cause}: {ended})"  # fmt: skip
        elif j.state in ("pending", "blocked") and (waits := [key for key, _, st in needs if st not in FINAL]):
            j.where = f"(waits for {', '.join(waits)})"


def _unneeded(cause: str, ended: str, link: JobState | None) -> str:
    """Why a chain's later link never runs: the chain ended at an earlier link, which finished the work (it
    succeeded) or ended it otherwise; a link after a link that was not needed either says the same."""
    if ended == "skipped" and link is not None and link.where.startswith("("):
        return link.where
    if ended == "succeeded":
        return f"(not needed: {cause} finished the work)"
    return f"(not run: the chain ended at {cause}, {ended})"


def job_state(f: JobFacts, slurm_up: bool = True, link: bool = False) -> JobState:
    """One job's state from the facts its @@job line carries (rsk.wire.states decides); `link`: a chain's."""
    nodes, cpus, mem, gpus = (f.res + [None] * 5)[:4]
    step = states.Step(at=f.st, lease=f.st_lease, why=f.st_why, returned=f.st_ret) if f.st else None
    facts = states.Facts(
        squeue=f.sq,
        sacct=f.ac,
        rc=f.rc,
        signal=f.sig or None,
        elapsed_s=f.elapsed,
        limit_s=f.limit,
        cancel_requested=f.cancel,
        slurm_up=slurm_up,
        reason=states.pending_reason(f.where),
        step=step,
        stop=f.stop,
        link=link,
    )
    state = states.job_state(facts)
    elapsed = f.sq_elapsed if f.sq_elapsed is not None else facts.elapsed_s
    limit = f.sq_limit if f.sq_limit is not None else facts.limit_s
    if step is not None and states.step_state(step) is not None:  # its queue says it all: it never ran to an end
        elapsed, limit = (f.st_age or 0) if state == "running" else 0, f.st_limit
    job = JobState(
        request_id=f.rid,
        task=f.task or None,
        job_id=f.job,
        state=state,
        exit_code=f.rc if f.rc is not None else f.ac_exit,
        signal=facts.signal if facts.signal not in (None, "none") else None,
        elapsed_s=elapsed,
        limit_s=limit,
        where=states.step_where(step, f.st_node) if step is not None else f.where,
        submitted=f.submitted,
        nodes=nodes,
        cpus=cpus,
        mem_mb=mem,
        gpus=gpus,
        lease=f.lease or None,
        starts=f.starts,
        result=f.result and state == "succeeded",  # a job that did not succeed has no result, whatever it wrote
    )
    job._slurm_record, job._slurm_listed = _slurm_record(f), bool(f.sq or f.ac)
    job._never_started = states.never_started(f.sq, f.sq_elapsed, f.where)
    _held_shape(job, f)
    return job


def _held_shape(job: JobState, f: JobFacts) -> None:
    """Slurm's word on the job's shape, against its plan's: a job of the account can raise a pending job's GPUs
    (by any spelling), CPUs, memory, nodes and time limit, and move it (`scontrol update`), so what Slurm holds
    for its limit is what is charged when it is more (against the ledger's worst case: status_call) and what is
    shown beside the plan."""
    if len(f.sq_shape) < 4:
        return
    nodes, cpus, mem, gpus = (x or 0 for x in f.sq_shape[:4])
    job._held_where = (f.sq_part, f.sq_account, f.sq_qos)
    limit_s = job.limit_s or ((f.res[4] or 0) * 60 if len(f.res) > 4 else 0)
    held = Resources(nodes=1, cpus=cpus, mem_mb=mem, gpus=gpus, time_min=0)
    job._held_hours = (held.gpu_hours_over(limit_s), held.cpu_hours_over(limit_s))
    if not f.res:
        return
    plan = job.resources
    more: list[str] = []
    if gpus > plan.total_gpus:
        more.append(f"{gpus} GPUs, its plan {plan.total_gpus}")
    if cpus > plan.total_cpus:
        more.append(f"{cpus} CPUs, its plan {plan.total_cpus}")
    if mem and job.mem_mb and mem > job.mem_mb:
        more.append(f"{mem} MB a node, its plan {job.mem_mb}")
    if nodes and job.nodes and nodes > job.nodes:
        more.append(f"{nodes} nodes, its plan {job.nodes}")
    planned_s = (f.res[4] or 0) * 60 if len(f.res) > 4 else 0
    if f.sq_limit and planned_s and f.sq_limit > planned_s:  # the owner can raise a pending job's limit too
        more.append(f"a {f.sq_limit} s limit, its plan {planned_s} s")
    if more:
        job.slurm_holds = "holds " + "; ".join(more)


def _against_the_ledger(st: Status, ledger: Ledger) -> dict[str, guard.Held]:
    """The worst case at Slurm's shape of each job that has one; a job Slurm holds more for than the ledger's
    decision counted is flagged (whatever its journal says its plan was) and warned of: it is charged so. A job
    Slurm holds outside its grant's or approved plan's scope is marked undecided. Read on the ledger as the
    status read found it, before the job's charge settles (and leaves for the archive)."""
    held = {j.job_id: j._held_hours for j in st.jobs if j._held_hours is not None}
    beyond = guard.beyond_worst(ledger, st.target, held)
    for j in st.jobs:
        if not j.lease and j._held_where is not None:
            j.undecided = guard.left_scope(ledger, st.target, j.job_id, *j._held_where)
        if j.job_id in beyond and not j.slurm_holds:
            gpu, cpu = held[j.job_id]
            j.slurm_holds = f"holds {gpu:.4f} GPU-h and {cpu:.4f} CPU-h at worst, more than its decision counted"
        if j.slurm_holds:
            st.warnings.append(
                f"job {j.job_id} (request {j.request_id}) {j.slurm_holds}: raised in Slurm after it was decided (a "
                "job of the account can raise a pending job; Slurm may also round CPUs up to whole cores); it is "
                "charged for what Slurm holds"
            )
    return held


def mark_undecided(st: Status, ledger: Ledger) -> Status:
    """Every step a lease's controller started is compared with the steps the ledger allowed: one it never
    decided (a job of the cluster account can write into a lease's queue) is marked, with a warning; so is a
    job Slurm holds outside the scope that allowed it (marked by _against_the_ledger)."""
    steps = guard.StepBooks(ledger, st.target)  # the ledger's leases and their steps, read once for every step
    for j in st.jobs:
        if j.lease:
            j.undecided = steps.undecided(j.lease, j.job_id, j.request_id, j.starts)
        if j.undecided:
            st.warnings.append(undecided_warning(j) if j.lease else left_scope_warning(j))
    return st


def undecided_warning(j: JobState) -> str:
    return (
        f"undecided step {j.job_id} (request {j.request_id}) ran in lease {j.lease}: {j.undecided}. Any job of "
        "the cluster account can queue steps into the account's leases (docs/security.md); if it is yours and "
        f"its launch was cut off, launch it again with --request-id {j.request_id}"
    )


def left_scope_warning(j: JobState) -> str:
    return (
        f"job {j.job_id} (request {j.request_id}) left the scope that allowed it: {j.undecided}. A job of the "
        "cluster account can move a pending job (`scontrol update`); nothing the human decided allows it there: "
        f"tell the human, and `rsk cancel {j.job_id}` unless they say otherwise"
    )


def _slurm_record(f: JobFacts) -> tuple[int, int | None] | None:
    """Slurm's word on an ended job: squeue's while it lists the job, else sacct's; None otherwise."""
    for state, el, limit in ((f.sq, f.sq_elapsed, f.sq_limit), (f.ac, f.ac_elapsed, f.ac_limit)):
        if states.slurm_ended(state) and el is not None:
            return el, limit
    return None


def ended_records(jobs: list[JobState], slurm_up: bool = True) -> dict[str, guard.SlurmRecord]:
    """The ended jobs and Slurm's record of each: what Slurm says they used, or None when Slurm answered and no
    longer lists a job (forgotten, MinJobAge) whose end nobody captured: it counts its worst case. Slurm's silence
    (squeue failed: a controller down or too busy to answer) is no word that it forgot a job."""
    ended: dict[str, guard.SlurmRecord] = {}
    for j in jobs:
        if j._slurm_record is not None:
            ended[j.job_id] = j._slurm_record
        elif slurm_up and j.state in FINAL and not j._slurm_listed:
            ended[j.job_id] = None
    return ended


_READ: dict[tuple[str, str], float] = {}  # (project, target): when this process last read it whole, Slurm answering


def read_within(project: str, target: str, seconds: float) -> bool:
    """Whether a status call of this process read (project, target) with Slurm answering in the last `seconds`:
    the broker's books poll leaves it be (what it would do is done, rsk.broker.books)."""
    at = _READ.get((project, target))
    return at is not None and time.monotonic() - at < seconds


def status_call(remote: Remote, target: str, project: str,
                after: int | None = None) -> tuple[Status, answers.StatusAnswer]:  # fmt: skip
    """The project's jobs: those the journal lists, and every job the ledger holds, found by id. The ledger is
    read once (and written once, when Slurm said something the books must record)."""
    args = [project] if after is None else [project, str(after)]
    store = Store(project)
    ledger = store.view()
    held = guard.held_jobs(ledger, target)
    out = remote.call("status", *args, stdin=guard.held_line(held))
    raise_for_error(out)
    answer = answers.status(out)
    up = answer.slurm_up
    if up:
        _READ[(project, target)] = time.monotonic()
    jobs = jobs_of(answer.jobs, up)
    for j in jobs:  # the ledger's record names a held job's request, whatever the journal says
        if j.job_id in held:
            j.request_id = held[j.job_id]
    explain_queued_steps(jobs)
    st = Status(target=target, project=project, slurm="up" if up else "down", at=answer.at,
                jobs=jobs, counts=count(jobs), chains=chains_of(target, jobs))  # fmt: skip
    st.warnings += [f"a job's line of the cluster's answer did not read and is left out (job {u}); tell the human"
                    for u in answer.unread]  # fmt: skip
    grown = _against_the_ledger(st, ledger)
    by_request: dict[str, list[str]] = {}
    for j in st.jobs:
        by_request.setdefault(j.request_id, []).append(j.job_id)
    # charged for what Slurm holds before anything settles; holds the cluster shows jobs for; what ended
    never = {j.job_id for j in jobs if j._never_started}  # a chain's links and a workflow's tasks never needed
    ledger = guard.keep_books(store, ledger, target, grown, by_request, ended_records(st.jobs, up), never)
    st.costs = {r: RequestCost(**c) for r, c in guard.request_costs(store, ledger, target, by_request).items()}
    return flag_throttle(flag_unbooked(mark_undecided(st, ledger), ledger), ledger), answer


LIVE: frozenset[str] = frozenset({"pending", "blocked", "running"})


def flag_unbooked(st: Status, ledger: Ledger) -> Status:
    """A job of the project Slurm still has that no book holds, once the read's adoptions are recorded (every hold
    of its request was given back long ago, or it never had one): warned of, for the human. A lease's steps are
    the lease's."""
    books = guard.booked(ledger, st.target)
    for j in st.jobs:
        if j.state in LIVE and not j.lease and j.job_id not in books:
            st.warnings.append(
                f"job {j.job_id} (request {j.request_id}) is {j.state} on Slurm and no book of the ledger holds it: "
                "nothing charges it or counts it against --max-active. Tell the human, and "
                f"`rsk cancel {j.job_id}` unless they say otherwise"
            )
    return st


def flag_throttle(st: Status, ledger: Ledger) -> Status:
    """A batch with more tasks running than its plan's max running: Slurm's throttle on its arrays was raised (a job
    of the account can, `scontrol update ArrayTaskThrottle=`). Warned of, for the human; the books hold, since the
    charge reserved every task's worst case (docs/adr/0059)."""
    limits = guard.max_running(ledger, st.target)
    running: dict[str, int] = {}
    for j in st.jobs:
        if j.state == "running" and j.request_id in limits:
            running[j.request_id] = running.get(j.request_id, 0) + 1
    for rid, n in sorted(running.items()):
        if n > limits[rid]:
            st.warnings.append(
                f"request {rid} runs {n} tasks at once, more than the {limits[rid]} its plan allows (--max-running): "
                "its arrays' throttle was raised in Slurm after it was decided (a job of the account can). Its charge "
                f"holds every task's worst case still; tell the human, and `rsk cancel --batch {rid}` unless they "
                "say otherwise"
            )
    return st


def explain_queued_steps(jobs: list[JobState]) -> None:
    """A queued step of a running lease whose nodes its other steps fill says what it waits for: the GPUs, CPUs
    or memory they hold (a step takes all three from its lease's node)."""
    from rsk.ops.stepfit import Shape, waits_for

    by_id = {j.job_id: j for j in jobs}
    held: dict[str, dict[str, Shape]] = {}  # a lease's job -> what its running steps hold on each node (one pass)
    for r in jobs:
        if r.state == "running" and r.placement.kind == "lease":
            on = held.setdefault(r.placement.job, {})
            h = on.get(r.where, Shape(0, 0, 0))
            on[r.where] = Shape(h.cpus + (r.cpus or 0), h.mem_mb + (r.mem_mb or 0), h.gpus + (r.gpus or 0))
    for j in jobs:
        at = j.placement
        lease = by_id.get(at.job) if at.kind == "lease" and j.where == "(Queued)" else None
        if lease is None or lease.state != "running":
            continue
        node = Shape(lease.cpus or 0, lease.mem_mb or 0, lease.gpus or 0)
        why = waits_for(Shape(j.cpus or 0, j.mem_mb or 0, j.gpus or 0), node, lease.nodes or 1,
                        held.get(lease.job_id, {}))  # fmt: skip
        if why:
            j.where = f"(Queued: {why})"


def status(target: str, project: str) -> Status:
    with remote_for(target) as remote:
        return status_call(remote, target, project)[0]


def ran(j: JobState) -> bool:
    """Whether a job started: not skipped, and not cancelled before it ran (no run time, no exit code)."""
    return j.state != "skipped" and not (j.state == "cancelled" and not j.elapsed_s and j.exit_code is None)


def outcome(jobs: list[JobState]) -> list[JobState]:
    """The jobs whose states say how the work ended: every job, but of a chain only its last link that ran (its
    earlier links stopped so that it could go on; the later ones were never needed). A link cancelled before it
    started did not run: a chain cancelled mid-way is judged by the link that was running (if none ran, by its
    first link)."""

    def rank(j: JobState) -> tuple[bool, int]:
        n = int(j.link.split("/")[0])
        return ran(j), n if ran(j) else -n

    last: dict[str, JobState] = {}
    out: list[JobState] = []
    for j in jobs:
        if not j.link:
            out.append(j)
        elif j.state != "skipped" and ((base := attempt_of(j.request_id)[0]) not in last or rank(j) > rank(last[base])):
            last[base] = j
    return out + list(last.values())


def of_request(jobs: list[JobState], request_id: str) -> list[JobState]:
    """A request's jobs; for a batch retried (`rsk retry`), each task's latest attempt, with the earlier ones as
    its history (an attempt's own id, B.a2, selects that attempt alone)."""
    if attempt_of(request_id)[1] > 1:
        return [j for j in jobs if j.request_id == request_id]
    latest: dict[str, JobState] = {}
    plain: list[JobState] = []
    for j in sorted((j for j in jobs if attempt_of(j.request_id)[0] == request_id),
                    key=lambda j: attempt_of(j.request_id)[1]):  # fmt: skip
        j = j.model_copy(update={"attempt": attempt_of(j.request_id)[1]})
        if not j.task:
            plain.append(j)
            continue
        if (before := latest.get(j.task)) is not None:
            gone = Attempt(attempt=before.attempt, request_id=before.request_id, job_id=before.job_id,
                           state=before.state)  # fmt: skip
            j.history = [*before.history, gone]
            j.needs = [*before.needs, *(k for k in j.needs if k not in before.needs)]  # a retry keeps only some
        latest[j.task] = j
    return plain + list(latest.values())


def count(jobs: list[JobState]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for j in jobs:
        counts[j.state] = counts.get(j.state, 0) + 1
    return counts


def rows(jobs: list[JobState], *, states: list[str] | None = None, active: bool = False, summary: bool = False,
         limit: int = 0) -> list[JobState]:  # fmt: skip
    """The jobs of a selection worth listing: those in the states asked for (the live ones), or with a summary those
    that need attention (rsk.wire.states.ATTENTION), at most `limit` (a summary's default: SUMMARY_ROWS), newest."""
    if active:
        jobs = [j for j in jobs if j.state not in FINAL]
    if states:
        jobs = [j for j in jobs if j.state in states]
    elif summary:
        jobs = [j for j in jobs if j.state in ATTENTION]
    limit = limit or (SUMMARY_ROWS if summary else 0)
    return jobs[-limit:] if limit else jobs


def check_states(given: list[str] | None) -> list[str]:
    """The states a filter names, each one rsk.wire.states defines."""
    for s in given or []:
        if s not in STATES:
            raise UsageError(f"unknown state {s!r}", f"a job's state is one of: {', '.join(STATES)}")
    return list(given or [])


def summarise(summary: bool | None, selected: list[JobState]) -> bool:
    """Whether to answer a summary: as asked, else (None) when more than SUMMARY_ROWS jobs are selected."""
    return len(selected) > SUMMARY_ROWS if summary is None else summary


def latest_attempts(jobs: list[JobState]) -> list[JobState]:
    """Every job but those a later attempt of its task superseded (`rsk retry`): what the project's work is now."""
    latest: dict[tuple[str, str], JobState] = {}
    plain: list[JobState] = []
    for j in sorted(jobs, key=lambda j: attempt_of(j.request_id)[1]):
        if j.task:
            latest[(attempt_of(j.request_id)[0], j.task)] = j
        else:
            plain.append(j)
    return plain + list(latest.values())


def filter_jobs(st: Status, *, job: str | None = None, request_id: str | None = None, active: bool = False,
                states: list[str] | None = None, summary: bool | None = False, limit: int = 0) -> Status:  # fmt: skip
    """The selection (one job, one request's, or the project's) with its counts and levels, listing only the jobs
    asked for (the live ones, those in `states`, a summary's: None makes one of a big selection, the newest
    `limit`): `counts` describe the whole selection, never the jobs listed; `omitted` says how many are not."""
    jobs = st.jobs
    superseded = 0
    if job:
        jobs = [j for j in jobs if j.job_id == job]
        if not jobs:
            raise not_ours(job, st.project, st.target)
    if request_id:
        jobs = of_request(jobs, request_id)
    # what the selection cost: every attempt's request, the superseded ones (and a task's history) too
    selected = {r for j in jobs for r in (j.request_id, *(h.request_id for h in j.history))}
    if not job and not request_id:  # the project's work now: a retried task counts once, as its latest attempt
        now = {id(j) for j in latest_attempts(jobs)}
        superseded = len(jobs) - len(now)
        jobs = [j for j in jobs if id(j) in now]
    summary = summarise(summary, jobs)
    shown = rows(jobs, states=check_states(states), active=active, summary=summary, limit=limit)
    view = BatchView(st.target, request_id or "", jobs)
    levels = [dict(c) for c in view.levels] if request_id and not view.chain else []
    return st.model_copy(update={"jobs": shown, "counts": count(jobs), "levels": levels,
                                 "chain": view.chain if request_id else "", "omitted": len(jobs) - len(shown),
                                 "summary": summary, "chains": chains_of(st.target, jobs), "superseded": superseded,
                                 "costs": {r: c for r, c in st.costs.items() if r in selected}})  # fmt: skip


END = 999_999_999  # an AFTER past any journal's end: only the cursor comes back
