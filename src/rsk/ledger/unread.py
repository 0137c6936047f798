"""The broker's word that it could not read a project's status: while its books poll fails, no charge grows to
what Slurm holds and no ended job settles on Slurm's word, so the human is told (`rsk grant list`, `rsk
approvals`). A file of its own beside the ledger (`books-unread.json`), written when a read first fails and removed
when one reads again; never part of the ledger's transaction."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, ValidationError

from rsk.ledger.store import Store
from rsk.local.atomic import write_atomic
from rsk.local.inert import inert

NAME = "books-unread.json"


class Unread(BaseModel):
    model_config = ConfigDict(extra="forbid")

    since: datetime  # the first failed read of a run of them
    error: str  # the last one's message


class UnreadBooks(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    targets: dict[str, Unread] = {}


def _read(store: Store) -> UnreadBooks:
    try:
        return UnreadBooks.model_validate_json((store.dir / NAME).read_bytes())
    except (OSError, ValidationError):
        return UnreadBooks()


def record(store: Store, target: str, error: str | None, now: datetime | None = None) -> None:
    """After a books poll of (project, target): `error` None when it read, else why not."""
    books = _read(store)
    if error is None:
        if books.targets.pop(target, None) is not None:
            if books.targets:
                write_atomic(store.dir / NAME, books.model_dump_json().encode())
            else:
                with contextlib.suppress(FileNotFoundError):
                    (store.dir / NAME).unlink()
        return
    was = books.targets.get(target)
    books.targets[target] = Unread(since=was.since if was else (now or datetime.now(UTC)), error=error[:300])
    write_atomic(store.dir / NAME, books.model_dump_json().encode())


def warnings(store: Store) -> list[str]:
    return [
        f"the broker has not read project {store.project}'s status on {t} since {u.since:%Y-%m-%dT%H:%M:%SZ} "
        f"({inert(u.error)}): no charge follows what Slurm holds and no warning of it shows meanwhile; run "
        f"`rsk status --target {t}` to see why"
        for t, u in sorted(_read(store).targets.items())
    ]
