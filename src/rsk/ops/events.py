"""What changed since a cursor: journal events and job state transitions (one remote call a poll)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Literal

from rsk.cluster.remote import remote_for
from rsk.errors import UsageError
from rsk.local.atomic import write_atomic
from rsk.local.paths import check_token
from rsk.local.project import project_dir
from rsk.ops.status import END, JobState, Model, count, latest_attempts, status_call
from rsk.wire import safejson
from rsk.wire.answers import JournalEvent
from rsk.wire.states import FINAL


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
    # jobs per state now, a retried task as its latest attempt (the first call gives this, not the whole journal)
    summary: dict[str, int] = {}  # noqa: RUF012 (a pydantic field)
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
                         code="cursor-expired") from exc  # fmt: skip
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
        if not (reset_expired and exc.code == "cursor-expired"):
            raise
        after, lines, snap, reset = None, 0, {}, True
    first = after is None
    old = snap or {}
    deadline = time.monotonic() + wait
    with remote_for(target) as remote:
        while True:
            st, answer = status_call(remote, target, project, after=END if first else lines)
            new_lines = lines if answer.cursor is None else answer.cursor
            evs: list[Event] = []
            for line in answer.journal:
                je = line.event
                evs.append(Event(kind="journal", request_id=je.request_id, job_id=je.job_id, journal=je, task=je.task))
            states: dict[str, str] = {_key(j): j.state for j in st.jobs}
            summary = count(latest_attempts(st.jobs))  # a task retried counts once, as its latest attempt
            for j in st.jobs:
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
