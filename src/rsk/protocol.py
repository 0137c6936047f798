"""The remote protocol: requests sent to submit.sh, and the @@ lines that come back.

docs/protocol.md is the specification; this module is its reader and writer.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from rsk.errors import (
    CapReached,
    ConflictError,
    DeniedError,
    ProtocolError,
    RejectedError,
    RemoteRootError,
    RskError,
    UnavailableError,
    UsageError,
)

PROTOCOL = 1


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


class TaskSpec(BaseModel):
    """One task of a batch: its own command and environment, optional resource overrides."""

    model_config = ConfigDict(extra="forbid")

    key: str
    argv: list[str]
    env: list[str] = []
    nodes: int | None = None
    cpus: int | None = None
    mem_mb: int | None = None
    gpus: int | None = None
    time_min: int | None = None


class Request(BaseModel):
    """What the agent asks for; the cluster resolves it into a Plan."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = PROTOCOL
    project: str
    request_id: str = ""
    name: str = ""
    workdir: str = ""
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
    requester: str = ""

    def encode(self) -> bytes:
        lines = [f"rsk-request {PROTOCOL}"]

        def put(key: str, value: str | int | None) -> None:
            if value is not None and value != "":
                lines.append(f"{key} {enc(str(value))}")

        for key in ("project", "request_id", "name", "workdir", "partition", "account", "qos"):
            put(key, getattr(self, key))
        for key in ("nodes", "cpus", "mem_mb", "gpus", "time_min"):
            put(key, getattr(self, key))
        for entry in sorted(self.env, key=lambda e: e.split("=", 1)[0]):
            lines.append(f"env {enc(entry)}")
        for arg in self.argv:
            lines.append(f"arg {enc(arg)}")
        if self.script is not None:
            put("script", self.script)
        for task in self.tasks:
            lines.append(f"task {b64(task.key)}")
            for key in ("nodes", "cpus", "mem_mb", "gpus", "time_min"):
                put("t" + key, getattr(task, key))
            for entry in sorted(task.env, key=lambda e: e.split("=", 1)[0]):
                lines.append(f"tenv {enc(entry)}")
            for arg in task.argv:
                lines.append(f"targ {enc(arg)}")
        put("requester", self.requester)
        lines.append("end")
        return ("\n".join(lines) + "\n").encode("ascii")


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


def parse_kv(words: list[str]) -> dict[str, str]:
    kv = {}
    for w in words:
        k, sep, v = w.partition("=")
        if sep:
            kv[k] = v
    return kv


def parse(stdout: str) -> Output:
    """Read the @@ lines; everything else (banners, noise) is ignored. @@done must close the output."""
    records: list[Record] = []
    done: int | None = None
    for line in stdout.splitlines():
        if not line.startswith("@@"):
            continue
        kind, _, rest = line[2:].partition(" ")
        words = rest.split(" ") if rest else []
        kv = parse_kv(words)
        if kind == "done":
            try:
                done = int(kv.get("rc", ""))
            except ValueError as exc:
                raise ProtocolError(f"malformed @@done line: {line[:80]!r}") from exc
            continue
        records.append(Record(kind, words, kv))
    if done is None:
        raise ProtocolError(
            "the cluster's answer was cut short (no @@done line)",
            "the connection may have dropped; try again (a request id makes that safe)",
        )
    return Output(records, done)


_REMOTE_ERRORS: dict[int, type[RskError]] = {
    2: UsageError,
    3: DeniedError,
    5: ConflictError,
    7: CapReached,
    69: UnavailableError,
    70: RejectedError,
    73: RemoteRootError,
}

