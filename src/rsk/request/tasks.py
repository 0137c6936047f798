"""Batch task files (JSON lines; with `needs`, a workflow) and #SBATCH directives of user scripts: parsed into
requests (pure)."""

from __future__ import annotations

import re
import shlex
from typing import Literal

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError, model_validator

from rsk.errors import UsageError
from rsk.local.paths import TOKEN
from rsk.request import dag
from rsk.request.inputs import check_env
from rsk.request.units import parse_mem, parse_time
from rsk.wire import safejson
from rsk.wire.protocol import Need, TaskSpec

MAX_TASKS = 1000  # Slurm's default MaxArraySize allows array indices 0..1000
_NEEDS_HINT = '"needs": ["prep"] or [{"task": "train", "on": "ended"}] (on: succeeded, the default, or ended)'


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

    @model_validator(mode="after")
    def one_command(self) -> TaskLine:
        if (self.argv is None) == (self.script is None):
            raise ValueError("give exactly one of argv (a list) or script (a string)")
        if self.argv is not None and not self.argv:
            raise ValueError("argv is empty")
        return self


def parse_tasks(text: str, source: str = "tasks file") -> list[TaskSpec]:
    tasks: list[TaskSpec] = []
    seen: set[str] = set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{source} line {n}"
        try:
            t = TaskLine.model_validate(safejson.loads(line, max_depth=8))
        except safejson.BadJson as exc:
            raise UsageError(
                f"{where}: {exc.message}", 'each line is an object like {"key": "a", "argv": ["echo", "a"]}'
            ) from None
        except ValidationError as exc:
            e = exc.errors()[0]
            if e["loc"] and e["loc"][0] == "needs":
                raise UsageError(
                    f"{where}: needs: each need is a task key or an object with task and on", _NEEDS_HINT
                ) from exc
            raise UsageError(
                f"{where}: {'.'.join(map(str, e['loc'])) or 'task'}: {e['msg']}",
                'numbers are JSON numbers ("gpus": 1, not true or "1"); text is a string; see rsk launch --help',
            ) from exc
        if not TOKEN.fullmatch(t.key):
            raise UsageError(f"{where}: key {t.key!r} is not valid", "keys are 1-64 characters of A-Z a-z 0-9 . _ -")
        if t.key in seen:
            raise UsageError(f"{where}: key {t.key!r} appears twice", "each task needs its own key")
        seen.add(t.key)
        for name, value in t.env.items():
            check_env(f"{name}={value}", f"{where}: env")
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
    if len(tasks) > MAX_TASKS:
        raise UsageError(f"{source} has {len(tasks)} tasks; a batch has at most {MAX_TASKS}", "split it into batches")
    return dag.check(tasks)


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
