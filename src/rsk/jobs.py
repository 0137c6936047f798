"""Reading what happened on the cluster: the attempt journal and job logs (one remote call each)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rsk import answers, chain, safejson
from rsk.answers import JobEnd, JournalEvent
from rsk.atomic import write_atomic
from rsk.errors import StateError, UsageError
from rsk.paths import project_dir
from rsk.protocol import raise_for_error
from rsk.remote import Remote, remote_for


class Journal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    target: str
    project: str
    cursor: int
    events: list[JournalEvent]
    chain_ok: bool = True  # every seal matched, and the journal still holds what rsk saw before
    chain_problems: list[str] = []


class Anchor(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    line: int = Field(ge=0)
    seal: str


class Anchors(BaseModel):
    """journal-anchors.json: per target, the last journal line rsk saw and its seal (truncation shows)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    schema_version: int = 1
    targets: dict[str, Anchor] = {}


def _anchors(project: str) -> Path:
    return project_dir(project) / "journal-anchors.json"


def read_anchors(project: str) -> Anchors:
    path = _anchors(project)
    hint = (f"fix or remove {path}; without it rsk cannot tell whether the cluster's journal was cut short "
            "since it last looked (the next rsk journal saves a new one)")  # fmt: skip
    try:
        raw = safejson.loads(path.read_bytes(), max_depth=4, max_bytes=1 << 20)
    except FileNotFoundError:
        return Anchors()
    except (OSError, safejson.BadJson) as exc:
        raise StateError(f"cannot read {path}: {getattr(exc, 'message', exc)}", hint) from None
    if isinstance(raw, dict) and "schema_version" not in raw:
        raw = {"schema_version": 1, "targets": raw}  # as rsk wrote it before the file had a version
    try:
        anchors = Anchors.model_validate(raw)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise StateError(f"{path} is invalid at {'.'.join(map(str, e['loc']))}: {e['msg']}", hint) from None
    if anchors.schema_version != 1:
        raise StateError(f"{path} has schema_version {anchors.schema_version}; this rsk understands 1",
                         "upgrade rsk to read it")  # fmt: skip
    return anchors


def journal(target_name: str, project: str, after: int = 0) -> Journal:
    """The journal after a cursor, its seals checked, and checked against the last seal rsk saw."""
    anchors = read_anchors(project)
    anchor = anchors.targets.get(target_name)
    a_line, a_seal = (anchor.line, anchor.seal) if anchor else (0, "")
    args = [project, str(after)] + ([str(a_line), a_seal] if a_line else [])
    with remote_for(target_name) as remote:
        out = remote.call("journal", *args)
    raise_for_error(out)
    answer = answers.journal(out)
    lines = [(line.n, line.text) for line in answer.lines]
    report = chain.check(answer.base_seal, lines)
    problems = list(report.problems)
    if answer.anchor_ok is False:
        problems.insert(0, f"the journal no longer holds line {a_line} as rsk saw it: it was cut short or rewritten")
    if not problems and report.head_line > a_line:
        anchors.targets[target_name] = Anchor(line=report.head_line, seal=report.head_seal)
        write_atomic(_anchors(project), anchors.model_dump_json().encode())
    events = [line.event for line in answer.lines if line.n > after]
    return Journal(
        target=target_name,
        project=project,
        cursor=answer.cursor if answer.cursor is not None else after,
        events=events,
        chain_ok=not problems,
        chain_problems=problems,
    )


class LogTail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    job_id: str
    request_id: str
    stream: str
    started: bool
    ended: str | None  # the marker as written (kept for readers of schema 1)
    end: JobEnd | None = None
    size: int
    text: str
    start: int = 0  # where `text` begins in the stream (bytes): pass `size` as the next call's `after`
    gap: bool = False  # with `after`: bytes between it and `start` were left out (more than max_bytes)
    followed_s: float | None = None  # with --follow: how long it followed
    timed_out: bool = False  # with --follow: it stopped at its timeout while the job still ran


