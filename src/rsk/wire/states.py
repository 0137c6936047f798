"""A job's state from the raw facts the cluster reports (pure; remote/status.awk gathers the facts).

Sources, most direct first: squeue (while Slurm remembers the job), the run markers the job wrapper
writes (exit code and signal, kept after Slurm forgets), sacct where accounting works, and the journal's
record of a cancel rsk asked for. A lease's step is not a Slurm job: until it has run, its place in its
lease's queue and its lease's state say what it is (`Step`); once it ran, its markers, as a job's.

Nothing is guessed from missing evidence (docs/adr/0062): a state is final only on a fact that settles it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar, get_args

T = TypeVar("T")

State = Literal[
    "pending",
    "blocked",
    "running",
    "succeeded",
    "failed",
    "cancelled",
    "timed-out",
    "stopped",
    "skipped",
    "lost",
    "unknown",
    "ending",
]
FINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled", "timed-out", "stopped", "skipped", "lost"})
# a chain's link that stopped short of success: the next link goes on (Slurm's afternotok)
STOPPED: frozenset[str] = frozenset({"stopped", "timed-out"})
# a workflow's task that did not succeed: a task that needs it to succeed never runs (it is `skipped`)
UNSUCCESSFUL: frozenset[str] = frozenset(FINAL - {"succeeded"})
# what a summary of many jobs lists row by row: every state but the ones a big batch is mostly made of (done well,
# running, waiting its turn); `counts` say how many of those there are
STATES: tuple[str, ...] = get_args(State)
ATTENTION: frozenset[str] = frozenset(set(STATES) - {"succeeded", "running", "pending", "ending"})
# a brief answer of a big selection or batch lists at most this many jobs or tasks (those that need attention first;
# `counts` have every one): status, wait, plan, launch, cancel, fetch (ADR 0070, 0073)
SUMMARY_ROWS = 50


def first(items: Sequence[T], most: int, rank: Callable[[T], int] = lambda _: 0) -> tuple[list[T], int]:
    """A brief answer's list: `most` of the items (0: every one), those of the lowest rank first (what needs
    attention), each rank in the items' order, and how many it leaves out."""
    if not 0 < most < len(items):
        return list(items), 0
    return sorted(items, key=rank)[:most], len(items) - most


# Slurm's job state codes (squeue(1), JOB STATE CODES). A job is active while it holds an allocation or will
# get one without a new submission: waiting (PENDING, CONFIGURING), put back in the queue (REQUEUED,
# REQUEUE_FED, and held there: REQUEUE_HOLD, SPECIAL_EXIT, RESV_DEL_HOLD), paused with its allocation
# (SUSPENDED, STOPPED), or running and its ends (COMPLETING, SIGNALING, STAGE_OUT, RESIZING).
_PENDING = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT",
            "SUSPENDED", "STOPPED"}  # fmt: skip
_RUNNING = {"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT", "RESIZING"}
# The one active-state set of both sides: what the cap counts, what keeps a lease live, pending or running
# for rsk status. rsk.wire.bundle ships it to the cluster (active() in the awk library).
ACTIVE: frozenset[str] = frozenset(_PENDING | _RUNNING)
# the states in which Slurm has let go of a job's allocation for good (its run time is final), and what each says of
# the job, read the same from squeue and from sacct
_ENDED_AS: dict[str, State] = {
    "COMPLETED": "succeeded", "FAILED": "failed", "OUT_OF_MEMORY": "failed", "BOOT_FAIL": "failed",
    "NODE_FAIL": "lost", "TIMEOUT": "timed-out", "DEADLINE": "timed-out", "CANCELLED": "cancelled",
    "PREEMPTED": "cancelled",
}  # fmt: skip
_ENDED = frozenset(_ENDED_AS)
# the ends the job wrapper chooses by its exit code; a chain's link exits 0 to end its chain and 75 to go on, whatever
# its command did (docs/adr/0033), so for a link they say which, and only its marker says how it ended
_WRAPPERS_END = frozenset({"COMPLETED", "FAILED"})

# Slurm's pending reasons that never clear by themselves (squeue's %R, Slurm's word: a job sets none of it):
# the job asks more than a maximum per job allows, or depends on what can no longer happen. Such a job is
# `blocked`: it keeps its place and its reserved charge, but waiting for it changes nothing.
BLOCKED_REASONS: frozenset[str] = frozenset({
    "PartitionTimeLimit", "PartitionNodeLimit",
    "QOSMaxWallDurationPerJobLimit", "QOSMaxCpuPerJobLimit", "QOSMaxNodePerJobLimit", "QOSMaxMemoryPerJob",
    "QOSMaxGRESPerJob", "QOSMaxBillingPerJob",
    "AssocMaxWallDurationPerJobLimit", "AssocMaxCpuPerJobLimit", "AssocMaxNodePerJobLimit", "AssocMaxMemPerJob",
    "AssocMaxGRESPerJob", "AssocMaxBillingPerJob",
    "DependencyNeverSatisfied", "BadConstraints", "InvalidAccount", "InvalidQOS",
})  # fmt: skip


def pending_reason(where: str) -> str:
    """The reason word of squeue's %R for a pending job: "(PartitionTimeLimit)" -> "PartitionTimeLimit"."""
    return where.strip("()").split(",")[0].strip() if where.startswith("(") else ""


def slurm_ended(state: str) -> bool:
    """Slurm itself (squeue or sacct) says the job ended: what it reports of its run time is final."""
    return state in _ENDED


