"""The project file: `.rsk.toml` at the root of a working tree, found by walking up like git.

Every command run below it uses its project and target; RSK_PROJECT / RSK_TARGET and flags override.
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from rsk.errors import StateError, UsageError
from rsk.local.atomic import write_atomic
from rsk.local.paths import check_token, rsk_home

if TYPE_CHECKING:
    from rsk.local.caller import ProjectFound

NAME = ".rsk.toml"  # rsk.broker_client.PROJECT_FILE reads the same name
SCHEMA = 1


class ProjectFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA
    project: str
    target: str | None = None


def _find(start: str, uid: int | None = None) -> tuple[Path, ProjectFile] | None:
    here = Path(start)
    for directory in (here, *here.parents):
        path = directory / NAME
        if uid is not None:  # another user's command, in the broker: only a file of that user's own
            text = _own_text(path, uid)
            if text is not None:
                return path, read(path, text)
        elif path.is_file():
            return path, read(path)
    return None


def _own_text(path: Path, uid: int) -> str | None:
    """The file's text if it is a regular file that `uid` owns, opened without following a link; else None,
    as if there were none (the broker reads as the human: a file only the human may read tells nothing)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != uid:
            return None
        data = f.read(1 << 16)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise StateError(f"the project file {path} is not UTF-8", "write it anew with `rsk init --force`") from None


def find(start: Path | None = None) -> tuple[Path, ProjectFile] | None:
    """The nearest project file at or above `start` (the caller's working directory), with its contents, read
    anew each time (a few stat calls: the broker lives long and serves trees that change).

    In the broker, the caller's client found it from its own working directory and sent its text
    (rsk.broker_client.project_file): the broker never walks a caller's directory for it, so what the broker
    can see there (another mount namespace, a directory only the caller may read, a race) never changes the
    project. A caller the broker built itself (its own background work) has no such word: its directory is read."""
    from rsk.local import caller

    c = caller.current()
    if start is None and c is not None and c.project is not None:
        return _sent(c.project)
    rights = caller.rights()
    return _find(str((start or caller.cwd()).resolve()), None if rights is None or rights.owner else rights.uid)


def _sent(found: ProjectFound) -> tuple[Path, ProjectFile] | None:
    """The project file the caller's client found and read, checked as a file read here is."""
    if found.path is None:
        return None
    path = Path(found.path)
    if found.text is None:
        raise StateError(
            f"the project file {path} cannot be read: {found.error or 'no text came with the request'}",
            "make it readable (or fix it with `rsk init --force`), or name the project with --project",
        )
    return path, read(path, found.text)


def read(path: Path, text: str | None = None) -> ProjectFile:
    """The project file's contents; any fault of the file (unreadable, not TOML, nested past what the parser can
    follow, invalid) is a StateError (exit 6), never a traceback: in the broker the file is another user's."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8") if text is None else text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise StateError(
            f"the project file {path} cannot be read: {exc}", "fix it, or write it anew with `rsk init --force`"
        ) from exc
    except RecursionError:  # tomllib recurses into nested arrays and tables: a deep enough nesting ends here
        raise StateError(
            f"the project file {path} cannot be read: its values nest too deep",
            "a project file holds schema_version, project and target; write it anew with `rsk init --force`",
        ) from None
    version = raw.get("schema_version", SCHEMA)
    if not isinstance(version, int) or version > SCHEMA:
        raise StateError(f"the project file {path} has schema_version {version!r}", "upgrade rsk to read it")
    try:
        pf = ProjectFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise StateError(
            f"the project file {path} is invalid at {'.'.join(map(str, first['loc']))}: {first['msg']}",
            "fix it, or write it anew with `rsk init --force`",
        ) from exc
    check_token("project", pf.project)
    if pf.target:
        check_token("target", pf.target)
    return pf


def write(directory: Path, project: str, target: str | None, force: bool = False) -> Path:
    path = directory / NAME
    if path.exists() and not force:
        raise UsageError(f"{path} exists already", "pass --force to replace it")
    check_token("project", project)
    lines = [
        "# rsk project file: every rsk command run below this directory uses this project and target",
        "# (RSK_PROJECT, RSK_TARGET and --project/--target override it).",
        f"schema_version = {SCHEMA}",
        f'project = "{project}"',
    ]
    if target:
        lines.append(f'target = "{check_token("target", target)}"')
    write_atomic(path, ("\n".join(lines) + "\n").encode())
    return path


def default_project(directory: Path) -> str:
    """A project name from a directory's name: its token characters, else 'work'."""
    name = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in directory.name).strip(".-")
    return name[:64] or "work"


def env_or_file(variable: str, field: str) -> str | None:
    """RSK_PROJECT/RSK_TARGET, else the project file's value."""
    from rsk.local import caller

    if value := caller.getenv(variable):
        return value
    found = find()
    return getattr(found[1], field) if found else None


DEFAULT_PROJECT = "default"


def resolve_project(option: str | None) -> str:
    """--project, else RSK_PROJECT, else the working tree's project file (rsk init), else 'default'; in the
    broker, only a project the caller may use (rsk.local.caller.check_project)."""
    from rsk.local.caller import check_project

    if option:
        return check_project(check_token("project", option))
    return check_project(check_token("project", env_or_file("RSK_PROJECT", "project") or DEFAULT_PROJECT))


def chosen_project(option: str | None) -> str:
    """The project of work that asks for resources (plan, launch, lease open, retry, extend): as resolve_project,
    but never the shared `default` for want of a choice (ADR 0049). `default` is used when it is named:
    --project default, RSK_PROJECT=default, or a project file that says so."""
    project = resolve_project(option)
    if option or env_or_file("RSK_PROJECT", "project"):
        return project
    raise UsageError(NO_PROJECT, NO_PROJECT_HINT, code="no-project")


NO_PROJECT = (
    "no project chosen: no --project, no RSK_PROJECT, and no project file (.rsk.toml) here or above; work is "
    f"never sent to the shared project '{DEFAULT_PROJECT}' unless it is named; nothing was done"
)
NO_PROJECT_HINT = (
    "run `rsk init --project NAME` in your working tree (every command below it then uses NAME), or pass "
    f"--project NAME; `--project {DEFAULT_PROJECT}` chooses the shared one"
)


def scope(project: str, target: str | None = None) -> str:
    """The options a hint needs to reach the same project and target: empty when the defaults do."""
    parts = []
    if project != (env_or_file("RSK_PROJECT", "project") or DEFAULT_PROJECT):
        parts.append(f"--project {project}")
    if target is not None and target != env_or_file("RSK_TARGET", "target"):
        parts.append(f"--target {target}")
    return (" " + " ".join(parts)) if parts else ""


def project_dir(project: str) -> Path:
    """A project's state (ledger, audit, anchors): only for a caller that may use the project."""
    from rsk.local.caller import check_project

    return rsk_home() / "projects" / check_project(check_token("project", project))
