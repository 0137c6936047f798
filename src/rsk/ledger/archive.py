"""The ledger's cold part: entries that can never decide again, moved out of the hot file whole.

A launch reads and writes the hot file (`ledger.json`) under the lock, so its size is the cost of every
decision. What can no longer allow, reserve or settle anything is moved, whole, to `archive.jsonl`
beside it, one JSON line per entry, appended and synced before the hot file is rewritten without it:

- a charge that is settled or released (its grant keeps what it spent in `archived_*`, so budgets hold);
- an approval with no use held or still running, used up (its last use) or expired a day ago;
- a grant revoked or expired for a day, once none of its charges is still reserved or running;
- a card approved or withdrawn by rsk a day ago, or withdrawn by its agent (at once: nothing waits on it; ADR 0067;
  a denied card stays: it denies its plan again).

Nothing is lost: the archive is the audit of those entries, and rsk still reads it for what it must
remember (a request's submitted jobs, so a wiped remote root never means a second submit; a card by id;
`--all` listings). A crash between the append and the rewrite leaves an entry in both files; readers
take the last line of an id, and the hot file, the one truth for budgets, folds a charge only once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rsk.errors import NewerLedger
from rsk.ledger.models import (
    LEDGER_SCHEMA,
    Approval,
    Card,
    Charge,
    Grant,
    Ledger,
    migrate,
    now,
    released_stand_ins,
)
from rsk.local.atomic import make_dirs
from rsk.wire import safejson

ARCHIVE_SCHEMA = 2  # 2: a record says the ledger schema of its entry (1: entries of ledger schema 4 to 7)
GRACE = timedelta(days=1)  # an expired grant or approval, or a decided card, stays hot this long: it explains itself

Kind = Literal["charge", "approval", "grant", "card"]


class Record(BaseModel):
    """One line of archive.jsonl: an entry of the ledger as it was when it went cold."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = ARCHIVE_SCHEMA
    kind: Kind
    archived: datetime = Field(default_factory=now)
    ledger_schema: int = 4  # the shape of `entry` (compact writes the current one; archive schema 1: 4 to 7)
    entry: dict[str, object]

    def current(self) -> dict[str, object]:
        """The entry in the current ledger schema: migrated as the hot ledger is (rsk.ledger.models.migrate)."""
        version = self.ledger_schema
        if version == LEDGER_SCHEMA:
            return self.entry
        key = f"{self.kind}s"
        moved = migrate({"schema_version": version, "project": "", key: [self.entry]}).get(key)
        return moved[0] if isinstance(moved, list) and moved and isinstance(moved[0], dict) else self.entry


def _old(t: datetime | None, at: datetime) -> bool:
    return t is not None and t + GRACE <= at


def _charge_cold(ch: Charge, at: datetime) -> bool:
    # a charge whose stand-ins a human released stays hot: a job found later for its request is still charged; so
    # does a charge given back, for GRACE after its hold was made: a job the cluster shows for its request (an
    # error after `go` that said nothing was submitted) is charged to it
    if ch.state == "released":
        return _old(ch.created, at)
    return ch.state == "settled" and not released_stand_ins(ch.job_costs)


def _approval_cold(a: Approval, at: datetime) -> bool:
    running = any(
        u.state == "held" or (u.state == "submitted" and any(c.gpu_hours_used is None for c in u.jobs.values()))
        for u in a.uses
    )
    last_use = max((u.submitted_at or u.at for u in a.uses), default=a.decided_at)
    if any(released_stand_ins(u.jobs) for u in a.uses):
        return False  # a job found later for a use whose stand-ins a human released still joins it
    return not running and ((a.uses_left <= 0 and _old(last_use, at)) or _old(a.expires, at))


def _grant_cold(g: Grant, open_grants: set[str], at: datetime) -> bool:
    return g.id not in open_grants and (_old(g.revoked, at) or _old(g.expires, at))


def _card_cold(c: Card, at: datetime) -> bool:
    if c.status == "withdrawn" and not c.superseded_by:  # its agent took it back: no wait goes on (ADR 0067)
        return True
    return c.status in ("approved", "withdrawn") and _old(c.decided_at, at)


