"""rsk as MCP tools: a stdio server over the same core as the CLI, pinned to one project and one target.

Each tool takes typed arguments and returns the model that the CLI prints with --json. An rsk error
becomes a tool error whose text is the CLI's JSON error (code, exit_code, message, hint, retryable).
Nothing here approves, grants or denies: those tools do not exist, and a call that names them is
refused like any unknown tool. Blocking tools (wait, events) are bounded by `max_wait`, which stays
below the client's own tool timeout (Codex: 60 s by default).
"""

import contextvars
import functools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from io import TextIOBase
from pathlib import Path
from typing import Annotated, Any, Literal, ParamSpec, TypeVar, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rsk import __version__
from rsk.cluster.targets import TargetList
from rsk.commands import HUMAN_ACTS
from rsk.errors import ConnectError, PendingApproval, RskError, UsageError
from rsk.ledger.cards import CardList, Decision
from rsk.ops.cancel import CancelReport
from rsk.ops.events import Events
from rsk.ops.fetch import BatchFetchReport, BatchResultReport, FetchReport, ResultReport
from rsk.ops.gpus import GpuInventory
from rsk.ops.info import TargetInfo
from rsk.ops.journal import Journal
from rsk.ops.launch import LaunchResult, PlanReport, preview
from rsk.ops.launch import launch as do_launch
from rsk.ops.leases import CloseReport, LeaseList
from rsk.ops.logs import LogSet, LogTail
from rsk.ops.status import Status
from rsk.ops.voice import TOOLS, for_tools
from rsk.ops.wait import WaitResult
from rsk.request.code import CodeSnapshot
from rsk.request.tasks import TaskLine
from rsk.wire.protocol import Request
from rsk.wire.states import SUMMARY_ROWS, State

P = ParamSpec("P")
R = TypeVar("R")

HUMAN_ONLY = tuple(sorted(HUMAN_ACTS))  # never tools: a human's acts (the audience table, rsk.commands)
DEFAULT_MAX_WAIT = 50.0  # seconds: below Codex's default MCP tool timeout of 60 s


@dataclass(frozen=True)
class Pin:
    """What every tool call works on: set when the server starts, never by a tool's arguments."""

    project: str
    target: str
    max_wait: float = DEFAULT_MAX_WAIT
    chosen: bool = True  # the project was named (flag, RSK_PROJECT, project file), not `default` for want of one

    def spending(self) -> str:
        """The project for a tool that plans or asks for resources: refused when nothing chose it (ADR 0049)."""
        if not self.chosen:
            from rsk.local.project import NO_PROJECT, NO_PROJECT_HINT

            raise UsageError(NO_PROJECT, NO_PROJECT_HINT.replace("pass --project NAME", "start rsk mcp with "
                             "--project NAME"), code="no-project")  # fmt: skip
        return self.project


class LaunchReply(BaseModel):
    """A launch's answer: submitted (or replayed) with its result, or pending with a card for the human."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    status: Literal["submitted", "replayed", "pending"]
    job_id: str | None = None  # submitted or replayed: the job (a batch's first task's), as `rsk launch --json` has it
    launch: LaunchResult | None = None
    card_id: str | None = None
    request_id: str | None = None
    message: str = ""
    tell_human: str = ""  # with pending: the sentence to pass on to the human, word for word (addressed to them)
    next: str = ""  # with pending: what the agent does next (wait on the card)
    closest_grant: str | None = None  # with pending: the grant nearest to covering it, and why it does not
    closest_why: list[str] = []
    warnings: list[str] = []  # with pending: what its plan said (a file the command names that no code sends)


def _minutes(time: object) -> str | None:
    """A time limit as rsk reads it: a number is minutes, as `--time 30` is (a JSON number from an agent)."""
    return str(time) if isinstance(time, int) and not isinstance(time, bool) else cast(str | None, time)


def _own_path(what: str, name: str) -> Path:
    """A local path a tool opens: the caller's (relative to its directory), and only when this server is the
    caller's own process. A session the broker serves has no client that reads or writes its paths, and the
    broker opens none a caller names (ADR 0064)."""
    from rsk.local import caller

    if not caller.opens_paths():
        raise UsageError(
            f"{what}: this session runs in the broker, which opens no local path a caller names ({name})",
            "send a script or tasks instead of code and read results with logs; or run `rsk launch --code` and "
            "`rsk fetch` in a shell, or this MCP server with RSK_BROKER=off",
        )
    return caller.path(name)


def _env(given: list[str] | dict[str, str] | None) -> list[str]:
    """A tool's env as the CLI's NAME=VALUE entries: a list of them, or an object as a task line has it."""
    if isinstance(given, dict):
        return [f"{k}={v}" for k, v in given.items()]
    return list(given or [])


def _tool_error(exc: RskError) -> CallToolResult:
    """The CLI's JSON error as the tool's structured content, flagged is_error (its text is the same JSON)."""
    body = exc.to_json()
    for key in ("hint", "next"):  # an MCP agent has tools, not a shell: hints name the tools
        if isinstance(body.get(key), str):
            body[key] = for_tools(str(body[key]))
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body))], structured_content=body,
                          is_error=True)  # fmt: skip


class _Server(MCPServer[Any]):
    """The SDK's server, whose refusal of a tool's arguments (an unknown one, a wrong type, a state that is none)
    is the CLI's JSON error (`bad-arguments`, exit 2, with a hint), as every other refusal is, not pydantic's text."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if self._tool_manager.get_tool(name) is None:  # (a human's act among them: approve, grant, deny)
            hint = "tools/list gives the tools; approving, granting and denying are the human's acts: no tool does them"
            return _tool_error(UsageError(f"Unknown tool: {name}", hint, code="unknown-tool"))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            # each field and what it must be; never the value sent (the caller's data)
            said = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                             for e in exc.__cause__.errors()[:10])  # fmt: skip
            hint = f"tools/list gives the arguments of {name} and their types"
            return _tool_error(UsageError(f"{name}: {said}", hint, code="bad-arguments"))


