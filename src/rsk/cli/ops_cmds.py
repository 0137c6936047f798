"""Operating on jobs: status, cancel, reconcile, events."""

from typing import Annotated

import typer

from rsk.cli.common import (
    JsonOpt,
    ProjectOpt,
    StateOpt,
    SummaryOpt,
    TargetOpt,
    err,
    out,
    print_json,
    resolve_target,
    rich_out,
)
from rsk.commands import help_for


def register(app: typer.Typer) -> None:
    app.command("status", help=help_for("status"))(status)
    app.command("cancel", help=help_for("cancel"))(cancel)
    app.command("reconcile", help=help_for("reconcile"))(reconcile)
    app.command(
        "events",
        help=help_for(
            "events", "Prints the next cursor. --wait blocks until something changes, so agents need no sleep loops."
        ),
    )(events)


def status(
    job: Annotated[str | None, typer.Argument(help="Only this job id.")] = None,
    target: TargetOpt = None,
    project: ProjectOpt = None,
    batch: Annotated[str | None, typer.Option("--batch", "-b", help="Only this batch (its request id).")] = None,
    request_id: Annotated[str | None, typer.Option("--request-id", "-r", help="Only this request's jobs.")] = None,
    active: Annotated[bool, typer.Option("--active", help="Only pending and running jobs.")] = False,
    state: StateOpt = None,
    summary: SummaryOpt = None,
    limit: Annotated[int, typer.Option(min=0, help="At most this many jobs, newest first (0: all).")] = 0,
    json_out: JsonOpt = False,
) -> None:
    from rsk.local.project import resolve_project
    from rsk.ops.status import filter_jobs
    from rsk.ops.status import status as get_status

    st = filter_jobs(get_status(resolve_target(target), resolve_project(project)), job=job,
                     request_id=batch or request_id, active=active, states=state,
                     summary=summary if json_out or summary else False, limit=limit)  # fmt: skip
    if json_out:
        print_json(st)
        return
    from rsk.cli.board import render_status

    if not st.jobs and not st.summary and (active or state or job or batch or request_id):
        # the project has jobs: none matches the filter
        which = "active " if active else f"{'/'.join(state)} " if state else ""
        of = f" of {batch or request_id}" if batch or request_id else ""
        out().print(f"no {which}jobs{of} in project {st.project} on {st.target}")
        return
    rich_out().print(render_status([st]))


def cancel(
    job: Annotated[str | None, typer.Argument(help="Job id to cancel.")] = None,
    target: TargetOpt = None,
    project: ProjectOpt = None,
    request_id: Annotated[str | None, typer.Option("--request-id", "-r", help="Cancel this request's job.")] = None,
    batch: Annotated[str | None, typer.Option("--batch", "-b", help="Cancel every task of this batch.")] = None,
    every: Annotated[
        bool,
        typer.Option(
            "--all",
            help="List every job's result; without it a cancel of more than 50 lists those it could not cancel "
            "and the first 50 others (counts has them all; --json: results_omitted).",
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    from rsk.local.project import resolve_project, scope
    from rsk.ops.cancel import cancel as do_cancel
    from rsk.ops.cancel import refused
    from rsk.wire.states import SUMMARY_ROWS

    report = do_cancel(resolve_target(target), resolve_project(project), job=job, request_id=request_id, batch=batch)
    for line in report.warnings:
        err().print(f"rsk: warning: {line}")
    shown = report if every else report.brief(SUMMARY_ROWS)
    if json_out:
        refused(shown)  # a job that is not this project's, or that Slurm kept: an error document
        print_json(shown)
        return
    o = out()
    for r in shown.results:
        what = f"job {r.job_id}" + (f" ({r.request_id}{'/' + r.task if r.task else ''})" if r.request_id else "")
        text = {
            "cancelled": "cancelled",
            "finished": "had already finished",
            "not-ours": "is not this project's: left alone",
            "failed": "could not be cancelled",
        }[r.result]
        o.print(f"{what} {text}")
    if shown.results_omitted:
        counts = ", ".join(f"{n} {word}" for word, n in sorted(report.counts.items()))
        o.print(f"... and {shown.results_omitted} more (all of them: {counts}; --all lists every one)")
    refused(shown)
    o.print(f"next: rsk status{scope(report.project, report.target)}")


def reconcile(target: TargetOpt = None, project: ProjectOpt = None, json_out: JsonOpt = False) -> None:
    from rsk.local.project import resolve_project
    from rsk.ops.reconcile import reconcile as do_reconcile

    report = do_reconcile(resolve_target(target), resolve_project(project))
    if json_out:
        print_json(report)
        return
    o = out()
    if not report.items:
        o.print(f"nothing to reconcile: every intent in {report.project} has an outcome")
    for item in report.items:
        if item.result == "reconciled":
            o.print(f"{item.request_id}: was submitted as job {item.job_id} (recorded now)")
        elif item.result == "unresolved":
            jobs = " ".join(item.unknown_jobs)
            o.print(f"{item.request_id}: outcome unknown, still held: jobs {jobs} of this account are in no book "
                    "and one may be its job; wait for them to end or cancel them, then reconcile again")  # fmt: skip
        else:
            o.print(f"{item.request_id}: never reached Slurm (abandoned; launching it again is safe)")


def events(
    target: TargetOpt = None,
    project: ProjectOpt = None,
    after: Annotated[
        str | None, typer.Option(help="A cursor from a previous events call, or `rsk journal`'s (its line number).")
    ] = None,
    wait: Annotated[float, typer.Option(min=0, max=3600, help="Block up to this many seconds for a change.")] = 0,
    json_out: JsonOpt = False,
) -> None:
    from rsk.local.project import resolve_project
    from rsk.ops.events import events as get_events

    ev = get_events(resolve_target(target), resolve_project(project), after=after, wait=wait)
    if json_out:
        print_json(ev)
        return
    o = out()
    if after is None:
        o.print("jobs now: " + (", ".join(f"{n} {s}" for s, n in sorted(ev.summary.items())) or "none"))
    for e in ev.events:
        if e.kind == "state":
            end = f" (exit {e.exit_code})" if e.exit_code is not None and e.new_state != "running" else ""
            o.print(f"job {e.job_id} ({e.request_id}{'/' + e.task if e.task else ''}): "
                    f"{e.old_state or 'new'} -> {e.new_state}{end}")  # fmt: skip
        elif e.journal is not None:
            o.print(f"journal {e.journal.n}: {e.journal.event} {e.request_id}"
                    + (f" job={e.job_id}" if e.job_id else ""))  # fmt: skip
    if ev.note:
        o.print(ev.note)
    o.print(f"cursor {ev.cursor}")
