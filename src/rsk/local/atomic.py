"""Atomic file replacement: temp file in the same directory, fsync, rename, fsync the directory."""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from pathlib import Path


def make_dirs(path: Path) -> None:
    """`path` and its missing parents, each made 0700 (mkdir -p, closed to others): what rsk keeps is its user's."""
    if path.is_dir():
        return
    if path.parent != path:
        make_dirs(path.parent)
    path.mkdir(mode=0o700, exist_ok=True)


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """The temp file is new (O_EXCL) under a name no one can guess, opened without following a link: a file or
    link planted at a predictable name (`rsk init` writes in a tree an agent may write) never takes the data."""
    make_dirs(path.parent)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
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
    make_dirs(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (line.rstrip("\n") + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
