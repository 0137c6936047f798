"""rsk lease: open a held allocation that steps share; status, drain, resume, close."""

from typing import Annotated

import typer

from rsk.cli.common import JsonOpt, ProjectOpt, TargetOpt, err, out, print_json, resolve_target
from rsk.commands import help_for

lease_app = typer.Typer(
    help=help_for(
        "lease",
        "A lease is one Slurm job that holds nodes and GPUs; rsk's controller inside it starts the steps that "
        "`rsk launch --lease NAME -- CMD` queues, each as a Slurm step with its own GPUs, within seconds. "
        "Opening one is decided like any launch (a grant or a human) and charged at worst case for the whole "
        "allocation; steps cost nothing more. A step takes --gpus, --cpus and --mem from one node of the lease "
        "(give each its share, or steps run one at a time); opening it again without -r returns the lease it "
        'opened. The rsk skill, section "Many short GPU runs: a lease", says the rest an agent needs.',
    ),
    no_args_is_help=True,
)
NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The lease's name (A-Z a-z 0-9 . _ -).")]


def register(app: typer.Typer) -> None:
    app.add_typer(lease_app, name="lease")


@lease_app.command(
    "open",
    help="Plan, decide and submit a lease (exactly once per request id). Example: rsk lease open dev --target lab "
    "--nodes 2 --gpus 4 --cpus 4 --mem 3G --time 1:00:00. Exit codes as rsk launch: 0 submitted, 3 denied, "
    "4 waiting for a human.",
)
def open_(
    name: NameArg,
    target: TargetOpt = None,
    project: ProjectOpt = None,
    nodes: Annotated[int | None, typer.Option(min=1, help="Nodes to hold (default 1).")] = None,
    gpus: Annotated[int | None, typer.Option(min=0, help="GPUs per node.")] = None,
    cpus: Annotated[int | None, typer.Option(min=1, help="CPUs per node (default 1).")] = None,
    mem: Annotated[str | None, typer.Option(help="Memory per node: 4096, 512M, 16G.")] = None,
    time: Annotated[str | None, typer.Option("--time", help="How long to hold it: 30, 2:00:00.")] = None,
    partition: Annotated[str | None, typer.Option(help="Slurm partition (default: the cluster's).")] = None,
    account: Annotated[str | None, typer.Option(help="Slurm account.")] = None,
    qos: Annotated[str | None, typer.Option(help="Slurm QOS.")] = None,
    drain: Annotated[
        int | None,
        typer.Option("--drain", min=0, help="Start no step in the last MINUTES of the allocation (default 5)."),
    ] = None,
    overrun: Annotated[
        str | None,
        typer.Option(help="A step longer than the time left: refuse (default) or clip it to the time left."),
    ] = None,
    request_id: Annotated[
        str | None,
        typer.Option(
            "--request-id",
            "-r",
            help="Idempotency key. Without it, opening a lease this project holds open (or a card still waits "
            "to open) under the same name is the same request: repeated, it answers with that lease (or card).",
        ),
    ] = None,
    wait: Annotated[
        float | None, typer.Option("--wait", min=0, help="If a human must approve, block up to SECONDS.")
    ] = None,
    json_out: JsonOpt = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="With --json, also the whole plan (rsk plan --json always prints it).")
    ] = False,
) -> None:
    from rsk.errors import UsageError
    from rsk.local.project import chosen_project, scope
    from rsk.ops.launch import launch, requester
    from rsk.ops.leases import LeaseSpec, open_lease, open_request

    if overrun not in (None, "refuse", "clip"):
        raise UsageError("--overrun is refuse or clip")
    spec = LeaseSpec(name=name, nodes=nodes, gpus=gpus, cpus=cpus, mem=mem, time=time, partition=partition,
                     account=account, qos=qos, drain_min=drain, overrun=overrun, request_id=request_id)  # fmt: skip
    where = resolve_target(target)
    request = open_request(spec, chosen_project(project), requester(), where)
    console = err()
    said = None if json_out else (lambda m: console.print(f"rsk: {m}"))
    result = open_lease(spec, request, lambda r: launch(where, r, wait=wait, progress=said))
    if json_out:  # as rsk launch answers: what an agent acts on, the plan only with --verbose
        print_json(result if verbose else result.brief())
        return
    o = out()
    p = result.plan
    assert p is not None  # the core's result carries its plan; only the JSON an agent reads is brief
    verb = "already open:" if result.status == "replayed" else "opened"
    o.print(f"{verb} lease {name}: job {result.job_id} on {result.target}, {p.nodes} node(s) x {p.gpus} GPU(s), "
            f"{p.cpus} CPU(s) and {p.mem_mb} MB per node, for {p.time_min} min")  # fmt: skip
    o.print(f"  allowed by  {result.allowed_by.kind} {result.allowed_by.id} ({p.gpu_hours:.2f} GPU-h at worst)")
    s = scope(result.project, result.target)
    o.print(f"next: rsk launch --lease {name}{s} --gpus 1 -- CMD   (rsk lease status{s} shows it)")


