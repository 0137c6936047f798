"""Operating on a project's jobs: status, cancel, reconcile and events (one remote call each)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rsk.atomic import write_atomic
from rsk.errors import UsageError
from rsk.jobs import JournalEvent, parse_journal_line
from rsk.paths import check_token, project_dir
from rsk.protocol import Output, raise_for_error
from rsk.remote import Remote, remote_for

State = Literal["pending", "running", "succeeded", "failed", "cancelled", "timed-out", "lost", "unknown"]
FINAL = {"succeeded", "failed", "cancelled", "timed-out", "lost"}


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


def _int(value: str | None) -> int | None:
    return int(value) if value and value.lstrip("-").isdigit() else None


def jobs_from(out: Output) -> list[JobState]:
    jobs = []
    for r in out.all("job"):
        kv = r.kv
        res = [_int(x) for x in kv.get("res", "").split(",")] if kv.get("res") else [None] * 5
        nodes, cpus, mem, gpus = (res + [None] * 5)[:4]
        state = kv.get("state", "unknown")
        jobs.append(
            JobState(
                request_id=kv.get("rid", ""),
                task=kv.get("task") or None,
                job_id=kv.get("job", ""),
                state=state if state in State.__args__ else "unknown",  # type: ignore[attr-defined]
                exit_code=_int(kv.get("exit")),
                signal=kv.get("sig") if kv.get("sig") not in (None, "", "none") else None,
                elapsed_s=_int(kv.get("elapsed")),
                limit_s=_int(kv.get("limit")),
                where=kv.get("where", ""),
                submitted=kv.get("submitted", ""),
                nodes=nodes,
                cpus=cpus,
                mem_mb=mem,
                gpus=gpus,
            )
        )
    return jobs


def status_call(remote: Remote, target: str, project: str, after: int | None = None) -> tuple[Status, Output]:
    args = [project] if after is None else [project, str(after)]
    out = remote.call("status.sh", *args)
    raise_for_error(out)
    head = out.first("status")
    st = Status(
        target=target,
        project=project,
        slurm="down" if head and head.kv.get("slurm") == "down" else "up",
        at=head.kv.get("t", "") if head else "",
        jobs=jobs_from(out),
    )
    return st, out


def status(target: str, project: str) -> Status:
    with remote_for(target) as remote:
        return status_call(remote, target, project)[0]


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
    with remote_for(target) as remote:
        out = remote.call("cancel.sh", project, mode, value)
    raise_for_error(out)
    results = [
        CancelResult(
            job_id=r.kv.get("job", ""),
            request_id=r.kv.get("rid") or None,
            task=r.kv.get("task") or None,
            result=r.kv.get("result", "failed"),
        )
        for r in out.all("cancel")
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
    with remote_for(target) as remote:
        out = remote.call("reconcile.sh", project)
    raise_for_error(out)
    items = [
        ReconcileItem(
            request_id=r.kv.get("rid", ""),
            plan_hash=r.kv.get("plan", ""),
            result=r.kv.get("result", "abandoned"),
            job_id=r.kv.get("job"),
        )
        for r in out.all("reconcile")
    ]
    head = out.first("reconciled")
    return ReconcileReport(
        target=target, project=project, open_intents=_int(head.kv.get("open")) or 0 if head else 0, items=items
    )


# events ----------------------------------------------------------------------------
class Event(Model):
    kind: Literal["journal", "state"]
    request_id: str
    task: str | None = None
    job_id: str | None = None
    journal: JournalEvent | None = None
    old_state: str | None = None
    new_state: str | None = None


class Events(Model):
    schema_version: int = 1
    target: str
    project: str
    cursor: str
    events: list[Event]


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


def _load_snapshot(project: str, target: str, cursor: str) -> tuple[int, dict[str, str]]:
    lines_s, _, sid = cursor.partition(".")
    if not lines_s.isdigit() or not sid.isalnum():
        raise UsageError(f"cursor {cursor!r} is not one rsk gave", "start without --after to get a cursor")
    d = _snapshots(project, target)
    try:
        data = json.loads((d / f"{sid}.json").read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"cursor {cursor!r} is unknown or expired", "start again without --after") from exc
    return int(lines_s), dict(data["states"])


def _key(j: JobState) -> str:
    return f"{j.request_id}/{j.task or ''}/{j.job_id}"


def events(target: str, project: str, after: str | None = None, wait: float = 0, poll: float = 2.0) -> Events:
    """What changed since the cursor: new journal events and job state transitions; waits up to `wait` s."""
    lines, old = _load_snapshot(project, target, after) if after else (0, {})
    deadline = time.monotonic() + wait
    with remote_for(target) as remote:
        while True:
            st, out = status_call(remote, target, project, after=lines)
            cur = out.first("cursor")
            new_lines = _int(cur.kv.get("lines")) if cur else lines
            new_lines = lines if new_lines is None else new_lines
            evs: list[Event] = []
            for r in out.all("journal"):
                je = parse_journal_line(int(r.kv.get("n", "0")), r.words[1:])
                evs.append(Event(kind="journal", request_id=je.request_id, job_id=je.job_id, journal=je,
                                 task=r.kv.get("task") or None))  # fmt: skip
            states: dict[str, str] = {_key(j): j.state for j in st.jobs}
            if after is not None:
                for j in st.jobs:
                    before = old.get(_key(j))
                    if before != j.state:
                        evs.append(Event(kind="state", request_id=j.request_id, task=j.task, job_id=j.job_id,
                                         old_state=before, new_state=j.state))  # fmt: skip
            if evs or after is None or time.monotonic() >= deadline:
                cursor = _save_snapshot(project, target, new_lines, states)
                return Events(target=target, project=project, cursor=cursor, events=evs)
            time.sleep(min(poll, max(deadline - time.monotonic(), 0.1)))
