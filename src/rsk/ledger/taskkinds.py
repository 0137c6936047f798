"""A batch's tasks at a glance: its distinct commands and environment entries, every run of digits folded to `#`,
each with how many tasks have it and the first of them (pure; docs/adr/0066).

What a human reads of 10,000 tasks before approving them all: `python train.py --seed #` x 9,999 and
`sh -c 'curl ...'` x 1 are two lines, so one task unlike the others stands out wherever it is in the batch, and
the number of distinct commands says when the tasks differ in more than their numbers. The text is the agent's:
whoever shows it makes it inert.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter

from pydantic import BaseModel, ConfigDict

from rsk.ledger.models import CardTask

_DIGITS = re.compile(r"[0-9]+")


class Folded(BaseModel):
    """A command (its words as a shell reads them) or an environment entry (NAME=VALUE), digits folded to `#`: how
    many of the batch's tasks have it, and the key of the first."""

    model_config = ConfigDict(extra="forbid")

    text: str
    tasks: int
    first: str


class TaskKinds(BaseModel):
    """A batch's tasks by their distinct commands and environment entries, the fewest tasks first (docs/adr/0066)."""

    model_config = ConfigDict(extra="forbid")

    tasks: int
    commands: list[Folded]
    env: list[Folded]  # what a task's environment sets, entry by entry (a task may set several)


def fold(text: str) -> str:
    """Every run of digits as `#`: a seed, a shard, a learning rate are one pattern."""
    return _DIGITS.sub("#", text)


def _count(items: list[tuple[str, str]]) -> list[Folded]:
    counted: Counter[str] = Counter()
    first: dict[str, str] = {}
    for text, key in items:
        counted[text] += 1
        first.setdefault(text, key)
    # the fewest tasks first: the odd one is what a human must read, and a card that folds its kinds hides the last
    # ones; a tie in the order the batch first gives them (Counter keeps insertion order, sorted is stable)
    return [Folded(text=t, tasks=n, first=first[t]) for t, n in sorted(counted.items(), key=lambda tn: tn[1])]


def summarize(tasks: list[CardTask]) -> TaskKinds:
    """Every task of a batch folded: its distinct commands and environment entries (docs/adr/0066)."""
    return TaskKinds(
        tasks=len(tasks),
        commands=_count([(fold(shlex.join(t.argv)), t.key) for t in tasks]),
        env=_count([(fold(e), t.key) for t in tasks for e in dict.fromkeys(t.env)]),
    )