@lease_app.command("status", help="The project's leases: state, nodes, time left, steps queued and running.")
def status(
    name: Annotated[str | None, typer.Argument(metavar="[NAME]", help="One lease (default: all).")] = None,
    target: TargetOpt = None,
    project: ProjectOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from rsk.local.project import resolve_project
    from rsk.ops.leases import describe
    from rsk.ops.leases import status as lease_status

    result = lease_status(resolve_target(target), resolve_project(project), name)
    if json_out:
        print_json(result)
        return
    o = out()
    if not result.leases:
        o.print(f"project {result.project} has no lease on {result.target} (rsk lease open NAME)")
    for info in result.leases:
        o.print(describe(info))
    for warning in result.warnings:
        err().print(f"rsk: warning: {warning}")


def _flag(name: str, target: str | None, project: str | None, json_out: bool, drain: bool) -> None:
    from rsk.local.project import resolve_project
    from rsk.ops.leases import LeaseList, describe, set_drain

    where = (resolve_target(target), resolve_project(project))
    info = set_drain(*where, name, drain)
    if json_out:  # as `rsk lease status NAME --json` answers
        print_json(LeaseList(target=where[0], project=where[1], leases=[info]))
        return
    out().print(describe(info))


@lease_app.command("drain", help="Start no new step in the lease (running steps go on) until `rsk lease resume`.")
def drain(name: NameArg, target: TargetOpt = None, project: ProjectOpt = None, json_out: JsonOpt = False) -> None:
    _flag(name, target, project, json_out, True)


@lease_app.command("resume", help="Start queued steps again after `rsk lease drain`.")
def resume(name: NameArg, target: TargetOpt = None, project: ProjectOpt = None, json_out: JsonOpt = False) -> None:
    _flag(name, target, project, json_out, False)


@lease_app.command(
    "close",
    help="End the lease: queued steps are cancelled, the allocation ends (running steps with it), no step is "
    "allowed into it any more, and its charge settles to what it held.",
)
def close(name: NameArg, target: TargetOpt = None, project: ProjectOpt = None, json_out: JsonOpt = False) -> None:
    from rsk.local.project import resolve_project
    from rsk.ops.launch import requester
    from rsk.ops.leases import close as do_close

    report = do_close(resolve_target(target), resolve_project(project), name, requester())
    if json_out:
        print_json(report)
        return
    how = "ended its allocation" if report.result == "cancelled" else "its allocation had ended already"
    out().print(
        f"closed lease {report.name} (job {report.job_id}): {how}; {report.queued_cancelled} queued step(s) "
        f"cancelled; charge {'settled to what it held' if report.settled else 'settles at the next rsk status'}"
    )
    c = report.cost
    if c is not None:
        out().print(f"  cost  {c.cpu_hours_used:.2f} CPU-h, {c.gpu_hours_used:.2f} GPU-h used"
                    + (f"; {c.cpu_hours_reserved:.2f} CPU-h, {c.gpu_hours_reserved:.2f} GPU-h still reserved"
                       if c.cpu_hours_reserved or c.gpu_hours_reserved else ""))  # fmt: skip