_HINTS = {
    "policy-refused": "the cluster's policy.conf decides this; ask the cluster admins or change the request",
    "plan-mismatch": "something changed on the cluster or in the request since planning; launch again",
    "request-conflict": "use a new --request-id for a different job",
    "active-cap": "wait for some of the project's jobs to finish (rsk status), then launch again",
    "slurm-unavailable": "the Slurm controller is down or unreachable; try again later",
    "slurm-rejected": "Slurm cannot run the request as asked; check partition, GPUs and time",
    "sbatch-failed": "Slurm refused the job; the charge was released; see the message",
    "root-unwritable": "free space or fix permissions under the target's remote_root",
    "workdir-missing": "create the directory on the cluster or pass another --workdir",
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
    error = cls(message, _HINTS.get(code), details={"remote_code": code})
    error.code = code
    raise error


class TaskPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    nodes: int
    cpus: int
    mem_mb: int
    gpus: int
    time_min: int
    env: list[str] = []
    argv: list[str] = []

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.nodes * self.time_min / 60

    @property
    def cpu_hours(self) -> float:
        return self.cpus * self.nodes * self.time_min / 60


class Plan(BaseModel):
    """The canonical plan as the cluster resolved it, with the hash that binds it."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = PROTOCOL
    hash: str
    cluster: str
    user: str
    scripts: str
    policy: str
    project: str
    name: str
    kind: str
    workdir: str
    partition: str
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
    tasks: list[TaskPlan] = []
    verdict: str = "allow"
    reasons: list[str] = []
    active: int = 0
    active_cap: int | None = None
    estimate_start: str = "unknown"
    estimate_nodes: str = ""

    @property
    def jobs(self) -> int:
        return len(self.tasks) if self.kind == "batch" else 1

    @property
    def gpu_hours(self) -> float:
        """Worst case: every GPU on every node for the whole time limit (summed over a batch)."""
        if self.kind == "batch":
            return sum(t.gpu_hours for t in self.tasks)
        return self.gpus * self.nodes * self.time_min / 60

    @property
    def cpu_hours(self) -> float:
        if self.kind == "batch":
            return sum(t.cpu_hours for t in self.tasks)
        return self.cpus * self.nodes * self.time_min / 60

    def largest(self, field: str) -> int:
        """The largest per-job value of a resource (over the tasks of a batch)."""
        if self.kind == "batch" and self.tasks:
            return max(int(getattr(t, field)) for t in self.tasks)
        return int(getattr(self, field))

    @property
    def command(self) -> str:
        import shlex

        if self.kind == "batch":
            first = shlex.join(self.tasks[0].argv) if self.tasks else ""
            return f"batch of {len(self.tasks)} tasks, e.g. {first}"
        if self.kind == "script":
            return "sbatch script" + (f" {shlex.join(self.argv)}" if self.argv else "")
        return shlex.join(self.argv)


def plan_hash(lines: Iterable[tuple[str, str]]) -> str:
    return hashlib.sha256("".join(f"{k} {v}\n" for k, v in lines).encode("ascii")).hexdigest()


def plan_from(out: Output) -> Plan:
    """Build the Plan from @@planline records, checking the hash the cluster printed."""
    lines = [(r.words[0], r.words[1] if len(r.words) > 1 else "") for r in out.all("planline") if r.words]
    rec = out.first("plan")
    if rec is None or not rec.words:
        raise ProtocolError("the cluster's answer has no @@plan line")
    printed = rec.words[0]
    if plan_hash(lines) != printed:
        raise ProtocolError("the plan hash does not match the plan lines", "the remote scripts may be damaged")
    fields: dict[str, str] = {}
    env: list[str] = []
    argv: list[str] = []
    tasks: list[TaskPlan] = []
    for key, value in lines:
        if key == "task":
            tasks.append(TaskPlan(key=unb64(value), nodes=0, cpus=0, mem_mb=0, gpus=0, time_min=0))
        elif key in ("tres", "tenv", "targ"):
            if not tasks:
                raise ProtocolError(f"plan line {key} comes before any task")
            task = tasks[-1]
            if key == "tres":
                try:
                    task.nodes, task.cpus, task.mem_mb, task.gpus, task.time_min = map(int, unb64(value).split(","))
                except ValueError as exc:
                    raise ProtocolError(f"malformed task resources: {unb64(value)!r}") from exc
            elif key == "tenv":
                task.env.append(unb64(value))
            else:
                task.argv.append(unb64(value))
        elif key == "env":
            env.append(unb64(value))
        elif key == "arg":
            argv.append(unb64(value))
        else:
            fields[key] = unb64(value)
    policy = out.first("policy")
    active = out.first("active")
    estimate = out.first("estimate")
    try:
        return Plan(
            hash=printed,
            cluster=fields["cluster"],
            user=fields["user"],
            scripts=fields["scripts"],
            policy=fields["policy"],
            project=fields["project"],
            name=fields["name"],
            kind=fields["kind"],
            workdir=fields["workdir"],
            partition=fields["partition"],
            account=fields.get("account", ""),
            qos=fields.get("qos", ""),
            nodes=int(fields["nodes"]),
            cpus=int(fields["cpus"]),
            mem_mb=int(fields["mem_mb"]),
            gpus=int(fields["gpus"]),
            time_min=int(fields["time_min"]),
            env=env,
            argv=argv,
            script=fields.get("script"),
            tasks=tasks,
            verdict=policy.kv.get("verdict", "allow") if policy else "allow",
            reasons=[unb64(r.kv.get("msg", "")) for r in out.all("policy-reason")],
            active=int(active.kv.get("count", "0")) if active else 0,
            active_cap=int(active.kv["cap"]) if active and active.kv.get("cap") else None,
            estimate_start=estimate.kv.get("start", "unknown") if estimate else "unknown",
            estimate_nodes=unb64(estimate.kv.get("nodes", "")) if estimate else "",
        )
    except (KeyError, ValueError) as exc:
        raise ProtocolError(f"the plan from the cluster is incomplete: {exc}") from exc


class Accepted(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_id: str
    request_id: str
    plan_hash: str
    replay: bool
    reconciled: bool = False
    task: str | None = None


def accepted_from(out: Output) -> list[Accepted]:
    """Every @@accepted line: one for a job, one per task of a batch."""
    recs = out.all("accepted")
    if not recs:
        raise ProtocolError("the cluster did not confirm the submission (no @@accepted line)")
    return [
        Accepted(
            job_id=rec.kv.get("job", ""),
            request_id=rec.kv.get("rid", ""),
            plan_hash=rec.kv.get("plan", ""),
            replay=rec.kv.get("replay") == "1",
            reconciled=rec.kv.get("reconciled") == "1",
            task=rec.kv.get("task") or None,
        )
        for rec in recs
    ]
