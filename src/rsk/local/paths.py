"""Where rsk keeps its state, the tokens that name things, and new request ids."""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

from rsk.errors import UsageError

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


_ATTEMPT = re.compile(r"(?P<base>.+)\.a(?P<n>[0-9]{1,4})")


def attempt_of(request_id: str) -> tuple[str, int]:
    """The batch a request id is an attempt of (`rsk retry` and `rsk extend` name attempts B.a2, B.a3, ...), and
    its number."""
    m = _ATTEMPT.fullmatch(request_id)
    return (m["base"], int(m["n"])) if m else (request_id, 1)


def check_token(what: str, value: str) -> str:
    if not TOKEN.fullmatch(value):
        raise UsageError(
            f"{what} {value!r} is not valid",
            f"use 1-64 characters of A-Z a-z 0-9 . _ - (not starting with . or -) for the {what}",
        )
    return value


def new_request_id() -> str:
    return f"r{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
