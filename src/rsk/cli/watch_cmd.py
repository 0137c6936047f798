"""rsk watch: a live table of batches and jobs."""

import time
from typing import Annotated

import typer

from rsk.cli.common import JsonOpt, ProjectOpt, print_json, rich_out
from rsk.commands import help_for
from rsk.local import caller


def register(app: typer.Typer) -> None:
    app.command(
        "watch",
        help=help_for(
            "watch",
            "One remote call per target per refresh. Ctrl-C leaves. --once prints one table; --json one document.",
        ),
    )(watch)


def watch(
    target: Annotated[
        list[str] | None, typer.Option("--target", "-t", help="Target (repeatable); default: every target.")
    ] = None,
    project: ProjectOpt = None,
    batch: Annotated[str | None, typer.Option("--batch", "-b", help="Only this batch (its request id).")] = None,
    interval: Annotated[float, typer.Option(min=1, help="Seconds between refreshes (it backs off on errors).")] = 10,
    once: Annotated[bool, typer.Option(help="Print one table and exit.")] = False,
    json_out: JsonOpt = False,
) -> None:

    from rsk.cli.board import render_status
    from rsk.cluster.targets import list_targets
    from rsk.local.project import resolve_project
    from rsk.ops.watcher import Watcher

    names = list(target or []) or ([t] if (t := caller.getenv("RSK_TARGET")) else [])
    names = names or [t.name for t in list_targets()]
    if not names:
        from rsk.errors import UsageError

        raise UsageError("no targets to watch", "pass --target NAME; `rsk targets` says where target files are found")
    w = Watcher(names, resolve_project(project), interval=interval, batch=batch)
    title = f"rsk watch: project {w.project}"
    try:
        if once or json_out:
            snap = w.poll()
            if json_out:
                print_json({"schema_version": 1, "statuses": [s.model_dump() for s in snap.statuses],
                            "stale": snap.stale})  # fmt: skip
            else:
                rich_out().print(render_status(snap.statuses, snap.stale, title=title))
            return
        from rich.live import Live

        console = rich_out()
        while not console.is_terminal:  # an agent's shell, a pipe, a file: one table per refresh, as it comes
            snap = w.poll()
            stamp = time.strftime("%H:%M:%S")
            console.print(render_status(snap.statuses, snap.stale, title=f"{title} at {stamp}"))
            console.file.flush()
            time.sleep(snap.delay)
        with Live(console=console, auto_refresh=False, screen=False) as live:
            while True:
                snap = w.poll()
                stamp = time.strftime("%H:%M:%S")
                live.update(
                    render_status(snap.statuses, snap.stale, title=f"{title} at {stamp} (every {snap.delay:g}s)"),
                    refresh=True,
                )
                time.sleep(snap.delay)
    except KeyboardInterrupt:
        return
    finally:
        w.close()
