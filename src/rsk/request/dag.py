"""A workflow's graph: the tasks of a --tasks file with `needs`, checked whole and put in order (pure).

Every fault is found before anything is planned, and all of them are named at once: a need of a task no line
defines, a task that needs itself, a need given twice, a cycle (named as a path), more tasks or edges than
the documented limits. The cluster receives the tasks in dependency order (a task after every task it needs),
which its submit program checks again: a need must name an earlier task, so no order it accepts has a cycle.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

from rsk.errors import UsageError
from rsk.wire.protocol import TaskSpec

MAX_EDGES = 5000  # needs over all tasks of one workflow (tasks: rsk.request.tasks.MAX_TASKS)
_HINT = 'needs lists keys of other tasks: "needs": ["prep"] or [{"task": "train", "on": "ended"}]'


def check(tasks: Sequence[TaskSpec]) -> list[TaskSpec]:
    """The tasks in dependency order (each after what it needs, else in file order), or a UsageError naming
    every offending key."""
    keys = {t.key for t in tasks}
    faults: list[str] = []
    edges = sum(len(t.needs) for t in tasks)
    if edges > MAX_EDGES:
        faults.append(f"{edges} needs in all; a workflow has at most {MAX_EDGES}")
    for t in tasks:
        seen: set[str] = set()
        for n in t.needs:
            if n.task == t.key:
                faults.append(f"task {t.key} needs itself")
            elif n.task not in keys:
                near = difflib.get_close_matches(n.task, sorted(keys), n=1)
                faults.append(f"task {t.key} needs {n.task}, which no task of the file is"
                              + (f" (did you mean {near[0]}?)" if near else ""))  # fmt: skip
            elif n.task in seen:
                faults.append(f"task {t.key} needs {n.task} twice")
            seen.add(n.task)
    if faults:
        raise UsageError("the workflow is not valid: " + "; ".join(faults), _HINT)
    ordered = _order(tasks)
    if len(ordered) < len(tasks):
        loop = _cycle(tasks, {t.key for t in ordered})
        raise UsageError(f"the workflow has a cycle: {' -> '.join(loop)}",
                         f"remove one of these needs, e.g. {loop[0]}'s need of {loop[1]}")  # fmt: skip
    return ordered


def levels(needs: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Task keys by level, from each task's needed keys in dependency order (`check`; a plan holds them so):
    level 0 needs nothing, level k needs something at level k-1 and nothing later."""
    level: dict[str, int] = {}
    for key, wanted in needs.items():
        level[key] = 1 + max((level.get(k, -1) for k in wanted), default=-1)
    out: list[list[str]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for key, at in level.items():
        out[at].append(key)
    return out


def _order(tasks: Sequence[TaskSpec]) -> list[TaskSpec]:
    """The tasks as passes over the file place them: each pass takes, in file order, every task whose needs are
    placed (stable, so a file already in order keeps its order). A task's pass is one more than that of a need that
    comes after it in the file, else that of its latest need, or the first: found in one walk of the graph (Kahn's),
    which leaves out every task a cycle holds back."""
    at = {t.key: i for i, t in enumerate(tasks)}
    waiting = {t.key: len({n.task for n in t.needs}) for t in tasks}
    needed_by: dict[str, list[str]] = {}
    for t in tasks:
        for key in {n.task for n in t.needs}:
            needed_by.setdefault(key, []).append(t.key)
    ready = [t.key for t in tasks if not waiting[t.key]]
    passes = dict.fromkeys(ready, 1)
    while ready:
        key = ready.pop()
        for other in needed_by.get(key, []):
            passes[other] = max(passes.get(other, 1), passes[key] + (at[key] > at[other]))
            waiting[other] -= 1
            if not waiting[other]:
                ready.append(other)
    return sorted((t for t in tasks if not waiting[t.key]), key=lambda t: (passes[t.key], at[t.key]))


def _cycle(tasks: Sequence[TaskSpec], placed: set[str]) -> list[str]:
    """One cycle among the tasks `_order` could not place, as a path that ends where it starts."""
    needs = {t.key: [n.task for n in t.needs if n.task not in placed] for t in tasks if t.key not in placed}
    start = next(iter(needs))
    path: list[str] = []
    at = start
    while at not in path:  # every unplaced task needs an unplaced one: walking always closes a loop
        path.append(at)
        at = needs[at][0]
    return [*path[path.index(at) :], at]
