"""Batch task files (JSON lines; with `needs`, a workflow) and #SBATCH directives of user scripts: parsed into
requests (pure)."""

from __future__ import annotations

import re
import shlex
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError, model_validator

from rsk.errors import UsageError
from rsk.local.paths import TOKEN
from rsk.request import dag
from rsk.request.inputs import check_env
from rsk.request.units import parse_mem, parse_time
from rsk.wire import safejson
from rsk.wire.protocol import Need, TaskSpec

MAX_TASKS = 10_000  # one launch, one card; the cluster splits them into job arrays at its MaxArraySize (ADR 0058)
_NEEDS_HINT = '"needs": ["prep"] or [{"task": "train", "on": "ended"}] (on: succeeded, the default, or ended)'
_CHAIN_ALONE_HINT = (
    "a chain is a request of its own: put its line in a file of its own (or `rsk launch --budget ... -- CMD`), "
    "then `rsk wait --request-id RID` (it judges the chain by its last link that ran) and launch what comes after it"
)


class NeedLine(BaseModel):
    """A need written as an object: {"task": KEY, "on": "succeeded" | "ended"}."""

    model_config = ConfigDict(extra="forbid", strict=True)

    task: str
    on: Literal["succeeded", "ended"] = "succeeded"


class TaskLine(BaseModel):
    """One line of a --tasks file."""

    model_config = ConfigDict(extra="forbid", strict=True)  # "gpus": true or "1" is refused, not read as 1

    key: str
    argv: list[str] | None = None
    script: str | None = None
    env: dict[str, str] = {}
    nodes: StrictInt | None = None
    cpus: StrictInt | None = None
    mem: StrictStr | StrictInt | None = None
    gpus: StrictInt | None = None
    time: StrictStr | StrictInt | None = None
    needs: list[StrictStr | NeedLine] = []
    budget: StrictStr | StrictInt | None = None  # a chain: its run time in links of `time` (docs/long-work.md)
    signal_before: StrictStr | StrictInt | None = None  # a chain: SIGUSR1 this long before each link's limit
    max_links: StrictInt | None = None  # a chain: refuse a budget that needs more links

    @model_validator(mode="after")
    def one_command(self) -> TaskLine:
        if (self.argv is None) == (self.script is None):
            raise ValueError("give exactly one of argv (a list) or script (a string)")
        if self.argv is not None and not self.argv:
            raise ValueError("argv is empty")
        return self


class TaskFile(NamedTuple):
    """A --tasks file read: its tasks, or, when its one line has a budget, that line as a chain."""

    tasks: list[TaskSpec]
    chain: TaskLine | None = None


def parse_tasks(text: str, source: str = "tasks file") -> list[TaskSpec]:
    """The tasks of a batch or workflow file (a chain line is refused here: read_tasks reads one)."""
    read = read_tasks(text, source)
    if read.chain is not None:
        raise UsageError(f"{source}: task {read.chain.key} is a chain (it has a budget)", _CHAIN_ALONE_HINT)
    return read.tasks


