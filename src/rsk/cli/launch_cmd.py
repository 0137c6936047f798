"""rsk launch, plan, wait and init: the agent's way to run work."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rsk.cli.common import (
    AllTasksOpt,
    JsonOpt,
    ProjectOpt,
    StateOpt,
    SummaryOpt,
    TargetOpt,
    err,
    out,
    print_json,
    resolve_target,
)
from rsk.commands import help_for

if TYPE_CHECKING:
    from collections.abc import Callable

    from rsk.ops.launch import LaunchResult
    from rsk.request.code import CodeSnapshot
    from rsk.wire.protocol import Request

WaitOpt = Annotated[
    float | None,
    typer.Option(
        "--wait",
        min=0,
        help="If a human must approve, block up to SECONDS for the decision (0: no limit), then go on. "
        "--wait takes seconds everywhere (launch, events, logs --follow --timeout).",
        metavar="SECONDS",
    ),
]
CodeOpt = Annotated[
    Path | None,
    typer.Option(
        "--code",
        help="Send a snapshot of this directory (its .gitignore respected; only new or changed files travel); "
        "the job runs in a checked copy of it, and the plan binds its digest.",
    ),
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", help="With --json, also the whole plan (rsk plan --json always prints it).")
]
ExcludeOpt = Annotated[
    list[str] | None, typer.Option("--exclude", help="With --code: leave out files matching this glob (repeatable).")
]


def _snapshot(code: Path | None, exclude: list[str] | None) -> "CodeSnapshot | None":
    if code is None:
        return None
    from rsk.local import caller
    from rsk.request.code import snapshot

    here = caller.opens_paths()  # in the broker: the copy of what the client sent, never the caller's path
    shown = None if here else caller.path(str(code))
    return snapshot(caller.local_dir(code), list(exclude or []), git=here, shown=shown)


def register(app: typer.Typer) -> None:
    app.command(
        "launch",
        context_settings={"allow_interspersed_args": False},
        help=help_for(
            "launch",
            "Example: rsk launch --target lab --gpus 1 --time 2:00:00 --request-id train-1 -- python train.py\n\n"
            "Exit codes: 0 submitted (or replayed), 3 denied, 4 waiting for a human (card id printed), "
            "5 plan changed / request id conflict; every code and what to do: the rsk skill's "
            "references/exit-codes.md.",
        ),
    )(launch)
    app.command(
        "plan",
        context_settings={"allow_interspersed_args": False},
        help=help_for(
            "plan",
            "Takes launch's options. Prints the plan, its worst-case cost, the cluster's verdict and start "
            "estimate, and how the ledger would decide now (which grant covers it, or why none does). "
            "Exit codes: 0 planned, 3 the cluster's policy refuses, 5 the request id belongs to another plan.",
        ),
    )(launch)
    app.command("wait", help=help_for("wait"))(wait)
    app.command(
        "retry",
        help=help_for(
            "retry",
            "Example: rsk retry --batch pipe-1 --failed. The attempt is its own request (pipe-1.a2, ...), planned "
            "and decided like any launch (a card unless a grant covers it); tasks that succeeded are needs met "
            "and do not run again. The attempt runs in the batch's RSK_WORK_DIR (what earlier tasks wrote is there), "
            "on the batch's code unless --code sends a fix. Exit codes as for launch; 2 names a task that cannot be "
            "retried.",
        ),
    )(retry)
    app.command(
        "extend",
        help=help_for(
            "extend",
            "Example: rsk extend --request-id run-7 --budget 5-00:00:00. Only a chain that stopped short of success "
            "(yielded, time limit, budget spent) or was cancelled goes on; only the extra run time is planned and "
            "decided (a card "
            "unless a grant covers it). The new links share the chain's RSK_WORK_DIR and go on numbering it; "
            "--code DIR sends a fixed program for them (a chain whose links did not yield goes on from its "
            "checkpoints).",
        ),
    )(extend)
    app.command("init", help=help_for("init"))(init)


def launch(
    ctx: typer.Context,
    command: Annotated[list[str] | None, typer.Argument(help="The command and its arguments, after --.")] = None,
    target: TargetOpt = None,
    project: ProjectOpt = None,
    request_id: Annotated[
        str | None,
        typer.Option("--request-id", "-r", help="Idempotency key: the same id never submits twice. Default: new."),
    ] = None,
    partition: Annotated[str | None, typer.Option(help="Slurm partition (default: the cluster's).")] = None,
    account: Annotated[str | None, typer.Option(help="Slurm account.")] = None,
    qos: Annotated[str | None, typer.Option(help="Slurm QOS.")] = None,
    gpus: Annotated[int | None, typer.Option(min=0, help="GPUs per node.")] = None,
    nodes: Annotated[int | None, typer.Option(min=1, help="Nodes (default 1).")] = None,
    cpus: Annotated[int | None, typer.Option(min=1, help="CPUs per node (default 1).")] = None,
    mem: Annotated[str | None, typer.Option(help="Memory per node: 4096, 512M, 16G (default: policy's).")] = None,
    time: Annotated[
        str | None, typer.Option("--time", help="Time limit, Slurm's form: 30 (min), 10:00 (M:S), 2:00:00, 1-00:00:00.")
    ] = None,
    name: Annotated[str | None, typer.Option(help="Job name (A-Z a-z 0-9 . _ -).")] = None,
    workdir: Annotated[str | None, typer.Option(help="Working directory on the cluster (absolute or ~/..).")] = None,
    path: Annotated[
        str | None,
        typer.Option("--path", help="PATH of the job (default /usr/local/bin:/usr/bin:/bin); bound into the plan."),
    ] = None,
    env: Annotated[
        list[str] | None, typer.Option("--env", "-e", help="NAME=VALUE passed to the job (repeatable).")
    ] = None,
    script: Annotated[
        Path | None,
        typer.Option("--script", help="Submit this batch script; its #SBATCH resource lines join the plan."),
    ] = None,
    code: CodeOpt = None,
    exclude: ExcludeOpt = None,
    tasks: Annotated[
        Path | None,
        typer.Option(
            "--tasks",
            help='A batch: JSON lines {"key": K, "argv": [...] | "script": S, "env": {...}, "gpus"/"time"/...}. '
            "One plan, one approval, one remote call; each task its own job. A workflow: tasks with "
            '"needs": ["prep"] or [{"task": "train", "on": "ended"}] run after those tasks succeed (or end), '
            "as Slurm dependencies: no process of yours has to stay alive; a task whose need failed is skipped, "
            "and `rsk retry --batch B --failed` runs those again. Task fields: key, argv or script, env, gpus, "
            "cpus, mem, nodes, time, needs. A file whose one "
            'line has "budget" (and "time", optionally "signal_before", "max_links") is a chain, as --budget is; '
            'a chain is never one task among others (the rsk skill, section "Plan, then launch").',
        ),
    ] = None,
    lease: Annotated[
        str | None,
        typer.Option(
            "--lease",
            help="Queue this as a step of the project's lease NAME: started by its controller within seconds, with "
            "its own GPUs, on one node of the lease; no new charge (deny rules still apply). A step takes "
            "--cpus and --mem from the lease's node too (default 1 CPU and the policy's default memory): give "
            "each its share, or steps run one at a time (rsk warns).",
            metavar="NAME",
        ),
    ] = None,
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget",
            help="Long work: run the command as a chain of links of --time each, up to this much run time in all "
            "(3-00:00:00). All links are queued at once, one approval; a link continues the chain when the command "
            "exits 75 or is signalled at its limit (SIGUSR1 --signal-before it), and ends it otherwise "
            "(RSK_LINK, RSK_LINKS, RSK_RUN_TIME say where it is; `rsk extend` adds links; the rsk skill, section "
            '"Plan, then launch").',
        ),
    ] = None,
    signal_before: Annotated[
        str | None,
        typer.Option(
            "--signal-before",
            help="A chain: SIGUSR1 this long before each link's limit, in Slurm's form (10:00 = 10 min, 0:30 = 30 s, "
            "a bare 30 = 30 min). Default: 10 min, or half a link under 20 min. Slurm may signal up to a minute early.",
        ),
    ] = None,
    max_links: Annotated[
        int | None, typer.Option("--max-links", min=1, help="A chain: refuse a budget that needs more links.")
    ] = None,
    max_running: Annotated[
        int | None,
        typer.Option(
            "--max-running",
            min=1,
            help="A batch (--tasks): at most this many of its tasks run at once (Slurm's array throttle); the plan "
            "binds it, the card shows it, the worst case is still every task's. Up to 10,000 tasks are one launch "
            "and one card; the cluster's cap on active jobs counts only what can run.",
            metavar="K",
        ),
    ] = None,
    wait: WaitOpt = None,
    verbose: VerboseOpt = False,
    every: AllTasksOpt = False,
    json_out: JsonOpt = False,
) -> None:
    from rsk.errors import UsageError
    from rsk.local import caller
    from rsk.local.project import chosen_project
    from rsk.ops.launch import launch as do_launch
    from rsk.ops.launch import requester
    from rsk.request.spec import LaunchSpec, build_request
    from rsk.request.tasks import TaskFile, read_tasks

    def read(option: str, file: Path) -> str:
        from rsk.local.nolink import Missing, read_file

        try:
            sent = caller.sent_text(file)  # another user's, through the broker: what its client read
            return sent if sent is not None else read_file(caller.path(str(file))).decode("utf-8")
        except Missing:
            raise UsageError(f"cannot read {option} {file}: it does not exist") from None
        except UnicodeDecodeError as exc:
            hint = "rsk binds the plan to text a human can read: save the file as UTF-8"
            raise UsageError(f"{option} {file} is not UTF-8 text (byte {exc.start})", hint) from None
        except OSError as exc:
            raise UsageError(f"cannot read {option} {file}: {exc}") from exc

    script_text = read("--script", script) if script is not None else None
    task_file = read_tasks(read("--tasks", tasks), str(tasks)) if tasks is not None else TaskFile([])
    spec = LaunchSpec(
        argv=list(command or []), script=script_text, tasks=task_file.tasks, chain_line=task_file.chain,
        request_id=request_id, name=name,
        workdir=workdir, path=path, partition=partition, account=account, qos=qos, nodes=nodes, cpus=cpus,
        gpus=gpus, mem=mem, time=time, env=list(env or []), lease=lease, budget=budget, signal_before=signal_before,
        max_links=max_links, max_running=max_running,
    )  # fmt: skip
    request = build_request(spec, chosen_project(project), requester())
    progress = _progress(json_out)
    target_name = resolve_target(target)
    snap = _snapshot(code, exclude)
    if ctx.info_name == "plan":
        _print_plan(target_name, request, json_out, snap, every)
        return
    result = do_launch(target_name, request, wait=wait, progress=progress, code=snap)
    for line in result.warnings:  # the core's own (a step that leaves its lease's GPUs idle)
        err().print(f"rsk: warning: {line}")
    _print_result(result, json_out, verbose, every)


def _progress(json_out: bool) -> "Callable[[str], None] | None":
    """Where a long command says what it is doing: stderr, unless the answer is JSON."""
    console = err()
    return None if json_out else (lambda msg: console.print(f"rsk: {msg}"))


def _print_result(result: "LaunchResult", json_out: bool, verbose: bool, every: bool) -> None:
    from rsk.local.project import scope
    from rsk.wire.states import SUMMARY_ROWS

    if json_out:  # a big batch's first tasks unless --all: an agent's answer stays small at 10,000 tasks
        print_json(result.brief(0 if every else SUMMARY_ROWS, plan=verbose))
        return
    o = out()
    verb = "already submitted:" if result.status == "replayed" else "submitted"
    chain = result.plan is not None and result.plan.is_chain
    if chain:
        o.print(f"{verb} chain {result.request_id}: up to {len(result.tasks)} links on {result.target}")
    elif result.tasks:
        what = "workflow" if result.plan is not None and result.plan.is_workflow else "batch"
        o.print(f"{verb} {what} {result.request_id}: {len(result.tasks)} tasks on {result.target}")
        for t in result.tasks[:10]:
            o.print(f"  {t.task:<24} job {t.job_id}")
        if len(result.tasks) > 10:
            o.print(f"  ... and {len(result.tasks) - 10} more (--json --all lists all)")
    elif result.plan is not None and result.plan.is_step:
        o.print(f"{verb} step {result.job_id} into lease {result.plan.placement.lease} on {result.target}")
    else:
        o.print(f"{verb} job {result.job_id} on {result.target}")
    o.print(f"  project     {result.project}")
    o.print(f"  request id  {result.request_id}")
    o.print(f"  plan        {result.plan_hash}")
    how = f"{result.allowed_by.kind} {result.allowed_by.id}"
    if result.allowed_by.kind == "replay":
        how = f"nothing new: the {result.allowed_by.id} already knows this request's job(s)"
    if result.allowed_by.kind == "grant":
        how += f" (reserved {result.gpu_hours:.2f} GPU-h, {result.cpu_hours:.2f} CPU-h at worst until it ends)"
    o.print(f"  allowed by  {how}")
    if result.note:
        o.print(f"  note        {result.note}")
    if chain:
        o.print(f"next: rsk wait --request-id {result.request_id}{scope(result.project, result.target)}")
    elif result.tasks:
        batch = result.request_id.rsplit(".a", 1)[0] if ".a" in result.request_id else result.request_id
        o.print(f"next: rsk wait --batch {batch}{scope(result.project, result.target)}")
    else:
        o.print(f"next: rsk wait {result.job_id}{scope(result.project, result.target)}")


def retry(
    batch: Annotated[str, typer.Option("--batch", "-b", help="The batch or workflow (its first request id).")],
    task: Annotated[
        list[str] | None,
        typer.Option("--task", help="Retry this task (repeatable); what it skipped comes along."),
    ] = None,
    failed: Annotated[
        bool, typer.Option("--failed", help="Retry every failed, timed-out, cancelled or skipped task.")
    ] = False,
    request_id: Annotated[
        str | None, typer.Option("--request-id", "-r", help="The attempt's own request id. Default: BATCH.aN.")
    ] = None,
    code: Annotated[
        Path | None,
        typer.Option(
            "--code",
            help="Run the attempt on a new snapshot of this directory (after a fix). Without it, the attempt runs "
            "the snapshot the batch was launched with.",
        ),
    ] = None,
    exclude: ExcludeOpt = None,
    target: TargetOpt = None,
    project: ProjectOpt = None,
    wait: WaitOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
    every: AllTasksOpt = False,
) -> None:
    import shlex

    from rsk.local.project import chosen_project, scope
    from rsk.ops.launch import requester
    from rsk.ops.retry import retry as do_retry

    where, chosen = resolve_target(target), chosen_project(project)
    words = ["rsk", "retry", "--batch", batch, *(w for k in task or [] for w in ("--task", k))]
    words += [*(["--failed"] if failed else []), *(["--code", str(code)] if code is not None else [])]
    words += [*(w for x in exclude or [] for w in ("--exclude", x)), *(["-r", request_id] if request_id else [])]
    again = shlex.join(words) + scope(chosen, where)  # a pending attempt's hint repeats the whole command
    result = do_retry(where, chosen, batch, named=list(task or []), failed=failed, request_id=request_id,
                      requester=requester(), wait=wait, progress=_progress(json_out), code=_snapshot(code, exclude),
                      again=again)  # fmt: skip
    _print_result(result, json_out, verbose, every)


def extend(
    request_id: Annotated[str, typer.Option("--request-id", "-r", help="The chain (its first request id).")],
    budget: Annotated[
        str,
        typer.Option(
            "--budget",
            help="The chain's new total run time (3-00:00:00): each link that started counts its whole time limit "
            "(a link cancelled before it started, nothing); the rest is the extension, in whole links.",
        ),
    ],
    max_links: Annotated[
        int | None, typer.Option("--max-links", min=1, help="Refuse an extension that needs more links.")
    ] = None,
    code: Annotated[
        Path | None,
        typer.Option(
            "--code",
            help="Run the new links on a new snapshot of this directory (a fix: the card shows its digest and "
            "files), still in the chain's RSK_WORK_DIR with its checkpoints. Without it, they run the snapshot "
            "the chain's last links ran.",
        ),
    ] = None,
    exclude: ExcludeOpt = None,
    target: TargetOpt = None,
    project: ProjectOpt = None,
    wait: WaitOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
    every: AllTasksOpt = False,
) -> None:
    import shlex

    from rsk.local.paths import check_token
    from rsk.local.project import chosen_project, scope
    from rsk.ops.launch import requester
    from rsk.ops.retry import extend as do_extend
    from rsk.request.chain import MAX_LINKS
    from rsk.request.units import parse_seconds

    where, chosen = resolve_target(target), chosen_project(project)
    words = ["rsk", "extend", "-r", request_id, "--budget", budget]
    words += [*(["--max-links", str(max_links)] if max_links else []), *(["--code", str(code)] if code else [])]
    words += [w for x in exclude or [] for w in ("--exclude", x)]
    result = do_extend(where, chosen, check_token("request id", request_id),
                       budget_min=parse_seconds(budget) // 60, request_id=None, requester=requester(),
                       max_links=max_links or MAX_LINKS, wait=wait, progress=_progress(json_out),
                       code=_snapshot(code, exclude), again=shlex.join(words) + scope(chosen, where))  # fmt: skip
    _print_result(result, json_out, verbose, every)


def _print_plan(target: str, request: "Request", json_out: bool, code: "CodeSnapshot | None", every: bool) -> None:
    from rsk.local.inert import inert
    from rsk.ops.launch import preview
    from rsk.wire.states import SUMMARY_ROWS

    report = preview(target, request, code)
    for line in report.warnings:  # the core's own (a step that leaves its lease's GPUs idle)
        err().print(f"rsk: warning: {line}")
    if json_out:  # the plan's first tasks unless --all (the hash binds them all; the card shows them all)
        print_json(report if every else report.brief(SUMMARY_ROWS))
        return
    o = out()
    p = report.plan
    o.print(f"plan {report.plan_hash} on {report.target} (project {report.project}, request {report.request_id})")
    o.print(f"  runs          {inert(p.command)}")
    if report.code_count:  # the snapshot --code sends, as the card lists it (--json: code_files)
        names = ", ".join(inert(f) for f in report.code_files[:10])
        more = f" and {report.code_count - 10} more" if report.code_count > 10 else ""
        o.print(f"  code          {report.code_count} file(s): {names}{more}")
    big = p.largest
    o.print(
        f"  per job       {big.nodes} node(s), {big.cpus} CPU/node, {big.mem_mb} MB/node, "
        f"{big.gpus} GPU/node, {big.time_min} min"
    )
    o.print(
        f"  worst case    {report.gpu_hours_worst:.2f} GPU-h, {report.cpu_hours_worst:.2f} CPU-h, {report.jobs} job(s)"
        + (f", at most {p.max_running} running at once" if p.max_running else "")
    )
    o.print(f"  cluster       policy {report.policy_verdict}; start estimate {report.estimate_start}")
    verdicts = {
        "replay": "nothing new: the request's jobs exist already",
        "deny": f"denied by {report.rule}: {report.reason}",
        "approval": f"allowed by approval {report.rule}",
        "grant": f"allowed by grant {report.rule}",
        "lease": f"allowed by lease {report.rule} (its allocation is paid; deny rules still apply)",
        "closed": report.reason,
        "ask": f"a human must approve: {report.reason}"
        + (f" (closest grant {report.closest_grant}: {'; '.join(report.closest_why)})" if report.closest_grant else ""),
    }
    o.print(f"  ledger now    {verdicts[report.would]}")
    o.print("nothing was filed or submitted; `rsk launch` with the same options does it")


def init(
    project: Annotated[
        str | None, typer.Option("--project", "-p", help="Project name (default: the directory's).")
    ] = None,
    target: Annotated[str | None, typer.Option("--target", "-t", help="Target for commands run below here.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing project file.")] = False,
    json_out: JsonOpt = False,
) -> None:

    from rsk.cluster.targets import find_target
    from rsk.local import caller
    from rsk.local.project import default_project, write

    here = caller.cwd()
    name = project or default_project(here)
    if target:
        find_target(target)  # an unknown target is an error now, not at the first launch
    path = write(here, name, target, force=force)
    if json_out:
        print_json({"schema_version": 1, "path": str(path), "project": name, "target": target})
        return
    out().print(f"wrote {path}: project {name}" + (f", target {target}" if target else ""))
    out().print("next: rsk plan -- CMD  (every rsk command below this directory uses this project)")


def wait(
    what: Annotated[str | None, typer.Argument(metavar="[CARD|JOB]", help="A card id (c-...) or a job id.")] = None,
    request_id: Annotated[str | None, typer.Option("--request-id", "-r", help="Every job of this request.")] = None,
    batch: Annotated[str | None, typer.Option("--batch", "-b", help="Every task of this batch.")] = None,
    target: TargetOpt = None,
    project: ProjectOpt = None,
    timeout: Annotated[
        float,
        typer.Option(
            help="Give up after this many seconds (0: no limit). The default stays below agents' shell timeouts."
        ),
    ] = 100,
    state: StateOpt = None,
    summary: SummaryOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from rsk.errors import Exit, UsageError
    from rsk.local.paths import check_token
    from rsk.local.project import resolve_project
    from rsk.ops.wait import wait_card, wait_jobs

    brief = summary if json_out or summary else False  # the text folds a big batch itself
    given = [x for x in (what, request_id, batch) if x]
    if len(given) != 1:
        raise UsageError(
            "wait for one thing: a CARD, a JOB, --request-id R or --batch B", "e.g. rsk wait c-1a2b3c4d5e6f"
        )
    if what and what.startswith("c-"):
        result = wait_card(check_token("card id", what), project, timeout or None, states=state, summary=brief)
    else:
        from rsk.wire.protocol import is_job_id

        if what and not is_job_id(what):
            raise UsageError(f"{what!r} is neither a card id (c-...) nor a job id")
        rid = request_id or batch
        result = wait_jobs(
            resolve_target(target), resolve_project(project), job=what if what else None,
            request_id=check_token("request id", rid) if rid else None, timeout=timeout or None, states=state,
            summary=brief,
        )  # fmt: skip
    if json_out:
        print_json(result)
    else:
        o = out()
        if result.launch is not None:
            n = len(result.launch.tasks)
            what = f"{n} tasks of request {result.launch.request_id}" if n else f"job {result.launch.job_id}"
            o.print(f"approved; submitted {what} on {result.launch.target}")
        from rsk.cli.board import fold_jobs

        shown = fold_jobs(result.jobs)
        for j in shown:
            end = f" exit {j.exit_code}" if j.exit_code is not None else ""
            o.print(f"  {j.job_id:<12} {j.task or j.request_id:<24} {j.state}{end}")
        if len(shown) < len(result.jobs) + result.omitted:
            counts = ", ".join(f"{n} {s}" for s, n in sorted(result.counts.items()))
            more = len(result.jobs) + result.omitted - len(shown)
            o.print(f"  ... and {more} more (all of them: {counts}; --all --json lists every job)")
        if result.chain is not None:
            o.print(f"  chain {result.chain.text}")
        if result.message:
            o.print(result.message)
        if result.tell_human:
            o.print(f"tell the human: {result.tell_human}")
        o.print(f"{result.status} after {result.waited_s:g}s" + (f": {result.hint}" if result.hint else ""))
    if result.status == "pending":
        raise typer.Exit(int(Exit.PENDING))
    if result.status == "running":
        raise typer.Exit(int(Exit.RUNNING))
    if result.status == "blocked":
        raise typer.Exit(int(Exit.BLOCKED))
    if result.all_succeeded is False:
        raise typer.Exit(int(Exit.UNSUCCESSFUL))
