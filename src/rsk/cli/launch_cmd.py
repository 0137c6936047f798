"""rsk launch and rsk wait: the agent's way to run work."""

from pathlib import Path
from typing import Annotated

import typer

from rsk.cli.commands import help_for
from rsk.cli.common import JsonOpt, ProjectOpt, TargetOpt, err, out, print_json, resolve_target

WaitOpt = Annotated[
    str | None,
    typer.Option(
        "--wait",
        help="--wait[=SECONDS]: if a human must approve, wait for the decision (up to SECONDS; bare or 0: "
        "no limit), then go on.",
        metavar="SECONDS",
    ),
]


def register(app: typer.Typer) -> None:
    app.command(
        "launch",
        context_settings={"allow_interspersed_args": False},
        help=help_for(
            "launch",
            "Example: rsk launch --target lab --gpus 1 --time 2:00:00 --request-id train-1 -- python train.py\n\n"
            "Exit codes: 0 submitted (or replayed), 3 denied, 4 waiting for a human (card id printed), "
            "5 plan changed / request id conflict; see README for all.",
        ),
    )(launch)
    app.command("wait", help=help_for("wait"))(wait)


def _parse_wait(value: str | None) -> float | None:
    from rsk.errors import UsageError

    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError as exc:
        raise UsageError(f"--wait takes seconds, not {value!r}") from exc
    if seconds < 0:
        raise UsageError("--wait takes a number of seconds >= 0")
    return seconds


def launch(
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
    time: Annotated[str | None, typer.Option("--time", help="Time limit: 30, 2:00:00, 1-00:00:00.")] = None,
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
    tasks: Annotated[
        Path | None,
        typer.Option(
            "--tasks",
            help='A batch: JSON lines {"key": K, "argv": [...] | "script": S, "env": {...}, "gpus"/"time"/...}. '
            "One plan, one approval, one remote call; each task its own job.",
        ),
    ] = None,
    wait: WaitOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from rsk.errors import UsageError
    from rsk.inputs import check_request
    from rsk.launch import launch as do_launch
    from rsk.launch import requester
    from rsk.paths import check_token, new_request_id, resolve_project
    from rsk.protocol import Request
    from rsk.tasks import parse_tasks, sbatch_directives
    from rsk.units import parse_mem, parse_time

    argv = list(command or [])
    if sum(bool(x) for x in (argv, script, tasks)) != 1:
        raise UsageError(
            "give exactly one of: a command after --, --script FILE, or --tasks FILE",
            "e.g. rsk launch -t lab -- python train.py",
        )
    script_text = None
    task_specs = []
    if script is not None:
        try:
            script_text = script.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read --script {script}: {exc}") from exc
        lifted = sbatch_directives(script_text)
        given = {"partition": partition, "account": account, "qos": qos, "nodes": nodes, "cpus": cpus,
                 "mem": mem, "time": time, "name": name, "gpus": gpus}  # fmt: skip
        for key, value in lifted.items():
            if given.get(key) is not None and str(given[key]) != value:
                raise UsageError(f"--{key} {given[key]} and the script's #SBATCH {key}={value} disagree")
        partition = partition or lifted.get("partition")
        account = account or lifted.get("account")
        qos = qos or lifted.get("qos")
        nodes = nodes if nodes is not None else (int(lifted["nodes"]) if "nodes" in lifted else None)
        cpus = cpus if cpus is not None else (int(lifted["cpus"]) if "cpus" in lifted else None)
        gpus = gpus if gpus is not None else (int(lifted["gpus"]) if "gpus" in lifted else None)
        mem = mem or lifted.get("mem")
        time = time or lifted.get("time")
        name = name or lifted.get("name")
    if tasks is not None:
        try:
            task_specs = parse_tasks(tasks.read_text(encoding="utf-8"), str(tasks))
        except OSError as exc:
            raise UsageError(f"cannot read --tasks {tasks}: {exc}") from exc
    request = Request(
        project=resolve_project(project),
        request_id=check_token("request id", request_id) if request_id else new_request_id(),
        name=check_token("job name", name) if name else "",
        workdir=workdir or "",
        path=path or "",
        partition=partition or "",
        account=account or "",
        qos=qos or "",
        nodes=nodes,
        cpus=cpus,
        mem_mb=parse_mem(mem) if mem else None,
        gpus=gpus,
        time_min=parse_time(time) if time else None,
        env=list(env or []),
        argv=argv,
        script=script_text,
        tasks=task_specs,
        requester=requester(),
    )
    console = err()
    progress = None if json_out else (lambda msg: console.print(f"rsk: {msg}"))
    check_request(request)
    result = do_launch(resolve_target(target), request, wait=_parse_wait(wait), progress=progress)
    if json_out:
        print_json(result)
        return
    o = out()
    verb = "already submitted:" if result.status == "replayed" else "submitted"
    if result.tasks:
        o.print(f"{verb} batch {result.request_id}: {len(result.tasks)} tasks on {result.target}")
        for t in result.tasks[:10]:
            o.print(f"  {t.task:<24} job {t.job_id}")
        if len(result.tasks) > 10:
            o.print(f"  ... and {len(result.tasks) - 10} more (--json lists all)")
    else:
        o.print(f"{verb} job {result.job_id} on {result.target}")
    o.print(f"  project     {result.project}")
    o.print(f"  request id  {result.request_id}")
    o.print(f"  plan        {result.plan_hash}")
    how = f"{result.allowed_by.kind} {result.allowed_by.id}"
    if result.allowed_by.kind == "replay":
        how = f"nothing new: the {result.allowed_by.id} already knows this request's job(s)"
    if result.allowed_by.kind == "grant":
        how += f" (charged {result.plan.gpu_hours:.2f} GPU-h, {result.plan.cpu_hours:.2f} CPU-h at worst)"
    o.print(f"  allowed by  {how}")
    if result.note:
        o.print(f"  note        {result.note}")
    o.print(
        f"next: rsk logs {result.job_id} --target {result.target} --project {result.project} --follow",
    )


def wait(
    card: Annotated[str, typer.Argument(help="The card id a pending launch printed.")],
    project: ProjectOpt = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait (0: no limit).", min=0)] = 0,
    json_out: JsonOpt = False,
) -> None:
    from rsk.errors import DeniedError
    from rsk.guard import find_card, wait_for_card
    from rsk.launch import launch as do_launch
    from rsk.paths import resolve_project
    from rsk.protocol import Request
    from rsk.store import Store

    store = Store(resolve_project(project))
    find_card(store.load(), card)
    decided = wait_for_card(store, card, timeout or None)
    if decided.status == "denied":
        raise DeniedError(
            f"card {card} was denied by {decided.decided_by}: {decided.reason}",
            "do not try to get around a denial; tell the human and ask what to do instead",
            details={"card_id": card, "reason": decided.reason},
        )
    request = Request.model_validate(decided.request)
    result = do_launch(decided.target, request)
    if json_out:
        print_json(result)
    else:
        out().print(
            f"approved; submitted job {result.job_id} on {result.target} (plan {result.plan_hash[:12]})",
        )
