"""The broker's watch over the books: while a project's jobs run, their ends are seen while Slurm still
lists them, so each charge settles on Slurm's word, not at its worst case (docs/ledger.md, "Settlement").

One bounded poll: every `interval` seconds, one status call per project and target that has submitted jobs
not yet settled (at most `most` of them a pass); nothing when nothing runs. It never decides anything: the
status call captures what Slurm reports, as any `rsk status` would. A read that fails is recorded for the human
(rsk.ledger.unread), never swallowed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from rsk.errors import RskError
from rsk.ledger import guard, unread
from rsk.ledger.store import Store
from rsk.local.caller import acting_for
from rsk.local.paths import rsk_home

if TYPE_CHECKING:
    from rsk.local.caller import Caller

INTERVAL_S = 15.0  # under any sensible MinJobAge (Slurm's default is 300 s)
MOST = 32  # project/target pairs polled a pass


def unsettled() -> list[tuple[str, str]]:
    """(project, target) pairs whose ledger holds submitted jobs that have not settled."""
    pairs: list[tuple[str, str]] = []
    projects = rsk_home() / "projects"
    for d in sorted(projects.iterdir()) if projects.is_dir() else ():
        try:
            ledger = Store(d.name).load()
        except (RskError, OSError):
            continue  # not a project, or a ledger a command will report on when it is used
        targets = {c.target for c in ledger.charges if c.state == "submitted"}
        targets |= {u.target for a in ledger.approvals for u in a.uses if u.state == "submitted"}
        pairs += [(d.name, t) for t in sorted(targets) if guard.held_jobs(ledger, t)]
    return pairs


def watch_once(status: Callable[[str, str], object] | None = None, fresh_s: float = INTERVAL_S) -> int:
    """One pass: a status call for each pair with unsettled jobs, but one a command of this process read in the last
    `fresh_s` seconds (its books were kept by that read). Returns how many were polled."""
    from rsk.ops.status import read_within

    if status is None:
        from rsk.ops.status import status as status_of

        status = status_of
    polled = 0
    for project, target in unsettled()[:MOST]:
        error: str | None = None
        try:
            if not read_within(project, target, fresh_s):  # a command of this broker just read it (rsk wait polls)
                status(target, project)
        except (RskError, OSError) as exc:  # the cluster may be away: the next pass tries again, the human is told
            error = str(exc) or type(exc).__name__
        with contextlib.suppress(RskError, OSError):
            unread.record(Store(project), target, error)
        polled += 1
    return polled


def watch(stopping: threading.Event, who: Caller, interval: float = INTERVAL_S) -> None:
    """Poll until `stopping` is set (the broker's thread), acting for `who`: the broker's own user, with its
    warm connections."""
    with acting_for(who):
        while not stopping.wait(interval):
            with contextlib.suppress(Exception):  # a pass that fails must not end the watch
                watch_once()


def start(stopping: threading.Event, who: Caller) -> threading.Thread:
    thread = threading.Thread(target=watch, args=(stopping, who), name="rsk-books", daemon=True)
    thread.start()
    return thread