def compact(ledger: Ledger, at: datetime) -> list[Record]:
    """Move the cold entries out of `ledger` (in place) and return them as archive records. A settled
    charge's use is added to its grant's `archived_*` totals first, so the grant's budget is unchanged."""
    records: list[Record] = []
    cold = [ch for ch in ledger.charges if _charge_cold(ch, at)]
    if cold:
        by_id = {g.id: g for g in ledger.grants}
        for ch in cold:
            g = by_id.get(ch.grant_id)
            if g is not None and ch.state == "settled":
                g.archived_jobs += sum(not c.never_ran for c in ch.job_costs.values())
                g.archived_gpu_hours += sum(c.gpu_hours_used or 0.0 for c in ch.job_costs.values())
                g.archived_cpu_hours += sum(c.cpu_hours_used or 0.0 for c in ch.job_costs.values())
                g.archived_jobs_at_worst += sum(c.at_worst for c in ch.job_costs.values())
            records.append(
                Record(kind="charge", archived=at, ledger_schema=LEDGER_SCHEMA, entry=ch.model_dump(mode="json"))
            )
        ledger.charges = [ch for ch in ledger.charges if not _charge_cold(ch, at)]
    records += [Record(kind="approval", archived=at, ledger_schema=LEDGER_SCHEMA, entry=a.model_dump(mode="json"))
                for a in ledger.approvals if _approval_cold(a, at)]  # fmt: skip
    ledger.approvals = [a for a in ledger.approvals if not _approval_cold(a, at)]
    open_grants = {ch.grant_id for ch in ledger.charges}
    records += [Record(kind="grant", archived=at, ledger_schema=LEDGER_SCHEMA, entry=g.model_dump(mode="json"))
                for g in ledger.grants if _grant_cold(g, open_grants, at)]  # fmt: skip
    ledger.grants = [g for g in ledger.grants if not _grant_cold(g, open_grants, at)]
    records += [Record(kind="card", archived=at, ledger_schema=LEDGER_SCHEMA, entry=c.model_dump(mode="json"))
                for c in ledger.cards if _card_cold(c, at)]  # fmt: skip
    ledger.cards = [c for c in ledger.cards if not _card_cold(c, at)]
    return records


class Archive:
    """archive.jsonl of one project: appended (synced) by the store, read by what must remember."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, records: list[Record]) -> None:
        if not records:
            return
        make_dirs(self.path.parent)
        data = "".join(r.model_dump_json() + "\n" for r in records).encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def records(self, kind: Kind, containing: str = "") -> Iterator[Record]:
        """The records of a kind, oldest first; with `containing`, only lines holding that text (a cheap
        scan: the JSON of a line is parsed only when it matches). Damaged lines are skipped; a line a newer rsk
        wrote is refused (NewerLedger): what it records could decide, so it is never read past."""
        return self._scan(self._data(), (kind,), containing)

    def _data(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""

    def _scan(self, data: bytes, kinds: tuple[Kind, ...], containing: str) -> Iterator[Record]:
        needle = containing.encode()
        tags = [f'"kind":"{kind}"'.encode() for kind in kinds]
        start = 0
        while True:
            hit = data.find(needle, start) if needle else start
            if hit < 0 or hit >= len(data):
                return
            line_start = data.rfind(b"\n", 0, hit) + 1
            line_end = data.find(b"\n", hit)
            line_end = len(data) if line_end < 0 else line_end
            line = data[line_start:line_end]
            start = line_end + 1
            if any(tag in line for tag in tags):
                try:
                    record = Record.model_validate_json(line)
                except ValidationError:
                    self._newer(_version(line), ARCHIVE_SCHEMA)  # a record of a newer shape, else damaged
                    continue
                self._newer(record.schema_version, ARCHIVE_SCHEMA)
                self._newer(record.ledger_schema, LEDGER_SCHEMA)
                yield record

    def _newer(self, version: int, understood: int) -> None:
        if version > understood:
            raise NewerLedger.of(str(self.path), version, understood)

    def uses(self, containing: str) -> tuple[list[Charge], list[Approval]]:
        """The charges and approvals whose lines hold `containing`, from one read of the file."""
        records = list(self._scan(self._data(), ("charge", "approval"), containing))
        return (
            list(_latest(Charge, (r for r in records if r.kind == "charge")).values()),
            list(_latest(Approval, (r for r in records if r.kind == "approval")).values()),
        )

    def approvals(self, containing: str = "") -> list[Approval]:
        return list(_latest(Approval, self.records("approval", containing)).values())

    def charges(self, containing: str = "") -> list[Charge]:
        return list(_latest(Charge, self.records("charge", containing)).values())

    def grants(self) -> list[Grant]:
        return list(_latest(Grant, self.records("grant")).values())

    def cards(self, containing: str = "") -> list[Card]:
        return list(_latest(Card, self.records("card", containing)).values())


M = TypeVar("M", Approval, Charge, Grant, Card)


def _version(line: bytes) -> int:
    """The schema_version a line that is not a record of this rsk claims (0: none, or not JSON)."""
    try:
        doc = safejson.loads(line.decode("utf-8"))
    except (safejson.BadJson, UnicodeDecodeError):
        return 0
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    return version if isinstance(version, int) and not isinstance(version, bool) else 0


def _latest(model: type[M], records: Iterator[Record]) -> dict[str, M]:
    """Entries by id, the last line of an id winning (a crash may have archived one twice)."""
    out: dict[str, M] = {}
    for r in records:
        try:
            entry = model.model_validate(r.current())
        except ValidationError:
            continue
        out[entry.id] = entry
    return out
