"""Atomic file replacement: temp file in the same directory, fsync, rename, fsync the directory."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def keep_as(path: Path, backup: Path) -> bool:
    """Give the file at `path` a second name, `backup` (replacing it), without copying its bytes: they are on
    disk already. The rename is made durable by the next write_atomic in the same directory (its fsync of the
    directory), which is how the ledger uses it. False: the filesystem makes no links (copy instead)."""
    tmp = backup.with_name(f".{backup.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        os.link(path, tmp)
    except OSError:
        return False
    try:
        tmp.replace(backup)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return True


def append_line(path: Path, line: str) -> None:
    """Append one line (O_APPEND, fsync): for append-only logs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (line.rstrip("\n") + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
