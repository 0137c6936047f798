"""The ledger on disk: one JSON file per project under RSK_HOME, locked, written atomically.

A ledger that fails validation is refused, never overwritten; the last good version is
kept as ledger.json.bak; a ledger from a newer rsk is refused whole (NewerLedger, exit 6) and left as it is,
and an older one is migrated on read and written at the current schema by its next change (docs/adr/0044).

A transaction reads the file once under the lock and writes it at most once. A Store remembers the ledger
as it last read or wrote it (its exact bytes and their reading): a transaction that finds the file's bytes
unchanged since uses that reading instead of validating the file again, so a launch's view before it plans,
its decision, and the record of what the cluster accepted parse the ledger once (ADR 0036).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout
from pydantic import ValidationError

from rsk.errors import NewerLedger, StateError
from rsk.ledger.archive import Archive, compact
from rsk.ledger.models import FILE, LEDGER_SCHEMA, AuditEntry, Ledger, migrate, now
from rsk.local.atomic import append_line, keep_as, write_atomic
from rsk.local.paths import private_dir
from rsk.local.project import project_dir
from rsk.wire import safejson

LOCK_TIMEOUT = 60.0


@dataclass(frozen=True)
class Snapshot:
    """The ledger file's exact bytes and the ledger they read as."""

    raw: bytes
    ledger: Ledger


class Store:
    """One project's ledger, for one command (a Store is not shared between threads)."""

    def __init__(self, project: str) -> None:
        self.project = project
        self.dir = project_dir(project)
        self.path = self.dir / "ledger.json"
        self.backup = self.dir / "ledger.json.bak"
        self.audit_path = self.dir / "audit.jsonl"
        self.archive = Archive(self.dir / "archive.jsonl")
        self.lock = FileLock(str(self.dir / "ledger.lock"), timeout=LOCK_TIMEOUT, mode=0o600)
        self.last: Snapshot | None = None  # the ledger as this Store last read it for a view or a transaction

    def load(self) -> Ledger:
        """Read the ledger (no lock needed for a read-only view: writes are atomic renames)."""
        return read_ledger(self.path, self.project)

    def view(self) -> Ledger:
        """Read the ledger without the lock, to read only (never change what it returns): a transaction of this
        Store that finds the file unchanged since uses this reading."""
        raw = _raw(self.path)
        ledger = parse_ledger(raw, self.path, self.project)
        self.last = Snapshot(raw, ledger) if raw is not None else None
        return ledger

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Ledger]:
        """Lock, read, let the caller change the ledger, write it back if it changed. A write first moves
        what went cold to the archive (rsk.ledger.archive), appended and synced before the hot file is replaced.
        One read of the file under the lock; it is parsed only when it changed since this Store last saw it."""
        private_dir(self.dir)  # RSK_HOME, projects/ and this project's, 0700: another user takes no lock
        try:
            with self.lock:
                raw = _raw(self.path)
                last, self.last = self.last, None  # what the block changes is known again only once it is written
                if raw is not None and last is not None and last.raw == raw:
                    ledger = last.ledger
                else:
                    ledger = parse_ledger(raw, self.path, self.project)
                before = ledger.model_dump_json(context=FILE)
                yield ledger
                after = ledger.model_dump_json(context=FILE)
                if after != before:
                    cold = compact(ledger, now())
                    if cold:
                        self.archive.append(cold)
                        after = ledger.model_dump_json(context=FILE)
                    self._write(after.encode(), raw)
                    self.last = Snapshot(after.encode(), ledger)
                elif raw is not None:
                    self.last = Snapshot(raw, ledger)
        except Timeout as exc:
            raise StateError(
                f"the ledger {self.path} stayed locked for {LOCK_TIMEOUT:g}s",
                "another rsk process is holding it; try again",
            ) from exc

    def _write(self, data: bytes, previous: bytes | None) -> None:
        """The new ledger; the one it replaces (as read under the lock, so the file on disk) becomes the backup:
        a second name for that file, not a copy (one fsync of a file and one of the directory fewer per write;
        the directory's fsync in write_atomic makes both renames durable)."""
        if previous is not None and not keep_as(self.path, self.backup):
            write_atomic(self.backup, previous)
        write_atomic(self.path, data)

    def audit(self, entry: AuditEntry) -> None:
        append_line(self.audit_path, entry.model_dump_json())

    def read_audit(self) -> list[AuditEntry]:
        if not self.audit_path.exists():
            return []
        out: list[AuditEntry] = []
        for line in self.audit_path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValidationError, ValueError):
                out.append(AuditEntry.model_validate_json(line))
        return out


def _hint(path: Path) -> str:
    return f"fix or remove {path} (the last good version is {path.name}.bak beside it); rsk never overwrites it"


def _raw(path: Path) -> bytes | None:
    """The ledger file's bytes; None when there is none yet."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read the ledger {path}: {exc}", _hint(path)) from exc


def read_ledger(path: Path, project: str) -> Ledger:
    return parse_ledger(_raw(path), path, project)


def parse_ledger(raw: bytes | None, path: Path, project: str) -> Ledger:
    """The ledger the file's bytes hold (None: no file yet, an empty ledger), validated and migrated."""
    if raw is None:
        return Ledger(project=project)
    hint = _hint(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StateError(f"cannot read the ledger {path}: {exc}", hint) from exc
    # one reading of JSON (rsk.wire.safejson): a duplicate key or a deep nesting is refused, never read past
    try:
        raw = safejson.loads(text)
    except safejson.BadJson as exc:
        raise StateError(f"the ledger {path} is not valid JSON: {exc.message}", hint) from None
    if not isinstance(raw, dict):
        raise StateError(f"the ledger {path} is not a JSON object", hint)
    version = raw.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StateError(f"the ledger {path} has no valid schema_version ({version!r})", hint)
    if version > LEDGER_SCHEMA:
        raise NewerLedger.of(str(path), version, LEDGER_SCHEMA)
    try:
        ledger = Ledger.model_validate(migrate(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise StateError(
            f"the ledger {path} is invalid at {where}: {first['msg']} ({exc.error_count()} problem(s))", hint
        ) from exc
    if ledger.project != project:
        raise StateError(f"the ledger {path} belongs to project {ledger.project!r}, not {project!r}", hint)
    return ledger
