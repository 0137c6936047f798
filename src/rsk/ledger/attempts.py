"""Which launches are still under way. A hold (a reserved charge, a held approval use) names the attempts
that hold it; a later decision for the same request id gives back only a hold none of whose attempts is
still alive, so a second launch can never free what a first one is about to submit (docs/ledger.md).

An attempt is `HOST:PID:START:NONCE`: the process that runs it (its start time tells a reused pid apart)
and a nonce for each launch within it (the broker and `rsk mcp` run many in one process). An attempt of
another host cannot be checked from here: it counts as alive until its hold settles or is given back by
the human.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from functools import cache
from pathlib import Path

_live: set[str] = set()  # this process's attempts that are still running
_guard = threading.Lock()
_current: ContextVar[str | None] = ContextVar("rsk_attempt", default=None)


def _started(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat, field 22); None: no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat.rsplit(b")", 1)[-1].split()  # the name in parentheses may hold spaces
    return fields[19].decode() if len(fields) > 19 else None


@cache
def _host() -> str:
    return socket.gethostname().replace(":", "_")


def _process() -> str:
    return f"{_host()}:{os.getpid()}:{_started(os.getpid())}"


@contextlib.contextmanager
def attempt() -> Iterator[str]:
    """One launch: its token is alive, and current in this context, until the block ends."""
    token = f"{_process()}:{secrets.token_hex(4)}"
    with _guard:
        _live.add(token)
    reset = _current.set(token)
    try:
        yield token
    finally:
        _current.reset(reset)
        with _guard:
            _live.discard(token)


def current() -> str | None:
    return _current.get()


def alive(token: str) -> bool:
    """Whether the attempt may still submit: its process runs (and, for this process, the launch does)."""
    parts = token.split(":")
    if len(parts) != 4 or not parts[1].isdigit():
        return False
    host, pid, started, _ = parts
    if host != _host():
        return True
    if int(pid) == os.getpid() and started == _started(os.getpid()):
        with _guard:
            return token in _live
    return _started(int(pid)) == started


def all_gone(holders: list[str]) -> bool:
    """A hold none of whose attempts can still submit (one with no holders recorded is an older rsk's)."""
    return not any(alive(t) for t in holders)
