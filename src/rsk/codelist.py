"""Which files of a directory `--code` sends (standard library only: a brokered command's client lists and
sends them, rsk.request.code snapshots them, and the broker takes only names of the same rule).

The files git would track, when the directory is in a git work tree (its .gitignore is respected), else
every file; minus rsk's default excludes and the caller's globs, matched against the whole relative path
and against each of its parts.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess

MAX_BYTES = 256 * 1024 * 1024  # the most a snapshot may hold
MAX_FILES = 100_000  # the most files a snapshot may hold
RESULTS_DIR = "rsk-results"  # where fetched files land by default (rsk.ops.fetch): never part of a snapshot
DEFAULT_EXCLUDES = (".git", ".rsk.toml", "__pycache__", "*.pyc", ".venv", "venv", "node_modules", ".mypy_cache",
                    ".pytest_cache", ".ruff_cache", "*.rsk-part", RESULTS_DIR)  # fmt: skip


def listed(root: str, git: bool = True) -> list[str]:
    """Relative paths under root: git's view (tracked and untracked, ignored left out) when in a work tree;
    without `git`, every file but those under `.git` (for files another user sent: git would read their
    `.git/config`, whose hooks and fsmonitor run commands, as the broker's user)."""
    if not git:
        return _walked(root)
    try:
        # core.fsmonitor names a command in the tree's own .git/config that ls-files would run as this user
        argv = ["git", "-c", "core.fsmonitor=false", "-C", root, "ls-files", "-z", "--cached", "--others",
                "--exclude-standard"]  # fmt: skip
        out = subprocess.run(argv, capture_output=True, check=True, timeout=60).stdout
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return _walked(root)


def _walked(root: str) -> list[str]:
    found = []
    for base, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        found += [os.path.relpath(os.path.join(base, n), root) for n in names]
    return found


def excluded(path: str, patterns: tuple[str, ...]) -> bool:
    parts = path.split("/")
    return any(fnmatch.fnmatch(path, p) or any(fnmatch.fnmatch(c, p) for c in parts) for p in patterns)


def selected(root: str, excludes: list[str] | tuple[str, ...] = (), git: bool = True) -> list[str]:
    """The relative paths `--code root` takes, sorted; symlinks and vanished files included (the caller
    decides what to do with them)."""
    patterns = DEFAULT_EXCLUDES + tuple(excludes)
    return [rel for rel in sorted(set(listed(root, git))) if not excluded(rel, patterns)]


_NAME = re.compile(r"[A-Za-z0-9._+@:,-]+(/[A-Za-z0-9._+@:,-]+)*")


def travels(rel: str) -> bool:
    """Whether a snapshot may hold a file of this relative name: names of A-Z a-z 0-9 . _ + @ : , - and /, no empty,
    `.` or `..` part, not starting with `-`, at most 4096 bytes. One rule for the snapshot, the client that sends
    its files and the broker that takes them."""
    return (len(rel) <= 4096 and bool(_NAME.fullmatch(rel)) and not rel.startswith("-")
            and all(c not in (".", "..") and len(c) <= 255 for c in rel.split("/")))  # fmt: skip
