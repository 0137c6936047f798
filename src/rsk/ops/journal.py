"""The attempt journal on the cluster, read with its seals checked against the anchors kept here (one remote call)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rsk.cluster.remote import remote_for
from rsk.errors import StateError
from rsk.local.atomic import write_atomic
from rsk.local.project import project_dir
from rsk.wire import answers, chain, safejson
from rsk.wire.answers import JournalEvent
from rsk.wire.protocol import raise_for_error


class Journal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    target: str
    project: str
    cursor: int  # the last line read: the next call's AFTER (with `more`, the last event listed)
    events: list[JournalEvent]
    more: bool = False  # a `limit` left events after the cursor: call again with it
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


def journal(target_name: str, project: str, after: int = 0, limit: int = 0) -> Journal:
    """The journal after a cursor, its seals checked, and checked against the last seal rsk saw; with `limit`, its
    first `limit` events after the cursor, the cursor at the last of them (a sweep's journal is megabytes)."""
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
    cursor = answer.cursor if answer.cursor is not None else after
    more = 0 < limit < len(events)
    if more:
        events = events[:limit]
        cursor = events[-1].n
    return Journal(
        target=target_name,
        project=project,
        cursor=cursor,
        events=events,
        more=more,
        chain_ok=not problems,
        chain_problems=problems,
    )