def never_started(state: str, elapsed_s: int | None, where: str) -> bool:
    """squeue says the job ended without ever starting: cancelled while it pended (by its owner, by rsk, or by
    Slurm for a dependency that can no longer be met), after no run time, on no node. All three are Slurm's
    word: %R names the nodes of a job that started (a failed job's reason), and a requeued job's run time is
    read as its limit (rsk_squeue), so a job that ran cannot read so; its markers and journal lines count for
    nothing here."""
    return state == "CANCELLED" and elapsed_s == 0 and where == ""


# the states of a lease (remote/lib.sh, rsk_lease's L_state) in which it holds its allocation: a step it started runs
LEASE_LIVE: frozenset[str] = frozenset({"starting", "running", "draining", "drained"})
# why a step left its lease's queue without running: what cancelled it, and what refused it
_STEP_CANCELLED = frozenset({"lease-closed", "cancelled"})
_STEP_REFUSED = frozenset({"outlives-lease"})
_WAITS_FOR = {"ended": "LeaseEnded", "closed": "LeaseEnded", "pending": "LeasePending", "drained": "LeaseDrained",
              "draining": "LeaseDraining"}  # fmt: skip


@dataclass(frozen=True)
class Step:
    """A lease's step as its lease's files show it (a job of the account can write them)."""

    at: Literal["q", "run", "end"]  # queued, started by the lease's controller, or out of the queue
    lease: str = ""  # its lease's state ("ended" when an earlier allocation of the lease started it)
    why: str = ""  # why it left the queue without running to its end ("" when it ran)
    returned: bool = False  # the srun that ran it returned


def step_state(s: Step) -> State | None:
    """A step's state from its queue, or None when only its markers can tell (it ran, or its lease is gone)."""
    if s.at == "q":
        return "pending"
    if s.at == "run" and not s.returned and s.lease in LEASE_LIVE:
        return "running"
    if s.at == "end" and s.why in _STEP_CANCELLED:
        return "cancelled"
    if s.at == "end" and s.why in _STEP_REFUSED:
        return "failed"
    return None


def step_where(s: Step, node: str) -> str:
    """Where a step is, as squeue's %R says it of a job: what a queued step waits for, the node it runs on,
    or why it left the queue."""
    if s.at == "q":
        return f"({_WAITS_FOR.get(s.lease, 'Queued')})"
    if s.at == "end" and s.why:
        return f"({s.why})"
    return node


@dataclass(frozen=True)
class Facts:
    squeue: str = ""  # squeue's state, "" when Slurm no longer lists the job
    sacct: str = ""  # sacct's state, "" without accounting
    rc: int | None = None  # from the wrapper's "ended" marker
    signal: str | None = None  # "none" or a signal name, from the marker
    elapsed_s: int | None = None
    limit_s: int | None = None
    cancel_requested: bool = False
    slurm_up: bool = True
    reason: str = ""  # squeue's pending reason (Slurm's word; "" for a lease's step, whose queue a job can write)
    stop: str = ""  # a chain's link: why it stopped short of success, from its marker (yielded, time-limit, ...)
    step: Step | None = None  # a lease's step: its queue entry
    link: bool = False  # a chain's link: its wrapper's exit code is its chain's signal, not its outcome


def skipped_by(state: State, needs: list[tuple[str, str, State]]) -> str | None:
    """A workflow's task (or a chain's link) that has not run and never will: the first task it needs (`needs`:
    key, condition ok|any|notok, that task's state) that ended in a way the condition excludes: not succeeded
    for ok, succeeded or ended for good for notok (a chain ended there); None when nothing stops it. Slurm
    cancels such a task at once (`--kill-on-invalid-dep`); until then it pends."""
    if state not in ("pending", "blocked", "cancelled", "lost"):  # lost: Slurm forgot the task it removed
        return None
    for key, cond, other in needs:
        if (cond == "ok" and other in UNSUCCESSFUL) or (cond == "notok" and other in FINAL - STOPPED):
            return key
    return None


def job_state(f: Facts) -> State:
    if f.step is not None and (queued := step_state(f.step)) is not None:
        return queued
    sq = f.squeue
    if sq in _PENDING:
        return "blocked" if f.reason in BLOCKED_REASONS else "pending"
    if sq in _RUNNING:
        return "running"
    # one rule for a command that outlives its limit: Slurm's word that it ended the job at its time limit
    # wins, from squeue or (once squeue forgot it) sacct, whatever the command's own exit code, which
    # exit_code still reports (a command signalled at its limit may exit 0 in the kill grace, cut short)
    if sq in ("TIMEOUT", "DEADLINE") or (not sq and f.sacct in ("TIMEOUT", "DEADLINE")):
        return "timed-out"
    if sq in ("CANCELLED", "PREEMPTED"):
        return "cancelled"
    if f.rc is not None:
        if f.stop:
            return "stopped"
        if f.signal not in (None, "", "none", "USR1"):  # USR1: a chain's notice before its limit, not a kill
            near_limit = f.limit_s is not None and (f.elapsed_s or 0) + 5 >= f.limit_s
            return "timed-out" if near_limit else "cancelled"
        return "succeeded" if f.rc == 0 else "failed"
    slurm = sq or f.sacct  # Slurm's word on how it ended: squeue's while it lists the job, else sacct's
    if slurm in _WRAPPERS_END and f.link:
        # no marker (yet: written as the job ends, seen late on a shared file system; or never: its wrapper was
        # killed): `ending` while Slurm lists the link, `lost` once squeue forgot it, so no marker will come
        return "ending" if sq else "lost"
    if slurm in _ENDED_AS:
        return _ENDED_AS[slurm]
    if slurm in ACTIVE:  # sacct lags the controller: where squeue forgot the job, it may not have heard of its end
        return "running" if slurm in _RUNNING else "pending"
    if not f.slurm_up or slurm:  # Slurm did not answer, or said what rsk cannot read: nothing settles it
        return "unknown"
    if f.cancel_requested:
        return "cancelled"
    return "lost"
