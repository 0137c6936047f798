"""The requests of launches with tasks, kept for `rsk retry` (RSK_HOME/projects/P/requests/RID.json).

A retry plans the same tasks again without the agent resending them; what it plans is decided by the ledger
like any launch, so a kept request grants nothing. Each request is its own file, written atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from rsk.errors import StateError, UsageError
from rsk.local.atomic import write_atomic
from rsk.local.paths import check_token
from rsk.local.project import project_dir
from rsk.wire.protocol import Request


def _kept(project: str, request_id: str) -> Path:
    return project_dir(project) / "requests" / f"{check_token('request-id', request_id)}.json"


def keep(request: Request) -> None:
    """Keep a launch's request with tasks, for `rsk retry` (its own file: a launch never reads another's)."""
    if request.tasks and request.request_id:
        write_atomic(_kept(request.project, request.request_id), request.model_dump_json().encode())


def kept(project: str, request_id: str) -> Request:
    path = _kept(project, request_id)
    try:
        return Request.model_validate(json.loads(path.read_text()))
    except FileNotFoundError:
        raise UsageError(
            f"no kept request for batch {request_id} in project {project}",
            "rsk retry plans again the tasks of a batch launched from this RSK_HOME; launch the tasks again instead",
        ) from None
    except (ValueError, ValidationError) as exc:
        raise StateError(f"the kept request {path} is not valid: {exc}"[:400]) from None
