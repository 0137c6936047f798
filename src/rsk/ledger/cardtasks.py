"""A card's tasks when its batch has more than CARD_TASKS: the card lists the first, their digest and shapes, and
a file beside the ledger holds every one (docs/adr/0060), so the ledger, read on every launch, stays small."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from rsk.errors import StateError
from rsk.ledger.models import Card, CardShape, CardTask
from rsk.local.atomic import write_atomic
from rsk.wire import safejson
from rsk.wire.protocol import Request, TaskSpec


class CardTasks(BaseModel):
    """Every task of a card's batch of more than CARD_TASKS, which the card lists the first of: as its request asks
    them (to launch it once approved) and as its plan runs them (to show). A file beside the ledger, cards/SHA.json,
    named by the sha256 of its bytes, which the card holds (docs/adr/0060)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    request_tasks: list[TaskSpec]
    plan_tasks: list[CardTask]


def tasks_digest(tasks: list[CardTask]) -> str:
    """The sha256 of a batch's tasks as a card lists them: two plans whose tasks differ anywhere differ here."""
    h = hashlib.sha256()
    for t in tasks:
        h.update(t.model_dump_json().encode() + b"\n")
    return h.hexdigest()


def shapes(tasks: list[CardTask]) -> list[CardShape]:
    """A batch's tasks by shape, the most first: what a human reads of 10,000 tasks at a glance."""
    counted = Counter((t.nodes, t.cpus, t.mem_mb, t.gpus, t.time_min) for t in tasks)
    return [CardShape(nodes=n, cpus=c, mem_mb=m, gpus=g, time_min=t, tasks=k)
            for (n, c, m, g, t), k in counted.most_common()]  # fmt: skip


def keep_tasks(directory: Path, request: Request, plan_tasks: list[CardTask]) -> str:
    """Every task of a card's big batch, written once into the ledger's DIRECTORY (cards/SHA.json); SHA."""
    doc = CardTasks(request_tasks=request.tasks, plan_tasks=plan_tasks).model_dump_json().encode()
    sha = hashlib.sha256(doc).hexdigest()
    path = directory / "cards" / f"{sha}.json"
    if not path.exists():
        write_atomic(path, doc)
    return sha


def card_tasks(directory: Path, card: Card) -> CardTasks | None:
    """Every task of a card that lists only its first (None for one that lists them all), read whole and checked
    against the sha256 the card holds: a file changed beside the ledger is refused, never shown or launched."""
    if not card.tasks_file:
        return None
    path = directory / "cards" / f"{card.tasks_file}.json"
    try:
        doc = path.read_bytes()
    except OSError as exc:
        raise StateError(
            f"card {card.id} lists {card.plan.jobs} tasks in {path}, which cannot be read: {exc}",
            "the card cannot be shown whole or launched; deny it, and launch the batch again",
        ) from None
    if hashlib.sha256(doc).hexdigest() != card.tasks_file:
        raise StateError(
            f"{path} does not hold the tasks card {card.id} was filed with (it was changed)",
            "the card cannot be shown whole or launched; deny it, and launch the batch again",
        )
    try:
        return CardTasks.model_validate(safejson.loads(doc))
    except (safejson.BadJson, ValidationError) as exc:
        raise StateError(f"{path} is not a card's tasks: {exc}"[:400]) from None
