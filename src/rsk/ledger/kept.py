"""The requests of launches the cluster accepted, kept (RSK_HOME/projects/P/requests/RID.json): a batch's tasks for
`rsk retry` and `rsk extend`, and for any request what it asked and which files its code snapshot held, so that a
later launch of the same request id for another plan is told what differs (exit 5, `request-conflict`).

A retry plans the same tasks again without the agent resending them; what it plans is decided by the ledger like
any launch, so a kept request grants nothing, and what a conflict says of it only informs. Each request is its own
file, written atomically.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from rsk.errors import StateError, UsageError
from rsk.local.atomic import write_atomic
from rsk.local.paths import check_token
from rsk.local.project import project_dir
from rsk.wire.protocol import Request

if TYPE_CHECKING:
    from rsk.request.code import CodeSnapshot

KEPT_FILES = 5000  # the snapshot's paths a kept request lists (beyond: its files are not compared)
# what the agent chose in a request (not who asks, nor what the connection verified): what a conflict compares
# (in the order a waiting card's `differs` names them, rsk.ledger.models.CardPlan.differs)
_ASKED = ("argv", "workdir", "code", "path", "partition", "account", "qos", "nodes", "cpus", "mem_mb", "gpus",
          "time_min", "env", "script", "tasks", "budget_min", "signal_s", "chain_of", "link0", "attempt_of",
          "lease_open", "drain_min", "overrun", "lease", "name")  # fmt: skip


class Kept(BaseModel):
    """One accepted launch's request, and its code snapshot's paths and their sha256 (all of them, up to KEPT_FILES;
    `files_known` False when there were more, or it ran without --code). Version 2 added `code_sums`; a version-1
    record reads with none (what changed within a file is then not said)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 2
    request: Request
    code_files: list[str] = []
    code_sums: list[str] = []  # the sha256 of each of code_files, in its order
    files_known: bool = False

    def differs(self, other: Request, code: CodeSnapshot | None) -> Differs:
        """What `other` (a launch of the same request id) asks differently: the fields, and under --code the files
        only one of the two snapshots holds and those both hold with other content (when both lists are known)."""
        fields = [k for k in _ASKED if getattr(self.request, k) != getattr(other, k)]
        if "code" not in fields or not self.files_known or code is None or len(code.files) > KEPT_FILES:
            return Differs(fields)
        theirs = {f.path: f.sha256 for f in code.files}
        mine = dict(zip(self.code_files, self.code_sums, strict=True)) if self.code_sums else {}
        changed = sorted(p for p, s in mine.items() if p in theirs and theirs[p] != s)
        return Differs(fields, sorted(set(theirs) - set(self.code_files)), sorted(set(self.code_files) - set(theirs)),
                       changed)  # fmt: skip


@dataclass(frozen=True)
class Differs:
    """What a launch of a request id asks differently from the one that ran: the fields, and the files under --code
    added, gone and changed (each empty when unknown)."""

    fields: list[str]
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)


def _kept(project: str, request_id: str) -> Path:
    return project_dir(project) / "requests" / f"{check_token('request-id', request_id)}.json"


def keep(request: Request, code: CodeSnapshot | None = None) -> None:
    """Keep an accepted launch's request (its own file: a launch never reads another's)."""
    if not request.request_id:
        return
    files = code.files if code is not None and code.digest == request.code else []
    record = Kept(
        request=request,
        code_files=[f.path for f in files[:KEPT_FILES]],
        code_sums=[f.sha256 for f in files[:KEPT_FILES]],
        files_known=0 < len(files) <= KEPT_FILES,
    )
    write_atomic(_kept(request.project, request.request_id), record.model_dump_json().encode())


def _read(path: Path) -> Kept:
    """A kept record; the older form (a launch with tasks before 0.5: the bare request) is read as one."""
    try:
        raw = json.loads(path.read_text())
        return Kept.model_validate(raw) if isinstance(raw, dict) and "request" in raw else Kept(request=raw)
    except (ValueError, ValidationError) as exc:
        raise StateError(f"the kept request {path} is not valid: {exc}"[:400]) from None


def asked(project: str, request_id: str) -> Kept | None:
    """What an earlier accepted launch of this request id asked, when it was launched from here (None: unknown)."""
    try:
        return _read(_kept(project, request_id))
    except (FileNotFoundError, StateError, UsageError):
        return None


def kept(project: str, request_id: str) -> Request:
    """The kept request of a batch (a launch with tasks), for `rsk retry` and `rsk extend`."""
    path = _kept(project, request_id)
    try:
        request = _read(path).request
    except FileNotFoundError:
        request = None
    if request is None or not request.tasks:
        raise UsageError(
            f"no kept request for batch {request_id} in project {project}",
            "rsk retry plans again the tasks of a batch launched from this RSK_HOME; launch the tasks again instead",
        )
    return request
