"""The remote protocol: requests sent to submit.sh, and the @@ lines that come back.

docs/protocol.md is the specification; this module writes the requests and reads the frame (records,
`done`, `@@error`); rsk.wire.answers decodes what each program says inside it.
"""

from __future__ import annotations

import base64
import hashlib
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rsk.errors import (
    NOT_OURS_HINT,
    CapReached,
    ConfigError,
    ConflictError,
    ConnectError,
    DeniedError,
    ProtocolError,
    RejectedError,
    RemoteRootError,
    RskError,
    UnavailableError,
    UsageError,
)
from rsk.wire import resources
from rsk.wire.resources import Hours, Resources

PROTOCOL = 2
FRAME = f"rsk-frame {PROTOCOL}"  # the first stdin line of every call, followed by a fresh nonce

# record kinds that appear at most once in an answer: a second one is a protocol error (someone else's)
SINGLETONS = frozenset(
    {"plan", "policy", "active", "estimate", "status", "cursor", "base", "anchor", "reconciled", "log",
     "error", "await", "facts"}
)  # fmt: skip
POSITIONAL = frozenset({"planline", "journal", "chunk"})  # words, not key=value pairs


_JOB_ID = re.compile(r"[0-9]+(?:_[0-9]+|s[0-9]+)?")


def is_job_id(value: str) -> bool:
    """A Slurm job (123), an array task (123_4), or a step rsk queued into a lease (123s4: lease job 123)."""
    return bool(_JOB_ID.fullmatch(value))


def job_order(job_id: str) -> tuple[int | str, ...]:
    """A sort key of job ids in Slurm's order: 7_2 before 7_10, 9 before 10 (the numbers as numbers)."""
    return tuple(int(x) if i % 2 else x for i, x in enumerate(re.split(r"(\d+)", job_id)))