CALL_SLACK_S = 8.0  # a call's bound beyond max_wait: a wait answers at max_wait, then reads the queue once

_SAID = ("hint", "next", "note", "warnings")  # what an answer tells the agent to do (never tell_human: the human's)


def _voiced(value: object) -> object:
    """An answer for an MCP agent: every hint, next step, note and warning in it (nested answers too) names the
    tool calls a shell command would do (rsk.ops.voice.for_tools); nothing else changes."""
    if isinstance(value, BaseModel):
        if type(value).__module__.startswith(("rsk.ledger.", "rsk.wire.")):
            return value  # records as kept (a grant's note, a card, a plan): the human's and the agent's words
        update: dict[str, object] = {}
        for name in type(value).model_fields:
            field = getattr(value, name)
            if name in _SAID and isinstance(field, str):
                update[name] = for_tools(field)
            elif name in _SAID and isinstance(field, list):
                update[name] = [for_tools(x) if isinstance(x, str) else x for x in field]
            elif isinstance(field, (BaseModel, list)):
                update[name] = _voiced(field)
        return value.model_copy(update=update)
    if isinstance(value, list):
        return [_voiced(x) for x in value]
    return value


def _guarded(bound_s: float) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Run a tool within `bound_s` seconds: an rsk error reaches the agent as the CLI's JSON error, not as a
    crash, and a call that has not answered by then (a lock held elsewhere, a cluster that stopped answering,
    a broker in the middle of an upgrade) is answered with a retryable error instead of a hang (the work goes
    on in its thread: a launch repeated with the same request_id never submits twice)."""

    def guard(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            done: list[tuple[bool, object]] = []
            context = contextvars.copy_context()  # the caller the broker acts for, in the call's own thread

            def work() -> None:
                try:
                    done.append((True, context.run(fn, *args, **kwargs)))
                except BaseException as exc:  # handed to the caller's thread below
                    done.append((False, exc))

            worker = threading.Thread(target=work, name=f"rsk-mcp-{fn.__name__}", daemon=True)
            worker.start()
            worker.join(bound_s)
            if not done:
                late = ConnectError(
                    f"{fn.__name__} did not answer within {bound_s:g} s (the server's bound); it may still finish",
                    f"call {fn.__name__} again with the same arguments (a launch with the same request_id never "
                    "submits twice); call status to see what ran",
                    code="call-timeout",
                )
                return cast(R, _tool_error(late))
            ok, value = done[0]
            if ok:
                return cast(R, _voiced(value))  # its hints name tools
            if isinstance(value, RskError):
                return cast(R, _tool_error(value))  # the SDK passes a CallToolResult through as it is
            raise cast(BaseException, value)

        return run

    return guard


READ = ToolAnnotations(read_only_hint=True, open_world_hint=True)

# argument types shared by plan and launch -----------------------------------------------------------
Command = Annotated[list[str] | None, Field(description='The command and its arguments: ["python", "train.py"].')]
Script = Annotated[str | None, Field(description="A batch script's text; its #SBATCH resource lines join the plan.")]
Tasks = Annotated[
    list[TaskLine] | None,
    Field(
        description="A batch: one object per task, {key, argv | script, env, gpus, time, needs, ...}; one plan, "
        "one card. One item with budget (and time, signal_before, max_links) is a chain, as budget is; a chain "
        "is never one task among others."
    ),
]
RequestId = Annotated[str | None, Field(description="Idempotency key: the same id never submits twice. Default: new.")]
Gpus = Annotated[int | None, Field(ge=0, strict=True, description="GPUs per node.")]  # true is not 1
Nodes = Annotated[int | None, Field(ge=1, strict=True, description="Nodes (default 1).")]
Cpus = Annotated[int | None, Field(ge=1, strict=True, description="CPUs per node (default 1).")]
Mem = Annotated[str | None, Field(description="Memory per node: 4096, 512M, 16G.")]
Time = Annotated[str | int | None, Field(description='Time limit: 30 (minutes), "2:00:00", "1-00:00:00".')]
Env = Annotated[
    list[str] | dict[str, str] | None,
    Field(description='Passed to the job: NAME=VALUE entries, or an object {"NAME": "VALUE"} as in tasks.'),
]
Code = Annotated[
    str | None,
    Field(description="A local directory to snapshot and send; the job runs in a checked copy of it."),
]
Exclude = Annotated[list[str] | None, Field(description="With code: globs to leave out.")]
Text = Annotated[str | None, Field(description="See rsk launch --help.")]
Budget = Annotated[
    str | None,
    Field(description="Long work: the run time of a chain of links of `time` each (Slurm time, 3-00:00:00); the "
          "command exits 75 (or is signalled with SIGUSR1 before a link's limit) to go on in the next link."),
]  # fmt: skip
SignalBefore = Annotated[str | None, Field(description="A chain: SIGUSR1 this long before each link's limit.")]
MaxLinks = Annotated[int | None, Field(description="A chain: refuse a budget that needs more links.")]
MaxRunning = Annotated[
    int | None,
    Field(ge=1, strict=True, description="A batch (tasks): at most this many of its tasks run at once (Slurm's array "
          "throttle); bound by the plan and shown on the card. Up to 10,000 tasks are one launch and one card."),
]  # fmt: skip
States = Annotated[
    list[State] | None,
    Field(description="List only jobs in these states (failed, timed-out, ...); counts still count every job."),
]
Summary = Annotated[
    bool | None,
    Field(description="true: list only the jobs that need attention (not succeeded, running or pending; at most 50); "
          "false: every job; default: a summary when more than 50 jobs are selected. counts always has every job."),
]  # fmt: skip
LeaseName = Annotated[
    str | None,
    Field(
        description="Queue this as a step of the project's lease of this name (see lease_status): it starts "
        "within seconds on one node of the lease, with its own GPUs, at no new charge."
    ),
]


def build(pin: Pin) -> MCPServer:
    """The server and its tools, every one bound to `pin`."""
    from rsk.wire.bundle import data_dir

    guarded = _guarded(pin.max_wait + CALL_SLACK_S)
    server = _Server(
        name="rsk",
        version=__version__,
        log_level="WARNING",  # stderr stays quiet but for real trouble; stdout is the protocol's
        instructions=(
            f"rsk runs work on the Slurm cluster '{pin.target}' for project '{pin.project}' while a human keeps "
            "the budget. Use plan before launch; reuse a request_id to retry (it never submits twice). A launch "
            "that needs a human returns status pending with a card id: tell the human the tell_human sentence "
            "and call wait with the card. Approving, granting and denying are the human's acts: no tool does them."
        ),
    )

    def prepare(args: dict[str, Any]) -> tuple[Request, CodeSnapshot | None]:
        """A plan's or a launch's arguments (their names are LaunchSpec's) as a checked Request and snapshot."""
        from rsk.ops.launch import requester
        from rsk.request.spec import LaunchSpec, build_request
        from rsk.request.tasks import TaskFile, read_tasks

        # locals() of a tool: its arguments, and the closure's names it uses, which are left out here
        a = {k: v for k, v in args.items() if k in LaunchSpec.model_fields or k in ("command", "code", "exclude")}
        code, exclude, command, tasks = a.pop("code"), a.pop("exclude"), a.pop("command"), a.pop("tasks")
        a["time"] = _minutes(a.get("time"))
        read = TaskFile([])
        if tasks:
            read = read_tasks("\n".join(t.model_dump_json(exclude_none=True) for t in tasks), "tasks")
        spec = LaunchSpec(
            argv=list(command or []), tasks=read.tasks, chain_line=read.chain, env=_env(a.pop("env")), **a
        )
        request = build_request(spec, pin.spending(), f"mcp: {requester()}")
        if code is None:
            return request, None
        from rsk.request.code import snapshot

        return request, snapshot(_own_path("code", code), list(exclude or []))

    def bounded(seconds: float | None) -> float:
        if seconds is None or seconds <= 0 or seconds > pin.max_wait:
            return pin.max_wait
        return seconds

    @server.tool(description="The targets rsk knows, and the one this server is pinned to.", annotations=READ)
    @guarded
    def targets() -> TargetList:
        from rsk.cluster.targets import list_targets

        return TargetList(pinned=pin.target, targets=list_targets())

    @server.tool(
        description="What the target offers: partitions and limits, the cluster's policy, this project's grants left.",
        annotations=READ,
    )
    @guarded
    def info() -> TargetInfo:
        from rsk.ops.info import info as get_info

        return get_info(pin.target, pin.project)

    @server.tool(
        description="Every GPU of the target: free, held (by which job, project and request, since when), or on a "
        "node that is down.",
        annotations=READ,
    )
    @guarded
    def gpus(
        lease: Annotated[str | None, Field(description="Only this lease's GPUs, as its controller sees them.")] = None,
    ) -> GpuInventory:
        from rsk.ops.gpus import inventory

        if lease:
            from rsk.ops.leases import gpus as lease_gpus

            return lease_gpus(pin.target, pin.project, lease)
        return inventory(pin.target)

    @server.tool(
        description="Open a lease: one held allocation whose GPUs your steps share (launch with lease=NAME). It is "
        "decided like a launch (status pending: tell the human) and charged at worst case for the whole allocation.",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=True),
    )
    @guarded
    def lease_open(
        name: Annotated[str, Field(description="The lease's name (A-Z a-z 0-9 . _ -).")],
        nodes: Nodes = None, gpus: Gpus = None, cpus: Cpus = None, mem: Mem = None,
        time: Annotated[str | int | None, Field(description='How long to hold it: 30 (minutes), "2:00:00".')] = None,
        partition: Text = None, request_id: RequestId = None,
        drain_min: Annotated[int | None, Field(ge=0, strict=True, description="Start no step in the last MINUTES.")]
        = None,
        overrun: Annotated[Literal["refuse", "clip"] | None, Field(description="A step longer than the time left.")]
        = None,
    ) -> LaunchReply:  # fmt: skip
        from rsk.ops.launch import requester
        from rsk.ops.leases import LeaseSpec, open_lease, open_request

        spec = LeaseSpec(name=name, nodes=nodes, gpus=gpus, cpus=cpus, mem=mem, time=_minutes(time),
                         partition=partition, request_id=request_id, drain_min=drain_min, overrun=overrun)  # fmt: skip
        request = open_request(spec, pin.spending(), f"mcp: {requester()}", pin.target)
        return open_lease(spec, request, _reply)

    @server.tool(description="The project's leases: state, nodes, time left, steps queued and running.",
                 annotations=READ)  # fmt: skip
    @guarded
    def lease_status(name: Annotated[str | None, Field(description="One lease (default: all).")] = None) -> LeaseList:
        from rsk.ops.leases import status as get_lease_status

        return get_lease_status(pin.target, pin.project, name)

    @server.tool(
        description="Close a lease: its queued steps are cancelled, its allocation ends (running steps with it) and "
        "its charge settles to what it held.",
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=True),
    )
    @guarded
    def lease_close(name: Annotated[str, Field(description="The lease's name.")]) -> CloseReport:
        from rsk.ops.launch import requester
        from rsk.ops.leases import close

        return close(pin.target, pin.project, name, f"mcp: {requester()}")

    def _reply(request: Request, snap: CodeSnapshot | None = None) -> LaunchReply:
        pin.spending()
        try:
            result = do_launch(pin.target, request, code=snap)
        except PendingApproval as pending:
            card = str(pending.details.get("card_id"))
            why = [str(w) for w in cast(list[object], pending.details.get("closest_why") or [])]
            said = [str(w) for w in cast(list[object], pending.details.get("warnings") or [])]
            return LaunchReply(status="pending", card_id=card, request_id=request.request_id, message=pending.message,
                               tell_human=str(pending.details.get("tell_human") or pending.hint or ""),
                               next=TOOLS.wait(card=card),
                               closest_grant=cast(str | None, pending.details.get("closest_grant")),
                               closest_why=why, warnings=said)  # fmt: skip
        return LaunchReply(status=result.status, job_id=result.job_id, launch=result.brief(SUMMARY_ROWS),
                           request_id=result.request_id)  # fmt: skip

    @server.tool(
        description="Plan a launch on the cluster and say how the ledger would decide now. Files no card, submits "
        "nothing. Give exactly one of command, script or tasks.",
        annotations=READ,
    )
    @guarded
    def plan(
        command: Command = None, script: Script = None, tasks: Tasks = None, request_id: RequestId = None,
        gpus: Gpus = None, nodes: Nodes = None, cpus: Cpus = None, mem: Mem = None, time: Time = None,
        partition: Text = None, account: Text = None, qos: Text = None, name: Text = None, workdir: Text = None,
        path: Text = None, env: Env = None, code: Code = None, exclude: Exclude = None, lease: LeaseName = None,
        budget: Budget = None, signal_before: SignalBefore = None, max_links: MaxLinks = None,
        max_running: MaxRunning = None,
    ) -> PlanReport:  # fmt: skip
        request, snap = prepare(dict(locals()))
        return preview(pin.target, request, snap).brief(SUMMARY_ROWS)

    @server.tool(
        description="Launch: plan on the cluster, decide from the ledger, submit exactly once. status pending means "
        "a human must approve: pass tell_human on to them and call wait with card_id. Retrying with the same "
        "request_id never submits twice. Give exactly one of command, script or tasks.",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=True),
    )
    @guarded
    def launch(
        command: Command = None, script: Script = None, tasks: Tasks = None, request_id: RequestId = None,
        gpus: Gpus = None, nodes: Nodes = None, cpus: Cpus = None, mem: Mem = None, time: Time = None,
        partition: Text = None, account: Text = None, qos: Text = None, name: Text = None, workdir: Text = None,
        path: Text = None, env: Env = None, code: Code = None, exclude: Exclude = None, lease: LeaseName = None,
        budget: Budget = None, signal_before: SignalBefore = None, max_links: MaxLinks = None,
        max_running: MaxRunning = None,
    ) -> LaunchReply:  # fmt: skip
        request, snap = prepare(dict(locals()))
        return _reply(request, snap)

    @server.tool(
        description="Launch again the tasks of a batch or workflow that did not succeed: the named tasks, or with "
        "failed every failed, timed-out, cancelled or skipped one, with the tasks they skipped. The attempt is a "
        "request of its own (BATCH.a2, ...) decided like any launch; tasks that succeeded do not run again. It runs "
        "in the batch's RSK_WORK_DIR, on the batch's code snapshot unless code names a directory to send (a fix).",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=True),
    )
    @guarded
    def retry(
        batch: Annotated[str, Field(description="The batch or workflow: its first request id.")],
        tasks: Annotated[list[str] | None, Field(description="Task keys to retry.")] = None,
        failed: Annotated[bool, Field(description="Retry every task that ended without success.")] = False,
        request_id: RequestId = None,
        code: Code = None,
        exclude: Exclude = None,
    ) -> LaunchReply:
        from rsk.local.paths import check_token
        from rsk.ops.launch import requester
        from rsk.ops.retry import attempt_request
        from rsk.ops.status import status
        from rsk.request.code import snapshot

        check_token("batch", batch)
        jobs = status(pin.target, pin.project).jobs
        request, replay = attempt_request(pin.project, batch, jobs, list(tasks or []), failed, request_id,
                                          f"mcp: {requester()}")  # fmt: skip
        fix = None if replay else code  # the same retry again answers the attempt it made
        return _reply(request, snapshot(_own_path("code", fix), list(exclude or [])) if fix is not None else None)

    @server.tool(
        description="Add links to a chain that stopped short of success (yielded, time limit, budget spent) or was "
        "cancelled, up to "
        "a new total budget; only the extra is decided, like any launch. The links share the chain's RSK_WORK_DIR, "
        "on the chain's code snapshot unless code names a directory to send (a fix).",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=True),
    )
    @guarded
    def extend(
        request_id: Annotated[str, Field(description="The chain: its first request id.")],
        budget: Annotated[
            str,
            Field(
                description="The chain's new total run time (Slurm time, 5-00:00:00): each "
                "link that started counts its whole time limit; the rest is the extension, in "
                "whole links."
            ),
        ],
        max_links: Annotated[
            int | None, Field(ge=1, strict=True, description="Refuse an extension that needs more links.")
        ] = None,
        code: Code = None,
        exclude: Exclude = None,
    ) -> LaunchReply:
        from rsk.local.paths import check_token
        from rsk.ops.launch import requester
        from rsk.ops.retry import extension_request
        from rsk.ops.status import status
        from rsk.request.chain import MAX_LINKS
        from rsk.request.code import snapshot
        from rsk.request.units import parse_seconds

        jobs = status(pin.target, pin.project).jobs
        minutes = parse_seconds(budget) // 60  # a budget never grows: whole minutes, rounded down
        request, replay = extension_request(pin.project, check_token("request id", request_id), jobs, minutes, None,
                                            f"mcp: {requester()}", max_links=max_links or MAX_LINKS,
                                            new_code=code is not None)  # fmt: skip
        fix = None if replay else code  # the same extend again answers the extension it made
        return _reply(request, snapshot(_own_path("code", fix), list(exclude or [])) if fix is not None else None)

    @server.tool(
        description="Wait for one thing: a card (c-...; once approved, its launch goes on), a job, a request or a "
        "batch. Returns done (all_succeeded says whether every job succeeded), blocked, running (call again) or "
        "pending (as launch: card_id, tell_human for the human, next); a chain's jobs come with chain (links done "
        f"of all, run time used of its budget). Never blocks longer than {pin.max_wait:g} s.",
        annotations=READ,
    )
    @guarded
    def wait(
        card: Annotated[str | None, Field(description="A card id, c-...")] = None,
        job: Annotated[str | None, Field(description="A job id.")] = None,
        request_id: Annotated[str | None, Field(description="Every job of this request.")] = None,
        batch: Annotated[str | None, Field(description="Every task of this batch (its request id).")] = None,
        timeout: Annotated[float | None, Field(description=f"Seconds; at most {pin.max_wait:g}.")] = None,
        state: States = None,
        summary: Summary = None,
    ) -> WaitResult:
        from rsk.local.paths import check_token
        from rsk.ops.wait import wait_card, wait_jobs

        if len([x for x in (card, job, request_id, batch) if x]) != 1:
            raise UsageError("wait for one thing: card, job, request_id or batch")
        if card:
            return wait_card(check_token("card id", card), pin.project, bounded(timeout), voice=TOOLS,
                             states=list(state or []), summary=summary)  # fmt: skip
        rid = request_id or batch
        return wait_jobs(pin.target, pin.project, job=job or None,
                         request_id=check_token("request id", rid) if rid else None,
                         timeout=bounded(timeout), voice=TOOLS, states=list(state or []),
                         summary=summary)  # fmt: skip

    @server.tool(
        description="State of the project's rsk jobs, newest last. counts has every job selected (the batch's, the "
        "request's, the project's), however few are listed; omitted says how many are not.",
        annotations=READ,
    )
    @guarded
    def status(
        job: Annotated[str | None, Field(description="Only this job.")] = None,
        request_id: Annotated[str | None, Field(description="Only this request's (or batch's) jobs.")] = None,
        batch: Annotated[str | None, Field(description="Only this batch's tasks (its request id).")] = None,
        active: Annotated[bool, Field(description="Only pending and running jobs.")] = False,
        state: States = None,
        summary: Summary = None,
        limit: Annotated[int, Field(ge=0, description="At most this many, newest (0: all).")] = 50,
    ) -> Status:
        from rsk.ops.status import filter_jobs
        from rsk.ops.status import status as get_status

        if request_id and batch:
            raise UsageError("give request_id or batch, not both")
        st = get_status(pin.target, pin.project)
        return filter_jobs(st, job=job, request_id=batch or request_id, active=active, states=list(state or []),
                           summary=summary, limit=limit)  # fmt: skip

    @server.tool(
        description="What changed since a cursor (journal events, job state changes); blocks up to `wait` seconds "
        "for a change. The first call (no cursor) returns a summary and a cursor. A cursor rsk no longer keeps "
        "gives reset=true and a fresh cursor.",
        annotations=READ,
    )
    @guarded
    def events(
        after: Annotated[str | None, Field(description="The cursor from the previous call.")] = None,
        wait: Annotated[
            float, Field(ge=0, description=f"Block up to this many seconds (at most {pin.max_wait:g}).")
        ] = 0,
    ) -> Events:
        from rsk.ops.events import events as get_events

        return get_events(pin.target, pin.project, after=after, wait=min(wait, pin.max_wait), reset_expired=True)

    @server.tool(
        description="A bounded tail of a job's stdout or stderr. Pass the returned size as `after` next time to get "
        "only what is new.",
        annotations=READ,
    )
    @guarded
    def logs(
        job: Annotated[str, Field(description="The job id.")],
        stream: Literal["stdout", "stderr"] = "stdout",
        lines: Annotated[int, Field(ge=0, description="The last N lines (0: all that fit).")] = 200,
        max_bytes: Annotated[int, Field(ge=1, le=1024 * 1024, description="At most this many bytes.")] = 64 * 1024,
        after: Annotated[int | None, Field(ge=0, description="Only bytes after this offset (a previous size).")] = None,
    ) -> LogTail:
        from rsk.ops.logs import logs as read_logs

        return read_logs(pin.target, pin.project, job, stream=stream, max_bytes=max_bytes,
                         lines=0 if after is not None else lines, after=after, voice=TOOLS)  # fmt: skip

    @server.tool(
        description="logs for every job of a request, a chain or a batch, in order and labelled: a chain's links by "
        "number (its extensions' too), a batch's tasks (each its latest attempt); a job that never ran is listed "
        "with its state. Give request_id or batch.",
        annotations=READ,
    )
    @guarded
    def logs_request(
        request_id: Annotated[str | None, Field(description="The request (a chain's first request id).")] = None,
        batch: Annotated[str | None, Field(description="The batch (its request id).")] = None,
        stream: Literal["stdout", "stderr"] = "stdout",
        lines: Annotated[int, Field(ge=0, description="The last N lines of each (0: all that fit).")] = 200,
    ) -> LogSet:
        from rsk.ops.logs import request_logs

        if (request_id is None) == (batch is None):
            raise UsageError("give request_id or batch", "a single job's: the logs tool")
        return request_logs(pin.target, pin.project, request_id or batch or "", stream, lines=lines, voice=TOOLS)

    @server.tool(
        description="Cancel a job, a request or a batch this project launched (and only those).",
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=True),
    )
    @guarded
    def cancel(
        job: Annotated[str | None, Field(description="A job id.")] = None,
        request_id: Annotated[str | None, Field(description="A request's job.")] = None,
        batch: Annotated[str | None, Field(description="Every task of a batch.")] = None,
    ) -> CancelReport:
        from rsk.ops.cancel import cancel as do_cancel
        from rsk.ops.cancel import refused

        report = do_cancel(pin.target, pin.project, job=job, request_id=request_id, batch=batch).brief(SUMMARY_ROWS)
        refused(report)  # keeps every job it could not cancel
        return report

    @server.tool(
        description="The project's attempt journal on the cluster (intent, outcome, ...), its seals checked.",
        annotations=READ,
    )
    @guarded
    def journal(
        after: Annotated[int, Field(ge=0, description="Only lines after this one (a previous cursor).")] = 0,
        limit: Annotated[
            int,
            Field(ge=1, le=5000, description="At most this many events; `more`: call again with `after` = the cursor."),
        ] = 200,
    ) -> Journal:
        from rsk.ops.journal import journal as read_journal

        return read_journal(pin.target, pin.project, after=after, limit=limit)

    @server.tool(
        description="The project's approval cards (read only: a human approves or denies them in a terminal).",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    @guarded
    def approvals(
        include_decided: Annotated[bool, Field(description="Also approved, denied and withdrawn cards.")] = False,
    ) -> CardList:
        from rsk.ledger.cards import list_cards
        from rsk.ledger.store import Store

        return CardList(project=pin.project, cards=list_cards(Store(pin.project), include_decided))

    @server.tool(
        description="Withdraw a card your launch filed, when the work is no longer needed: it no longer waits for "
        "the human, and nothing was spent.",
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=False, open_world_hint=False),
    )
    @guarded
    def withdraw(card: Annotated[str, Field(description="The card id, c-...")]) -> Decision:
        from rsk.ledger.cards import store_of_card
        from rsk.ledger.cards import withdraw as do_withdraw
        from rsk.local.paths import check_token
        from rsk.ops.launch import requester

        store = store_of_card(check_token("card id", card), pin.project)
        return Decision.of(store.project, do_withdraw(store, card, f"mcp: {requester()}"))

    @server.tool(
        description="Bring files back from a job's directory (bounded, resumable, never outside it) into a local "
        "directory.",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=True),
    )
    @guarded
    def fetch(
        job: Annotated[str, Field(description="The job id.")],
        paths: Annotated[list[str], Field(min_length=1, description="Paths relative to the job's directory.")],
        to: Annotated[str | None, Field(description="Local directory (default: rsk-results/JOB here, which code "
                                        "snapshots leave out).")] = None,
        max_bytes: Annotated[int, Field(ge=1, description="Stop after this many bytes.")] = 1024**3,
    ) -> FetchReport:  # fmt: skip
        from rsk.ops.fetch import default_dest
        from rsk.ops.fetch import fetch as do_fetch

        dest = _own_path("fetch", to or str(default_dest(job)))
        return do_fetch(pin.target, pin.project, job, paths, dest, max_bytes=max_bytes)

    @server.tool(
        description="fetch for every task of a batch: each task's files (its latest attempt's) into to/KEY/; what "
        "a task lacks is listed, not an error.",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=True),
    )
    @guarded
    def fetch_batch(
        batch: Annotated[str, Field(description="The batch (its request id).")],
        paths: Annotated[list[str], Field(min_length=1, description="Paths relative to each task's directory.")],
        to: Annotated[str | None, Field(description="Local directory (default: rsk-results/BATCH here).")] = None,
        max_bytes: Annotated[int, Field(ge=1, description="Stop after this many bytes in all.")] = 1024**3,
    ) -> BatchFetchReport:
        from rsk.local.paths import check_token
        from rsk.ops.fetch import default_dest, fetch_batch

        dest = _own_path("fetch", to or str(default_dest(check_token("batch", batch))))
        return fetch_batch(pin.target, pin.project, batch, paths, dest, max_bytes=max_bytes).brief(SUMMARY_ROWS)

    @server.tool(
        description="fetch_result for every task of a batch: each task's published result (its latest attempt's) "
        "into to/KEY, each checked against its manifest; tasks without one are listed in without. A result "
        "already in to/KEY is left as it is, so calling again finishes a cut call.",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=True),
    )
    @guarded
    def fetch_batch_result(
        batch: Annotated[str, Field(description="The batch (its request id).")],
        to: Annotated[str | None, Field(description="Local directory (default: rsk-results/BATCH here).")] = None,
    ) -> BatchResultReport:
        from rsk.local.paths import check_token
        from rsk.ops.fetch import default_dest, fetch_batch_results

        dest = _own_path("fetch", to or str(default_dest(check_token("batch", batch))))
        return fetch_batch_results(pin.target, pin.project, batch, dest).brief(SUMMARY_ROWS)

    @server.tool(
        description="Bring back a job's published result (what it wrote under $RSK_OUT and exited 0), every file "
        "checked against its manifest; it appears in `to` (which must not exist) whole, or not at all. partial: "
        "what a job that did not succeed left, labelled so. Give job, or request_id for a request's one job or a "
        "chain's last link that ran (a batch's: fetch_batch_result).",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=True),
    )
    @guarded
    def fetch_result(
        job: Annotated[str | None, Field(description="The job id.")] = None,
        to: Annotated[
            str | None, Field(description="Local directory (default: rsk-results/JOB, or rsk-results/REQUEST, here).")
        ] = None,
        partial: Annotated[bool, Field(description="The stage of a job that did not succeed.")] = False,
        request_id: Annotated[
            str | None, Field(description="Instead of job: the request's one job, or a chain's last link that ran.")
        ] = None,
    ) -> ResultReport:
        from rsk.errors import UsageError
        from rsk.ops.fetch import default_dest, result_job
        from rsk.ops.fetch import fetch_result as do_fetch_result

        if (job is None) == (request_id is None):
            raise UsageError("give job or request_id", "request_id: a chain's result; a batch's: fetch_batch_result")
        named = job or request_id or ""  # a request's result is named for it (a chain's: for the chain)
        job = job if job is not None else result_job(pin.target, pin.project, request_id or "")
        dest = _own_path("fetch", to or str(default_dest(named)))
        return do_fetch_result(pin.target, pin.project, job, dest, partial=partial)

    @server.prompt(name="rsk-rules", description="The rules for running work through rsk (the rsk skill).")
    def rules() -> str:
        return (data_dir("skills") / "rsk" / "SKILL.md").read_text(encoding="utf-8")

    _strict(server)
    return server


def _strict(server: MCPServer) -> None:
    """An argument a tool does not take is refused with the names it does take, never dropped: a `status`
    called with `batch` must not answer for every job as if it had read the batch. The schemas say so too
    (additionalProperties false)."""
    for tool in server._tool_manager.list_tools():  # the SDK offers no switch for it
        model = tool.fn_metadata.arg_model
        model.model_config["extra"] = "forbid"
        model.model_rebuild(force=True)
        tool.parameters = model.model_json_schema(by_alias=True)


def serve(pin: Pin, stdio: tuple[TextIOBase, TextIOBase] | None = None) -> None:
    """Serve on stdin and stdout until the client closes them; in the broker, on the caller's (`stdio`)."""
    server = build(pin)
    if stdio is None:
        server.run("stdio")
        return
    import anyio
    from mcp.server.stdio import stdio_server

    reader, writer = stdio

    async def over_the_socket() -> None:
        async with stdio_server(stdin=anyio.wrap_file(reader), stdout=anyio.wrap_file(writer)) as (read, write):  # type: ignore[arg-type]
            # what MCPServer.run_stdio_async does, with the caller's streams instead of this process's
            low = server._lowlevel_server
            await low.run(read, write, low.create_initialization_options())

    anyio.run(over_the_socket)
