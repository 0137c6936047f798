"""Polling several targets for rsk watch: one remote call per target per refresh, backoff when slow."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rsk.cluster.remote import Remote
from rsk.errors import RskError
from rsk.ops.status import Status, chains_of, count, status_call

MAX_BACKOFF = 300.0


@dataclass
class TargetState:
    name: str
    remote: Remote | None = None
    last: Status | None = None
    failures: int = 0
    error: str = ""
    last_ok: float = 0.0


@dataclass
class Snapshot:
    statuses: list[Status]
    stale: dict[str, str]
    delay: float


@dataclass
class Watcher:
    targets: list[str]
    project: str
    interval: float = 10.0
    batch: str | None = None
    states: dict[str, TargetState] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.states = {t: TargetState(t) for t in self.targets}

    def _poll_one(self, ts: TargetState) -> None:
        from rsk.cluster.targets import find_target
        from rsk.cluster.transport import connect

        try:
            if ts.remote is None:
                ts.remote = Remote(connect(find_target(ts.name)))
            st, _ = status_call(ts.remote, ts.name, self.project)
            if self.batch:
                st.jobs = [j for j in st.jobs if j.request_id == self.batch]
                st.chains = chains_of(ts.name, st.jobs)
                st.counts = count(st.jobs)
            ts.last, ts.failures, ts.error, ts.last_ok = st, 0, "", time.time()
        except RskError as exc:
            ts.failures += 1
            ts.error = exc.message
            if ts.remote is not None:
                ts.remote.conn.close()
                ts.remote = None

    def poll(self) -> Snapshot:
        for ts in self.states.values():
            self._poll_one(ts)
        statuses = [ts.last for ts in self.states.values() if ts.last is not None]
        stale = {}
        for ts in self.states.values():
            if ts.failures:
                since = time.strftime("%H:%M:%S", time.localtime(ts.last_ok)) if ts.last_ok else "never"
                stale[ts.name] = f"{ts.error} (last good view: {since})"
        worst = max((ts.failures for ts in self.states.values()), default=0)
        delay = min(self.interval * (2**worst), MAX_BACKOFF) if worst else self.interval
        return Snapshot(statuses, stale, delay)

    def close(self) -> None:
        for ts in self.states.values():
            if ts.remote is not None:
                ts.remote.conn.close()
