"""Files a command names that are on this machine but would not reach its job.

Without `--code`, a job runs in its working directory on the cluster (the account's home unless `--workdir`),
which holds only what is there: `python train.py` planned from a directory that has train.py would be approved,
queued and then fail at once on the cluster. rsk says so when it plans, before a human spends a look on it. It
only looks (stat): nothing is read, and for another OS user's request through the broker it does not look at all
(the broker opens no path a caller names, ADR 0064).
"""

from __future__ import annotations

import stat
from collections.abc import Iterable

from rsk.local import caller

MOST_WORDS = 2_000  # distinct words looked at: a 10,000-task sweep costs at most this many stats
MOST_NAMED = 3  # files named in the warning


def local_files(argvs: Iterable[list[str]]) -> list[str]:
    """The first few words of these commands that name a regular file in the caller's working directory: a
    relative path after the command (the command itself only with a `/`, as `./run.sh`)."""
    if not caller.is_owner():
        return []
    here = caller.cwd()
    seen: set[str] = set()
    found: list[str] = []
    for argv in argvs:
        for i, word in enumerate(argv):
            if word in seen or not _pathlike(word, first=i == 0):
                continue
            seen.add(word)
            if len(seen) > MOST_WORDS:
                return found
            try:
                mode = (here / word).stat().st_mode  # a look, not a read
            except (OSError, ValueError):
                continue
            if stat.S_ISREG(mode):
                found.append(word)
                if len(found) == MOST_NAMED:
                    return found
    return found


def _pathlike(word: str, *, first: bool) -> bool:
    if not word or len(word) > 1024 or word.startswith(("-", "/", "~")) or "=" in word or "\0" in word:
        return False
    return "/" in word or not first


def warning(argvs: Iterable[list[str]], workdir: str) -> str | None:
    """The warning a plan carries when its commands name files here that no `--code` sends, else None."""
    found = local_files(argvs)
    if not found:
        return None
    names = ", ".join(found)
    where = f"in {workdir}" if workdir else "in your home directory"
    return (
        f"{names} {'is a file' if len(found) == 1 else 'are files'} here, but without --code the job runs {where} "
        "on the cluster, which holds only what is there: pass --code . to send this directory (or --workdir "
        "where the cluster has it); if the cluster already has it there, nothing is wrong"
    )