class Placement(BaseModel):
    """Where a job runs: on Slurm as a job of its own, or as a step in a lease (the lease's name and its
    Slurm job). The one reading of that on the client: a step's id is LEASEJOBsSEQ."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["slurm", "lease"]
    lease: str = ""  # kind lease: the lease's name
    job: str = ""  # kind lease: the lease's Slurm job


SLURM = Placement(kind="slurm")


def placement(job_id: str, lease: str = "") -> Placement:
    """A job id's placement. Every id but a step's is a Slurm job of its own, whatever lease name its
    journal line carries (the job that holds a lease carries its name too)."""
    head, sep, _ = job_id.partition("s")
    return Placement(kind="lease", lease=lease, job=head) if sep else SLURM


def b64(value: str) -> str:
    return base64.b64encode(value.encode("utf-8", "surrogateescape")).decode("ascii")


_LITERAL = re.compile(r"[A-Za-z0-9._/:@+,-]*")


def enc(value: str) -> str:
    """The wire form of a value: "=VALUE" when it has only safe characters (the cluster then needs no
    decoding), else base64. Base64 never starts with "=", so the two cannot be confused."""
    return "=" + value if _LITERAL.fullmatch(value) else b64(value)


def unb64(value: str) -> str:
    """Decode a wire value (either form)."""
    if value.startswith("="):
        return value[1:]
    try:
        return base64.b64decode(value.encode("ascii"), validate=True).decode("utf-8", "surrogateescape")
    except ValueError as exc:
        raise ProtocolError(f"the cluster sent a value that is not base64: {value[:40]!r}") from exc


_NEED_WIRE = {"succeeded": "ok", "ended": "any", "stopped": "notok"}


class Need(BaseModel):
    """An edge of a workflow: a task runs once `task` succeeded (Slurm's afterok), ended however it ended
    (afterany), or, a chain's link, stopped short of success (afternotok: yielded or at its time limit)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str
    on: Literal["succeeded", "ended", "stopped"] = "succeeded"

    @property
    def wire(self) -> str:
        """`KEY:ok`, `KEY:any` or `KEY:notok`, as the plan binds it."""
        return f"{self.task}:{_NEED_WIRE[self.on]}"

    @classmethod
    def from_wire(cls, word: str) -> Need:
        key, _, cond = word.rpartition(":")
        on = {v: k for k, v in _NEED_WIRE.items()}.get(cond)
        if not key or on is None:
            raise ProtocolError(f"malformed need {word[:80]!r}")
        return cls(task=key, on=on)


def needs_wire(needs: list[Need]) -> str:
    return ",".join(n.wire for n in needs)


class TaskSpec(BaseModel):
    """One task of a batch or a workflow: its own command and environment, optional resource overrides, and
    the tasks it needs."""

    model_config = ConfigDict(extra="forbid")

    key: str
    argv: list[str]
    env: list[str] = []
    nodes: int | None = None
    cpus: int | None = None
    mem_mb: int | None = None
    gpus: int | None = None
    time_min: int | None = None
    needs: list[Need] = []


class Request(BaseModel):
    """What the agent asks for; the cluster resolves it into a Plan."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = PROTOCOL
    project: str
    request_id: str = ""
    name: str = ""
    workdir: str = ""
    path: str = ""  # PATH of the job; empty: the cluster's default (/usr/local/bin:/usr/bin:/bin)
    partition: str = ""
    account: str = ""
    qos: str = ""
    nodes: int | None = None
    cpus: int | None = None
    mem_mb: int | None = None
    gpus: int | None = None
    time_min: int | None = None
    env: list[str] = []
    argv: list[str] = []
    script: str | None = None
    tasks: list[TaskSpec] = []
    requester: str = ""  # the agent's claim, kept on the card; never sent to the cluster
    hostkey: str = ""  # the fingerprint of the host key this connection verified; bound into the plan
    code: str = ""  # the digest of a code snapshot already on the cluster (rsk launch --code)
    lease: str = ""  # a step: queued into this lease of the project instead of a job of its own
    lease_open: str = ""  # open a lease of this name: one job that runs rsk's controller
    drain_min: int | None = None  # a lease: start no step this many minutes before the allocation ends
    overrun: str = ""  # a lease: a step longer than what is left is refused (refuse) or clipped (clip)
    budget_min: int | None = None  # a chain: the run time of all its links together (rsk.request.chain)
    signal_s: int | None = None  # a chain: SIGUSR1 this many seconds before each link's limit
    chain_of: str = ""  # `rsk extend`: the chain (its first request id) these links go on from
    link0: int | None = None  # `rsk extend`: how many links the chain had before these
    attempt_of: str = ""  # `rsk retry`: the batch (its first request id) this attempt runs again, in its work dir
    max_running: int | None = None  # a batch: at most this many of its tasks run at once (Slurm's array throttle)

    def encode(self) -> bytes:
        """`rsk-request 2 LENGTH`, then LENGTH bytes of `KEY VALUE` lines: the cluster reads them to the byte
        (docs/protocol.md, "Requests"), so a request of any size costs one pass."""
        lines: list[str] = []

        def put(key: str, value: str | int | None) -> None:
            if value is not None and value != "":
                lines.append(f"{key} {enc(str(value))}")

        for key in ("project", "request_id", "name", "workdir", "path", "partition", "account", "qos", "hostkey",
                    "code", "lease", "lease_open", "overrun", "chain_of", "attempt_of"):  # fmt: skip
            put(key, getattr(self, key))
        for key in ("nodes", "cpus", "mem_mb", "gpus", "time_min", "drain_min", "budget_min", "signal_s", "link0",
                    "max_running"):  # fmt: skip
            put(key, getattr(self, key))
        for entry in sorted(self.env, key=lambda e: e.split("=", 1)[0]):
            lines.append(f"env {enc(entry)}")
        for arg in self.argv:
            lines.append(f"arg {enc(arg)}")
        if self.script is not None:
            put("script", self.script)
        for task in self.tasks:
            lines.append(f"task {enc(task.key)}")
            for key in ("nodes", "cpus", "mem_mb", "gpus", "time_min"):
                put("t" + key, getattr(task, key))
            if task.needs:
                put("tneeds", needs_wire(task.needs))
            for entry in sorted(task.env, key=lambda e: e.split("=", 1)[0]):
                lines.append(f"tenv {enc(entry)}")
            for arg in task.argv:
                lines.append(f"targ {enc(arg)}")
        body = "".join(line + "\n" for line in lines).encode("ascii")
        return f"rsk-request {PROTOCOL} {len(body)}\n".encode("ascii") + body


@dataclass
class Record:
    kind: str
    words: list[str]
    kv: dict[str, str] = field(default_factory=dict)


@dataclass
class Output:
    records: list[Record]
    rc: int

    def first(self, kind: str) -> Record | None:
        return next((r for r in self.records if r.kind == kind), None)

    def all(self, kind: str) -> list[Record]:
        return [r for r in self.records if r.kind == kind]


def parse_kv(words: list[str], strict: bool = False) -> dict[str, str]:
    """key=value words; with strict, a key given twice is a protocol error (first wins otherwise)."""
    kv: dict[str, str] = {}
    for w in words:
        k, sep, v = w.partition("=")
        if sep:
            if k in kv:
                if strict:
                    raise ProtocolError(f"the cluster's answer repeats the key {k!r} in one line")
                continue
            kv[k] = v
    return kv


def parse(stdout: str, nonce: str, until: str | None = None) -> Output | None:
    """Read the `@@NONCE` lines; everything else (banners, a .bashrc's output, a forged `@@` line) is
    ignored. None when no `@@NONCE done` line closed the answer. With `until`, a line of that kind also
    closes it (rc 0, the line kept as the last record): a program that now waits for rsk's answer."""
    prefix = f"@@{nonce} "
    records: list[Record] = []
    seen: set[str] = set()
    done: int | None = None
    for line in stdout.splitlines():
        if not line.startswith(prefix):
            continue
        kind, _, rest = line[len(prefix) :].partition(" ")
        words = rest.split(" ") if rest else []
        if kind in SINGLETONS or kind == "done":
            if kind in seen:
                raise ProtocolError(f"the cluster's answer has two @@{kind} lines")
            seen.add(kind)
        kv = parse_kv(words, strict=kind not in POSITIONAL)
        if kind == "done":
            try:
                done = int(kv.get("rc", ""))
            except ValueError as exc:
                raise ProtocolError(f"malformed @@done line: {line[:80]!r}") from exc
            continue
        if done is not None:
            raise ProtocolError("the cluster's answer goes on after its @@done line")
        records.append(Record(kind, words, kv))
        if kind == until:
            return Output(records, 0)
    if done is None:
        return None
    return Output(records, done)


_REMOTE_ERRORS: dict[int, type[RskError]] = {
    2: UsageError,
    3: DeniedError,
    5: ConflictError,
    7: CapReached,
    69: UnavailableError,
    70: RejectedError,
    73: RemoteRootError,
    75: ConnectError,  # the project's lock is held: try again
    78: ConfigError,
}

_HINTS = {
    "not-ours": NOT_OURS_HINT,
    "policy-refused": "the cluster's policy.conf decides this; ask the cluster admins or change the request",
    "plan-mismatch": "something changed on the cluster or in the request since planning; launch again",
    "request-conflict": "the request id names another plan: another command, other resources, or other files "
    "under --code (results fetched into the code directory count too). Use a new --request-id for different "
    "work; to repeat the launch, run it on the same files",
    "intent-unresolved": "an earlier launch of this request id lost its answer and may have submitted one of the jobs "
    "named: launch again once Slurm answers, or wait for them to end or cancel them (rsk reconcile says the same)",
    "active-cap": "wait for some of the project's jobs to finish (rsk status), then launch again",
    "slurm-unavailable": "the Slurm controller is down or unreachable; try again later",
    "slurm-rejected": "Slurm cannot run the request as asked; `rsk info` shows each partition's nodes, CPUs, "
    "memory, GPUs and time limit",
    "step-never-fits": "ask the step for what one node of the lease holds (`rsk lease status` shows it), or open "
    "a larger lease for it",
    "bad-lease": "a lease starts no step in its last --drain minutes (5 by default), so its --time must be longer "
    "(or give --drain 0); a lease file the message calls damaged is written anew by `rsk lease open`",
    "outlives-lease": "ask for a --time within what is left of the lease (`rsk lease status`), or leave --time out "
    "to run until the lease ends",
    "sbatch-failed": "Slurm refused the job; the charge was released; see the message",
    "replay-changed": "a job of the account changed what the cluster shows of this request: launch it again, and "
    "the ledger decides",
    "root-unwritable": "free space or fix permissions under the target's remote_root",
    "lock-held": "try again in a minute (same request id); `rsk cancel` works while the lock is held. If it stays "
    "held, a job of the cluster account (any project's) holds it: a human can find it (`fuser -v` on the lock file "
    "named above, on the cluster) and cancel it",
    "workdir-missing": "create the directory on the cluster or pass another --workdir",
    "missing-command": "install it on the login node, or put it on the account's PATH (rsk doctor TARGET)",
    "untrusted-command": "rsk reads Slurm only through commands this account cannot rewrite: take the "
    "directory off the account's PATH, or make it the admins' (see docs/security.md)",
}


def raise_for_error(out: Output) -> None:
    """Turn an @@error (or a nonzero rc) into the matching typed error."""
    if out.rc == 0:
        return
    err = out.first("error")
    code = err.kv.get("code", "remote-error") if err else "remote-error"
    message = unb64(err.kv.get("msg", "")) if err else f"remote script failed with rc={out.rc}"
    reasons = [unb64(r.kv.get("msg", "")) for r in out.all("policy-reason")]
    if reasons:
        message += ": " + "; ".join(reasons)
    cls = _REMOTE_ERRORS.get(out.rc, ProtocolError)
    raise cls(message, _HINTS.get(code), code=code)


class TaskPlan(Resources, BaseModel):  # (BaseModel named too: a linter sees a pydantic model)
    """One task as planned (a single job is one task with no key)."""

    key: str = ""
    env: list[str] = []
    argv: list[str] = []
    needs: list[Need] = []  # a workflow's task: what it waits for


class Prior(BaseModel):
    """What the request id already did on this cluster, as the plan call found it."""

    model_config = ConfigDict(extra="forbid")

    idx: int
    state: Literal["done", "found", "open"]  # journal accepted it; Slurm/markers know a job; intent only
    job_id: str = ""
    plan_hash: str = ""


class Plan(BaseModel):
    """The canonical plan as the cluster resolved it, with the hash that binds it."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = PROTOCOL
    hash: str
    cluster: str
    user: str
    root: str  # the remote root, resolved on the cluster
    hostkey: str
    scripts: str
    policy: str
    project: str
    name: str
    kind: Literal["argv", "script", "batch", "lease"]
    workdir: str
    code: str = ""  # the code snapshot's digest ("" without --code)
    path: str
    partition: str
    # what the plan was checked against: the partition's lines of sinfo, "NAME,TIMELIMIT,CPUS,MEMORY,GRES,NODES"
    # per group of alike nodes, "/" between groups (docs/adr/0038)
    facts: str = ""
    account: str
    qos: str
    nodes: int
    cpus: int
    mem_mb: int
    gpus: int
    time_min: int
    env: list[str]
    argv: list[str]
    script: str | None = None
    tasks: list[TaskPlan]  # always at least one: a single job is one task
    verdict: str = "allow"
    reasons: list[str] = []
    active: int = 0
    active_cap: int | None = None
    active_jobs: list[str] = []
    at_once: int | None = None  # how many of its jobs can run at once, as the cluster's cap counts them (max_running)
    estimate_start: str = "unknown"
    estimate_nodes: str = ""
    prior: list[Prior] = []
    # where its jobs run: on Slurm, or as steps of a lease (its name and its Slurm job, bound by the plan)
    placement: Placement = SLURM
    lease_open: str = ""  # kind lease: the lease it opens (whose own job runs on Slurm)
    drain_min: int | None = None  # kind lease
    overrun: str = ""  # kind lease: refuse | clip
    budget_min: int | None = None  # a chain: the run time its links share (each link is a task)
    signal_s: int | None = None  # a chain: SIGUSR1 this many seconds before each link's limit
    chain_of: str = ""  # an extension of this chain: its links share its RSK_WORK_DIR and go on numbering it
    link0: int | None = None  # an extension: the links the chain had before
    attempt_of: str = ""  # a retry: the batch it runs again; its tasks share that batch's RSK_WORK_DIR
    max_running: int | None = None  # a batch: at most this many of its tasks run at once (docs/adr/0059)

    @property
    def is_step(self) -> bool:
        return self.placement.kind == "lease"

    def cut(self, most: int) -> Plan:
        """The plan as a brief answer shows it: its first `most` tasks, and of its other lists that grow with a batch
        (the tasks that ran before, the project's active jobs) the first `most` (its hash binds them all)."""
        return self.model_copy(update={"tasks": self.tasks[:most], "prior": self.prior[:most],
                                       "active_jobs": self.active_jobs[:most]})  # fmt: skip

    @property
    def jobs(self) -> int:
        return len(self.tasks)

    @property
    def is_workflow(self) -> bool:
        """A batch whose tasks need others: submitted whole, with Slurm's dependencies (docs/workflows.md)."""
        return any(t.needs for t in self.tasks) and not self.is_chain

    @property
    def is_chain(self) -> bool:
        """Links of one command under one run-time budget (docs/long-work.md)."""
        return self.budget_min is not None

    @property
    def worst(self) -> Hours:
        """Worst case: every GPU and CPU on every node for the whole time limit, summed over the tasks."""
        return resources.worst(self.tasks)

    @property
    def gpu_hours(self) -> float:
        return self.worst.gpu

    @property
    def cpu_hours(self) -> float:
        return self.worst.cpu

    @property
    def resources(self) -> Resources:
        """The plan's own shape (a single job's; a lease's allocation)."""
        return Resources(nodes=self.nodes, cpus=self.cpus, mem_mb=self.mem_mb, gpus=self.gpus, time_min=self.time_min)

    @property
    def largest(self) -> Resources:
        """Each resource's largest per-job value (over the tasks of a batch): what rules and caps compare."""
        return resources.largest(self.tasks)

    @property
    def command(self) -> str:
        """A one-line summary for lists; cards show every task and the whole script."""
        if self.kind == "lease":
            shape = f"{self.nodes} node(s) x {self.gpus} GPU(s)"
            return f"lease {self.lease_open}: {shape}, steps started by rsk's controller"
        if self.is_chain:
            return f"chain of up to {len(self.tasks)} links, {shlex.join(self.tasks[0].argv)}"
        if self.is_workflow:
            return f"workflow of {len(self.tasks)} tasks, first {shlex.join(self.tasks[0].argv)}"
        if self.kind == "batch":
            return f"batch of {len(self.tasks)} tasks, e.g. {shlex.join(self.tasks[0].argv)}"
        if self.kind == "script":
            return "sbatch script" + (f" {shlex.join(self.argv)}" if self.argv else "")
        return shlex.join(self.argv)

    def commands(self) -> list[str]:
        """Everything that will run, for deny rules: each task's command line, and the script's text; a
        lease runs `rsk lease NAME` (its controller), so `--command 'rsk lease*'` denies leases."""
        if self.kind == "lease":
            return [f"rsk lease {self.lease_open}"]
        if self.kind == "batch":
            return [shlex.join(t.argv) for t in self.tasks]
        if self.kind == "script":
            return [self.script or "", *([shlex.join(self.argv)] if self.argv else [])]
        return [shlex.join(self.argv)]


def plan_hash(lines: Iterable[tuple[str, str]]) -> str:
    return hashlib.sha256("".join(f"{k} {v}\n" for k, v in lines).encode("ascii")).hexdigest()


class Accepted(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_id: str
    request_id: str
    plan_hash: str
    replay: bool
    idx: int = 0
    task: str | None = None