def read_tasks(text: str, source: str = "tasks file") -> TaskFile:
    """A --tasks file: a batch or workflow, or one line with `budget`, a chain (the request is its links).

    A chain is refused beside other tasks and with needs: its budget, link numbering, work directory and card
    are its request's, and Slurm cannot be told "after this chain succeeded" (a link whose command failed before
    the signal exits 0 to end the chain), so a task needing it would start after a failed chain."""
    tasks: list[TaskSpec] = []
    seen: set[str] = set()
    chains: list[tuple[str, TaskLine]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{source} line {n}"
        try:
            raw = safejson.loads(line, max_depth=8)
            named = where
            if isinstance(raw, dict) and isinstance(raw.get("key"), str) and TOKEN.fullmatch(raw["key"]):
                named += f" (task {raw['key']})"
            t = TaskLine.model_validate(raw)
        except safejson.BadJson as exc:
            raise UsageError(
                f"{where}: {exc.message}", 'each line is an object like {"key": "a", "argv": ["echo", "a"]}'
            ) from None
        except ValidationError as exc:
            e = exc.errors()[0]
            if e["loc"] and e["loc"][0] == "needs":
                raise UsageError(
                    f"{named}: needs: each need is a task key or an object with task and on", _NEEDS_HINT
                ) from exc
            fields = ", ".join(TaskLine.model_fields)
            if e["type"] == "extra_forbidden" and len(e["loc"]) == 1:  # a field a task line does not take
                import difflib

                name = str(e["loc"][0])
                near = difflib.get_close_matches(name, list(TaskLine.model_fields), n=1)
                raise UsageError(
                    f"{named}: unknown field {name!r}" + (f" (did you mean {near[0]!r}?)" if near else ""),
                    f"a task line takes {fields}",
                ) from exc
            raise UsageError(
                f"{named}: {'.'.join(map(str, e['loc'])) or 'task'}: {e['msg']}",
                f'numbers are JSON numbers ("gpus": 1, not true or "1"); text is a string; a task line takes {fields}',
            ) from exc
        if not TOKEN.fullmatch(t.key):
            raise UsageError(f"{where}: key {t.key!r} is not valid", "keys are 1-64 characters of A-Z a-z 0-9 . _ -")
        if t.key in seen:
            raise UsageError(f"{where}: key {t.key!r} appears twice", "each task needs its own key")
        seen.add(t.key)
        for name, value in t.env.items():
            check_env(f"{name}={value}", f"{where}: env")
        if t.budget is None and (t.signal_before is not None or t.max_links is not None):
            raise UsageError(f"{where}: signal_before and max_links are settings of a chain: give budget too",
                             '{"key": "train", "argv": [...], "budget": "3-00:00:00", "time": "16:00:00"}')  # fmt: skip
        if t.budget is not None:
            if t.needs:
                raise UsageError(f"{where}: task {t.key} is a chain (it has a budget) and cannot have needs",
                                 _CHAIN_ALONE_HINT)  # fmt: skip
            chains.append((where, t))
        tasks.append(
            TaskSpec(
                key=t.key,
                argv=t.argv if t.argv is not None else ["/bin/sh", "-c", t.script or ""],
                env=[f"{k}={v}" for k, v in t.env.items()],
                nodes=t.nodes,
                cpus=t.cpus,
                mem_mb=parse_mem(str(t.mem)) if t.mem is not None else None,
                gpus=t.gpus,
                time_min=parse_time(str(t.time)) if t.time is not None else None,
                needs=[Need(task=n) if isinstance(n, str) else Need(task=n.task, on=n.on) for n in t.needs],
            )
        )
    if not tasks:
        raise UsageError(f"{source} has no tasks")
    if chains:
        at, chain = chains[0]
        if len(tasks) > 1:
            raise UsageError(f"{at}: task {chain.key} is a chain (it has a budget): a chain is the only task of its "
                             f"file, and {source} has {len(tasks)}", _CHAIN_ALONE_HINT)  # fmt: skip
        return TaskFile([], chain)
    if len(tasks) > MAX_TASKS:
        raise UsageError(f"{source} has {len(tasks)} tasks; a batch has at most {MAX_TASKS}", "split it into batches")
    return TaskFile(dag.check(tasks))


# #SBATCH directives that rsk lifts into the plan; every other directive is refused, so that the
# job Slurm runs never asks for more than the plan that policy and ledger checked.
_LIFTED = {
    "p": "partition", "partition": "partition", "A": "account", "account": "account", "qos": "qos",
    "N": "nodes", "nodes": "nodes", "c": "cpus", "cpus-per-task": "cpus", "mem": "mem", "t": "time",
    "time": "time", "J": "name", "job-name": "name", "gres": "gres", "gpus-per-node": "gpus",
}  # fmt: skip
# directives that change nothing the plan binds (or that rsk sets itself and ignores in the script)
_HARMLESS = {"o", "output", "e", "error", "mail-type", "mail-user", "comment", "open-mode", "chdir", "D"}


def sbatch_directives(script: str) -> dict[str, str]:
    """The resources a script's #SBATCH lines ask for, as rsk option names; refuses what rsk cannot plan."""
    found: dict[str, str] = {}
    for n, line in enumerate(script.splitlines(), 1):
        if not line.startswith("#SBATCH"):
            if line.strip() and not line.startswith("#"):
                break  # sbatch stops reading directives at the first command
            continue
        for word in shlex.split(line[len("#SBATCH") :], comments=True):
            if not word.startswith("-"):
                continue
            flag = word.lstrip("-")
            name, _, value = flag.partition("=")
            if not value and len(name) > 1 and word.startswith("-") and not word.startswith("--"):
                name, value = name[0], name[1:]
            if name in _HARMLESS:
                continue
            if name not in _LIFTED:
                raise UsageError(
                    f"script line {n}: #SBATCH {word} is not something rsk can plan",
                    "remove it; rsk plans partition, account, qos, nodes, cpus-per-task, mem, time, "
                    "gres=gpu:N and gpus-per-node, so policy and ledger see the real request",
                )
            if not value:
                raise UsageError(f"script line {n}: write #SBATCH {word}=VALUE (with =) so rsk can read it")
            key = _LIFTED[name]
            if key == "gres":
                m = re.fullmatch(r"gpu(?::[A-Za-z0-9_-]+)?:(\d+)", value)
                if not m:
                    raise UsageError(f"script line {n}: only --gres=gpu:N can be planned, not {value!r}")
                key, value = "gpus", m.group(1)
            found[key] = value
    return found
