"""Where rsk keeps its state, and which project and request are meant."""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

from rsk.errors import UsageError

DEFAULT_PROJECT = "default"
TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")  # used with fullmatch: a whole string, never a prefix


def rsk_home() -> Path:
    """RSK_HOME, else $XDG_STATE_HOME/rsk, else ~/.local/state/rsk."""
    if home := os.environ.get("RSK_HOME"):
        return Path(home)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "rsk"


def config_dir() -> Path:
    """The user's rsk configuration: $XDG_CONFIG_HOME/rsk (targets/ lives there)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rsk"


def check_token(what: str, value: str) -> str:
    if not TOKEN.fullmatch(value):
        raise UsageError(
            f"{what} {value!r} is not valid",
            f"use 1-64 characters of A-Z a-z 0-9 . _ - (not starting with . or -) for the {what}",
        )
    return value


def resolve_project(option: str | None) -> str:
    """--project, else RSK_PROJECT, else the working tree's project file (rsk init), else 'default'; in the
    broker, only a project the caller may use (rsk.caller.check_project)."""
    from rsk.caller import check_project

    if option:
        return check_project(check_token("project", option))
    from rsk.projectfile import env_or_file

    return check_project(check_token("project", env_or_file("RSK_PROJECT", "project") or DEFAULT_PROJECT))


def scope(project: str, target: str | None = None) -> str:
    """The options a hint needs to reach the same project and target: empty when the defaults do."""
    from rsk.projectfile import env_or_file

    parts = []
    if project != (env_or_file("RSK_PROJECT", "project") or DEFAULT_PROJECT):
        parts.append(f"--project {project}")
    if target is not None and target != env_or_file("RSK_TARGET", "target"):
        parts.append(f"--target {target}")
    return (" " + " ".join(parts)) if parts else ""


def project_dir(project: str) -> Path:
    """A project's state (ledger, audit, anchors): only for a caller that may use the project."""
    from rsk.caller import check_project

    return rsk_home() / "projects" / check_project(check_token("project", project))


def new_request_id() -> str:
    return f"r{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