def logs(
    target_name: str,
    project: str,
    job_id: str,
    stream: str = "stdout",
    max_bytes: int = 1024 * 1024,
    lines: int = 0,
    follow_until_end: float | None = None,
    on_poll: Callable[[LogTail], None] | None = None,
    after: int | None = None,
) -> LogTail:
    """The last `lines` lines (0: all), at most `max_bytes`; with `after`, only what follows that byte of
    the stream. With follow_until_end, poll over one connection until the job's run ends or the time
    passes, calling on_poll with each tail."""
    deadline = None if follow_until_end is None else time.monotonic() + follow_until_end
    with remote_for(target_name) as remote:
        while True:
            out = remote.call("logs", project, job_id, stream, str(max_bytes), str(lines))
            raise_for_error(out)
            log = answers.logs(out)
            data, size = log.data, log.size
            start, gap = max(size - len(data), 0), False
            if after is not None:
                if after >= start:
                    data, start = data[min(after, size) - start :], min(after, size)
                else:
                    gap = True
            tail = LogTail(
                job_id=job_id,
                request_id=log.rid,
                stream=stream,
                started=log.started,
                ended=log.ended,
                end=log.end,
                size=size,
                text=data.decode("utf-8", "replace"),
                start=start,
                gap=gap,
            )
            if on_poll:
                on_poll(tail)
            if deadline is None or tail.ended or time.monotonic() >= deadline:
                if deadline is not None:
                    tail.followed_s = round(follow_until_end or 0, 1)
                    tail.timed_out = not tail.ended
                return tail
            time.sleep(1.0)


# results down ------------------------------------------------------------------------------
FETCH_CHUNK = 4 * 1024 * 1024  # per remote call; a multiple of 65536, as the cluster side requires
_FETCH_PATH = re.compile(r"[A-Za-z0-9._+@:,-]+(/[A-Za-z0-9._+@:,-]+)*")


class FetchedFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    size: int
    to: str
    resumed_from: int = 0


class FetchReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    target: str
    project: str
    job_id: str
    files: list[FetchedFile]
    bytes: int


def _fetch_one(
    remote: Remote, project: str, job: str, path: str, size: int, to: Path, budget: list[int]
) -> FetchedFile:
    dest = to / path
    part = dest.with_name(dest.name + ".rsk-part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    offset = 0
    if part.exists():  # a cut transfer: resume from the whole blocks already here
        offset = part.stat().st_size // 65536 * 65536
    resumed = offset
    with part.open("r+b" if part.exists() else "wb") as fh:
        fh.truncate(offset)
        fh.seek(offset)
        while offset < size:
            if budget[0] <= 0:
                raise UsageError(f"fetch stopped at its byte limit before {path} was whole",
                                 "pass a larger --max-bytes; run the same command again to resume")  # fmt: skip
            out = remote.call("fetch", project, job, path, str(offset), str(FETCH_CHUNK))
            raise_for_error(out)
            block = answers.fetch(out)
            data = block.data
            size = block.size if block.size is not None else size  # a file that still grows
            if not data:
                break
            fh.write(data)
            offset += len(data)
            budget[0] -= len(data)
    part.replace(dest)
    return FetchedFile(path=path, size=offset, to=str(dest), resumed_from=resumed)


def fetch(target_name: str, project: str, job: str, paths: list[str], to: Path,
          max_bytes: int = 1024**3) -> FetchReport:  # fmt: skip
    """Files from a job's run directory (its work copy, where it wrote), whole files or directories."""
    for p in paths:
        if not _FETCH_PATH.fullmatch(p) or ".." in p.split("/"):
            raise UsageError(
                f"cannot fetch {p!r}", "give paths relative to the job's directory: A-Z a-z 0-9 . _ + @ : , - /"
            )
    files: list[FetchedFile] = []
    budget = [max_bytes]
    with remote_for(target_name) as remote:
        for p in paths:
            out = remote.call("fetch", project, job, p, "0", "0")
            raise_for_error(out)
            found = answers.fetch(out)
            if found.size is not None:
                files.append(_fetch_one(remote, project, job, p, found.size, to, budget))
                continue
            for e in found.entries:
                sub = f"{p.rstrip('/')}/{e.path}"
                if _FETCH_PATH.fullmatch(sub) and ".." not in sub.split("/"):
                    files.append(_fetch_one(remote, project, job, sub, e.size, to, budget))
    return FetchReport(target=target_name, project=project, job_id=job, files=files, bytes=sum(f.size for f in files))
