"""What an agent asks to launch, before it is a Request: the one place the CLI and the MCP server build it.

A LaunchSpec holds the options as the agent gives them (memory as "16G", time as "2:00:00", a script's
text, task lines); `build_request` checks them, lifts a script's #SBATCH lines, and returns the Request
that the cluster plans. Pure: no file is read here and nothing is printed.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, StrictInt

from rsk.errors import UsageError
from rsk.local.paths import check_token, new_request_id
from rsk.request.inputs import check_request
from rsk.request.tasks import TaskLine, sbatch_directives
from rsk.request.units import parse_mem, parse_seconds, parse_time
from rsk.wire.protocol import Request, TaskSpec


class LaunchSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    argv: list[str] = []
    script: str | None = None  # a batch script's text
    tasks: list[TaskSpec] = []  # a batch, already parsed (parse_tasks)
    request_id: str | None = None
    name: str | None = None
    workdir: str | None = None
    path: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    nodes: StrictInt | None = None  # numbers as numbers: true is not 1
    cpus: StrictInt | None = None
    gpus: StrictInt | None = None
    mem: str | None = None
    time: str | None = None
    env: list[str] = []
    lease: str | None = None  # a step of this lease of the project
    budget: str | None = None  # a chain: the run time of all its links (a Slurm time), each link --time long
    signal_before: str | None = None  # a chain: SIGUSR1 this long before each link's limit
    max_links: StrictInt | None = None  # a chain: refuse a budget that needs more links than this
    max_running: StrictInt | None = None  # a batch: at most this many tasks run at once (docs/adr/0059)
    chain_line: TaskLine | None = None  # a --tasks file whose one line has a budget (read_tasks): that chain


def _lift_script(spec: LaunchSpec) -> LaunchSpec:
    """A script's #SBATCH resource lines join the spec; an option that disagrees with one is an error."""
    if spec.script is None:
        return spec
    lifted = sbatch_directives(spec.script)
    update: dict[str, object] = {}
    for key, value in lifted.items():
        given = getattr(spec, key)
        if given is not None and str(given) != value:
            raise UsageError(f"--{key} {given} and the script's #SBATCH {key}={value} disagree")
        if given is None:
            update[key] = int(value) if key in ("nodes", "cpus", "gpus") else value
    return spec.model_copy(update=update)


def _from_chain_line(spec: LaunchSpec) -> LaunchSpec:
    """A chain given as a task line: its command, resources and budget, over the options' defaults."""
    line = spec.chain_line
    if line is None:
        return spec
    if spec.argv or spec.script or spec.tasks:
        raise UsageError("give exactly one of: a command after --, --script FILE, or --tasks FILE",
                         "e.g. rsk launch -t lab --tasks chain.jsonl")  # fmt: skip
    if spec.budget is not None or spec.signal_before is not None or spec.max_links is not None:
        raise UsageError(f"task {line.key} is a chain: give its budget, signal_before and max_links on its line, "
                         "not as --budget, --signal-before or --max-links too",
                         '{"key": "train", "argv": [...], "time": "16:00:00", "budget": "3-00:00:00", '
                         '"signal_before": "10:00"}')  # fmt: skip
    update: dict[str, object] = {k: getattr(line, k) for k in ("nodes", "cpus", "gpus", "max_links")}
    update.update({k: None if getattr(line, k) is None else str(getattr(line, k)) for k in _TEXT})
    update = {k: v for k, v in update.items() if v is not None}
    update.update(
        argv=line.argv if line.argv is not None else ["/bin/sh", "-c", line.script or ""],
        env=[*spec.env, *(f"{k}={v}" for k, v in line.env.items())],
        name=spec.name or line.key,
        chain_line=None,
    )
    return spec.model_copy(update=update)


_TEXT = ("mem", "time", "budget", "signal_before")  # a task line's numbers for these are text to the spec (minutes)


def build_request(spec: LaunchSpec, project: str, requester: str) -> Request:
    """The Request for a spec, checked: exactly one of argv, script or tasks; tokens, units and env valid."""
    spec = _from_chain_line(spec)
    if sum(bool(x) for x in (spec.argv, spec.script, spec.tasks)) != 1:
        raise UsageError(
            "give exactly one of: a command after --, --script FILE, or --tasks FILE",
            "e.g. rsk launch -t lab -- python train.py",
        )
    spec = _lift_script(spec)
    if spec.request_id and re.search(r"\.a[0-9]+$", spec.request_id):
        raise UsageError(f"request id {spec.request_id!r} ends like an attempt of a batch (B.a2)",
                         "rsk retry and rsk extend name attempts; choose another request id")  # fmt: skip
    chain: dict[str, object] = {}
    if spec.budget is not None:
        chain = _chain(spec)
    elif spec.signal_before is not None or spec.max_links is not None:
        raise UsageError("--signal-before and --max-links are settings of a chain: give --budget too")
    if spec.max_running is not None and (spec.max_running < 1 or not spec.tasks or spec.lease):
        raise UsageError(f"--max-running {spec.max_running}: at most this many tasks of a batch run at once, so it "
                         "is a whole number of at least 1, and for --tasks (not with --lease: a lease runs steps as "
                         "they fit)", "e.g. rsk launch --tasks sweep.jsonl --max-running 50")  # fmt: skip
    request = Request(
        project=project,
        request_id=check_token("request id", spec.request_id) if spec.request_id else new_request_id(),
        name=check_token("job name", spec.name) if spec.name else "",
        workdir=spec.workdir or "",
        path=spec.path or "",
        partition=spec.partition or "",
        account=spec.account or "",
        qos=spec.qos or "",
        nodes=spec.nodes,
        cpus=spec.cpus,
        mem_mb=parse_mem(spec.mem) if spec.mem else None,
        gpus=spec.gpus,
        time_min=parse_time(spec.time) if spec.time else None,
        env=list(spec.env),
        argv=list(spec.argv),
        script=spec.script,
        tasks=list(spec.tasks),
        requester=requester,
        lease=check_token("lease name", spec.lease) if spec.lease else "",
        max_running=spec.max_running,
    )
    if chain:
        request = request.model_copy(update=chain)
    check_request(request)
    return request


def _chain(spec: LaunchSpec) -> dict[str, object]:
    """A budget's links as the request's tasks (rsk.request.chain): one command, a time limit per link."""
    from rsk.request.chain import chain_tasks, default_signal_s

    if not spec.argv or spec.lease:
        raise UsageError("a budget runs one command as a chain of links: give it after -- (no --script, --tasks "
                         "or --lease)")  # fmt: skip
    if spec.time is None:
        raise UsageError("a chain needs --time: each link's time limit (a chain's task line: its \"time\")",
                         "e.g. --budget 3-00:00:00 --time 16:00:00")  # fmt: skip
    # a budget never grows: rounded down to whole minutes (a link's limit, as any time limit, rounds up)
    budget_min, time_min = parse_seconds(spec.budget or "") // 60, parse_time(spec.time)
    signal_s = parse_seconds(spec.signal_before) if spec.signal_before else default_signal_s(time_min)
    tasks = chain_tasks(list(spec.argv), list(spec.env), budget_min, time_min, signal_s, spec.max_links or 100)
    # the plan binds what the links add up to: a rest too short to be told before its limit is left out
    run = sum(t.time_min or 0 for t in tasks)
    return {"tasks": tasks, "argv": [], "env": [], "time_min": None, "budget_min": run, "signal_s": signal_s}
