"""Files a command names that are on this machine but would not reach its job.

Without `--code`, a job runs in its working directory on the cluster (the account's home unless `--workdir`),
which holds only what is there: `python train.py` planned from a directory that has train.py would be approved,
queued and then fail at once on the cluster. rsk says so when it plans, before a human spends a look on it (ADR
0074). It only looks (stat), and always as the caller: in the caller's own process, or, in the broker, by asking
the caller's client (rsk.local.handover, ADR 0065), so that no caller learns through the broker whether a file it
cannot see exists. An MCP session the broker serves has no client to ask: it is told nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from rsk.errors import RskError
from rsk.local import caller

MOST_WORDS = 2_000  # distinct words looked at: a 10,000-task sweep costs at most this many stats
MOST_NAMED = 3  # files named in the warning


def local_files(argvs: Iterable[list[str]]) -> list[str]:
    """The first few words of these commands that name a regular file in the caller's working directory: a
    relative path after the command (the command itself only with a `/`, as `./run.sh`)."""
    words: dict[str, None] = {}  # (in order, once each)
    for argv in argvs:
        for i, word in enumerate(argv):
            if word not in words and _pathlike(word, first=i == 0):
                words[word] = None
                if len(words) == MOST_WORDS:
                    break
        if len(words) == MOST_WORDS:
            break
    if not words:
        return []
    from rsk.local.handover import Handed, Place

    if caller.opens_paths():
        found = Place(caller.cwd()).regular(list(words))
    elif (client := caller.client()) is not None:
        try:
            found = Handed(client, caller.cwd()).regular(list(words))
        except RskError:  # a client that cannot look (an older one): nothing to say
            return []
    else:
        return []
    return found[:MOST_NAMED]


def _pathlike(word: str, *, first: bool) -> bool:
    if not word or len(word) > 1024 or word.startswith(("-", "/", "~")) or "=" in word or "\0" in word:
        return False
    return "/" in word or not first


def warning(argvs: Iterable[list[str]], workdir: str) -> str | None:
    """The warning a plan carries when its commands name files here that no `--code` sends, else None."""
    found = local_files(argvs)
    if not found:
        return None
    from rsk.local.inert import inert

    names = ", ".join(inert(f) for f in found)  # a file's name is the agent's text: no escape reaches a terminal
    where = f"in {workdir}" if workdir else "in your home directory"
    return (
        f"{names} {'is a file' if len(found) == 1 else 'are files'} here, but without --code the job runs {where} "
        "on the cluster, which holds only what is there: pass --code . to send this directory (or --workdir "
        "where the cluster has it); if the cluster already has it there, nothing is wrong"
    )
