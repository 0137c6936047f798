"""Which files of a directory `--code` sends (standard library only: the broker's client lists and packs
them for an agent that runs as another user, and rsk.request.code snapshots them).

The files git would track, when the directory is in a git work tree (its .gitignore is respected), else
every file; minus rsk's default excludes and the caller's globs, matched against the whole relative path
and against each of its parts.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess

MAX_BYTES = 256 * 1024 * 1024  # the most a snapshot may hold
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


def pack(root: str, excludes: list[str]) -> tuple[object, int]:
    """The files `--code root` takes, as an uncompressed tar in a temporary file: (the file, its size). For
    the broker's client of another user, which reads its own files and sends them. ValueError says why not."""
    import tarfile
    import tempfile

    out = tempfile.TemporaryFile()  # noqa: SIM115 (returned: the caller streams and closes it)
    total = 0
    with tarfile.open(fileobj=out, mode="w") as tar:
        for rel in selected(root, excludes):
            full = os.path.join(root, rel)
            if os.path.islink(full):
                raise ValueError(f"{rel} is a symlink (rsk copies regular files only: exclude it with --exclude)")
            if not os.path.isfile(full):
                continue
            total += os.path.getsize(full)
            if total > MAX_BYTES:
                raise ValueError(f"it holds more than the {MAX_BYTES >> 20} MiB cap (exclude data with --exclude)")
            tar.add(full, arcname=rel, recursive=False)
    size = out.tell()
    out.seek(0)
    return out, size
