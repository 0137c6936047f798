"""Commands that read the cluster: journal, logs, targets."""

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from rsk.cli.common import (
    AllTasksOpt,
    JsonOpt,
    ProjectOpt,
    TargetOpt,
    err,
    out,
    print_json,
    resolve_target,
    to_terminal,
)
from rsk.commands import help_for
from rsk.local import caller


def register(app: typer.Typer) -> None:
    app.command("info", help=help_for("info"))(info)
    app.command("fetch", help=help_for("fetch"))(fetch)
    app.command("journal", help=help_for("journal"))(journal)
    app.command("logs", help=help_for("logs"))(logs)
    app.command("targets", help=help_for("targets"))(targets)
    app.command("doctor", help=help_for("doctor"))(doctor)
    app.command(
        "gpus",
        help=help_for("gpus", "From the cluster's own GRES view (scontrol), in one remote call. Jobs rsk did not "
                      "launch are shown by their Slurm name."),
    )(gpus)  # fmt: skip


def journal(
    target: TargetOpt = None,
    project: ProjectOpt = None,
    after: Annotated[
        str, typer.Option(help="Only events after this cursor: a line number, or a cursor `rsk events` gave.")
    ] = "0",
    limit: Annotated[
        int,
        typer.Option(
            min=0,
            help="At most this many events after the cursor (0: all); `more` and the cursor "
            "say where the next call starts.",
        ),
    ] = 0,
    json_out: JsonOpt = False,
) -> None:
    from rsk.cli.common import err
    from rsk.local.inert import inert
    from rsk.local.project import resolve_project
    from rsk.ops.events import cursor_line
    from rsk.ops.journal import journal as read_journal

    j = read_journal(resolve_target(target), resolve_project(project), cursor_line(after), limit)
    for problem in j.chain_problems:  # a journal someone edited, cut short or left torn
        err().print(f"warning: {problem}")
    if json_out:
        print_json(j)
        return
    o = out()
    if not j.events:
        o.print(f"no journal events for project {j.project} on {j.target}")
    for e in j.events:
        extra = " ".join(
            s
            for s in (
                f"job={e.job_id}" if e.job_id else "",
                f"code={e.code}" if e.code else "",
                f"msg={inert(e.message)}" if e.message else "",
            )
            if s
        )
        o.print(
            inert(f"{e.n:>5} {e.t} {e.event:<10} {e.request_id} plan={e.plan_hash[:12]} {extra}".rstrip()),
        )
    o.print(f"cursor {j.cursor}" + (f" (more after it: rsk journal --after {j.cursor})" if j.more else ""))


def logs(
    job: Annotated[str | None, typer.Argument(help="Job id (as rsk launch printed it).")] = None,
    request_id: Annotated[
        str | None,
        typer.Option(
            "--request-id",
            "-r",
            help="Instead of JOB: every job of this request, each labelled, in order "
            "(a chain's links by number, its extensions' too).",
        ),
    ] = None,
    batch: Annotated[
        str | None, typer.Option("--batch", "-b", help="Instead of JOB: every task of this batch, each labelled.")
    ] = None,
    target: TargetOpt = None,
    project: ProjectOpt = None,
    stream: Annotated[str, typer.Option(help="stdout or stderr.")] = "stdout",
    tail: Annotated[int, typer.Option(min=0, help="The last N lines (0: all); never more than 1 MiB.")] = 200,
    follow: Annotated[bool, typer.Option(help="Keep printing new output until the job ends.")] = False,
    timeout: Annotated[float, typer.Option(min=1, help="With --follow: give up after this many seconds.")] = 600,
    json_out: JsonOpt = False,
) -> None:
    from rsk.errors import UsageError
    from rsk.local.project import resolve_project
    from rsk.ops.logs import LogTail
    from rsk.ops.logs import logs as read_logs

    if stream not in ("stdout", "stderr"):
        raise UsageError("--stream is stdout or stderr")
    if len([x for x in (job, request_id, batch) if x]) != 1:
        raise UsageError("logs of one thing: a JOB, --request-id R or --batch B",
                         "e.g. rsk logs 1234, or rsk logs -r run-7 for each link of a chain")  # fmt: skip
    if job is None:
        if follow:
            raise UsageError("--follow follows one job", "rsk logs -r R shows each job's tail; follow one by its id")
        _request_logs(target, project, request_id or batch or "", stream, tail, json_out)
        return
    printed = {"size": -1}
    shown = _shown()

    def stream_new(t: LogTail) -> None:
        """With --follow, print what is new since the last poll (the whole tail the first time)."""
        stdout = caller.stdout()
        if printed["size"] < 0:
            stdout.write(shown(t.text))
        elif t.size > printed["size"]:
            new = t.size - printed["size"]
            stdout.write(shown(t.text.encode()[-new:].decode("utf-8", "replace") if new < len(t.text.encode())
                               else t.text))  # fmt: skip
        stdout.flush()
        printed["size"] = t.size

    assert job is not None
    result = read_logs(
        resolve_target(target),
        resolve_project(project),
        job,
        stream,
        lines=tail,
        follow_until_end=timeout if follow else None,
        on_poll=None if json_out else stream_new,
    )
    if json_out:
        print_json(result)
        return
    from rsk.cli.common import err

    e = result.end
    if e is not None:
        how = f"signal {e.signal}" if e.signal else f"exit code {e.exit_code}"
        state = f"ended: {how} after {e.elapsed_s}s (limit {e.limit_s}s)"
    else:
        state = "running" if result.started else "not started"
    other = "stderr" if stream == "stdout" else "stdout"
    err().print(f"rsk: job {job} {state}; {result.size} bytes of {stream}, {result.other_size} of {other}")
    if result.note:  # the error is likely in the other stream: say where, so one call finds it
        err().print(f"rsk: {result.note}")
    if result.timed_out:
        err().print(f"rsk: stopped following after {timeout:g}s; the job still runs: run the same command again")


def _request_logs(target: str | None, project: str | None, request_id: str, stream: str, tail: int,
                  json_out: bool) -> None:  # fmt: skip
    from rsk.local.inert import inert
    from rsk.local.project import resolve_project
    from rsk.ops.logs import request_logs

    found = request_logs(resolve_target(target), resolve_project(project), request_id, stream, lines=tail)
    if json_out:
        print_json(found)
        return
    stdout, shown = caller.stdout(), _shown()
    for t in found.logs:
        label = t.task or t.request_id
        stdout.write(f"==> {inert(label)}: job {t.job_id} ({t.state}), {t.size} bytes of {stream} <==\n")
        if t.note:
            stdout.write(f"rsk: {t.note}\n")
        stdout.write(shown(t.text if not t.text or t.text.endswith("\n") else t.text + "\n"))
    stdout.flush()


def _shown() -> Callable[[str], str]:
    """How a job's output is written: on a terminal, made inert (an escape sequence the job printed shows as text and
    does nothing: no screen clear, no title, no clipboard); to a pipe or a file, as the job wrote it (its bytes are
    data there, and `less -R` shows colours and escapes the rest). `--json` carries the text as it is."""
    from rsk.local.inert import inert_output

    return inert_output if to_terminal() else str


def info(
    target: Annotated[str | None, typer.Argument(help="Target name (default: as for every command).")] = None,
    project: ProjectOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from rsk.local.project import resolve_project
    from rsk.ops.info import info as get_info

    report = get_info(resolve_target(target), resolve_project(project))
    if json_out:
        print_json(report)
        return
    o = out()
    o.print(f"{report.target}: partitions")
    for p in report.partitions:
        limit = "no limit" if p.max_time_min is None else f"{p.max_time_min} min"
        gpu = f"{p.gpus_per_node} GPU/node" + (f" ({','.join(p.gpu_types)})" if p.gpu_types else "")
        o.print(f"  {p.name + ('*' if p.default else ''):<12} {p.state:<6} {limit:<12} {p.nodes} node(s), "
                f"{p.cpus_per_node} CPU and {p.mem_mb_per_node} MB per node, {gpu}")  # fmt: skip
    said = {k: ",".join(v) if isinstance(v, list) else v for k, v in report.policy.model_dump().items()}
    rules = ", ".join(f"{k}={v}" for k, v in said.items() if v is not None)
    o.print(f"policy: {rules or 'defaults'}")
    if not report.grants:
        o.print(f"grants of project {report.project}: none (every launch waits for a human)")
    for v in report.grants:
        jobs = "unlimited" if v.jobs_left is None else v.jobs_left
        hours = "unlimited" if v.gpu_hours_left is None else v.gpu_hours_left
        o.print(f"grant {v.grant.id} [{v.status}]: jobs left {jobs}, GPU-h left {hours}")


def fetch(
    job: Annotated[
        str | None,
        typer.Argument(metavar="JOB", help="Job id (as rsk launch printed it); with --batch, the first PATH."),
    ] = None,
    paths: Annotated[
        list[str] | None,
        typer.Argument(metavar="PATH...", help="Files or directories, relative to the job's directory."),
    ] = None,
    batch: Annotated[
        str | None,
        typer.Option(
            "--batch",
            "-b",
            help="Every task of this batch: each task's files into DIR/KEY/..., in one call; with --result, each "
            "task's published result into DIR/KEY (tasks without one are listed).",
        ),
    ] = None,
    request_id: Annotated[
        str | None,
        typer.Option(
            "--request-id",
            "-r",
            help="With --result, instead of JOB: this request's one job, or a chain's last link that ran "
            "(rsk fetch -r run-7 --result --to results/run-7).",
        ),
    ] = None,
    to: Annotated[
        Path | None,
        typer.Option(
            "--to",
            help="Where to put them (default: rsk-results/JOB, or rsk-results/BATCH, under this directory: "
            "snapshots leave rsk-results out, so --code . sends the same files after a fetch).",
        ),
    ] = None,
    result: Annotated[
        bool,
        typer.Option(
            "--result",
            help="The job's published result (what it wrote under $RSK_OUT and exited 0), checked file by file "
            "against its manifest; it appears in --to DIR (which must not exist; default rsk-results/JOB) whole, "
            "or not at all.",
        ),
    ] = False,
    partial: Annotated[
        bool, typer.Option("--partial", help="With --result: what a job that did not succeed left, labelled so.")
    ] = False,
    max_bytes: Annotated[
        int,
        typer.Option(
            min=1,
            help="Stop after this many bytes in all, counted in whole 64 KiB blocks; run the same command again to "
            "resume a file it cut (a file already whole is fetched again).",
        ),
    ] = 1024**3,
    target: TargetOpt = None,
    project: ProjectOpt = None,
    every: AllTasksOpt = False,
    json_out: JsonOpt = False,
) -> None:
    from rsk.errors import UsageError
    from rsk.local import caller
    from rsk.local.project import resolve_project
    from rsk.ops.fetch import default_dest, fetch_batch
    from rsk.ops.fetch import fetch as do_fetch
    from rsk.wire.states import SUMMARY_ROWS

    if request_id is not None and not (result or partial):
        raise UsageError("--request-id goes with --result", "files of a job: rsk fetch JOB PATH...; of a batch: "
                         "rsk fetch --batch B PATH...; see rsk fetch --help")  # fmt: skip
    results = result or partial
    many_results = results and batch is not None and not partial and job is None and not paths and request_id is None
    if results and not many_results and (paths or batch is not None or (job is None) == (request_id is None)):
        raise UsageError("--result takes a JOB, --request-id R or --batch B, no paths; --to DIR is a directory "
                         "that does not exist yet (default rsk-results/JOB)",
                         "e.g. rsk fetch -r run-7 --result --to results/run-7, or every task's: rsk fetch "
                         "--batch sweep-1 --result --to results/sweep-1; see rsk fetch --help")  # fmt: skip
    if not results and (job is None or (batch is None and not paths)):
        raise UsageError(
            "say what to fetch: rsk fetch JOB PATH...", "e.g. rsk fetch 1234 out/metrics.json --to results/"
        )
    where = (resolve_target(target), resolve_project(project))
    if results:
        from rsk.ops.fetch import fetch_result, result_job

        if many_results and batch is not None:
            from rsk.ops.fetch import fetch_batch_results

            dest = to if to is not None else default_dest(batch)
            whole = fetch_batch_results(*where, batch, caller.path(str(dest)), max_bytes)
            many = whole if every else whole.brief(SUMMARY_ROWS)  # those without a result first, then new ones
            if json_out:
                print_json(many)
                return
            for tr in many.tasks:
                if tr.result is None:
                    out().print(f"{tr.task:<24} job {tr.job_id} ({tr.state}): no result ({tr.why})")
                else:
                    done = "already there" if tr.result.already else f"{tr.result.bytes} bytes, checked"
                    out().print(f"{tr.task:<24} job {tr.job_id}: result in {tr.result.to} ({done})")
            if many.tasks_omitted:
                out().print(f"... and {many.tasks_omitted} more task(s) (--all lists every one)")
            out().print(
                f"{whole.fetched} of {len(whole.tasks)} task(s) of batch {batch} have their result in {dest}/KEY/"
                + (f" ({whole.already} already there)" if whole.already else "")
            )
            return
        named = job or request_id or ""  # a request's result is named for it (a chain's: for the chain, not a link)
        job = job if job is not None else result_job(*where, request_id or "")
        dest = to if to is not None else default_dest(named)
        rep = fetch_result(*where, job, caller.path(str(dest)), partial=partial, max_bytes=max_bytes)
        if json_out:
            print_json(rep)
            return
        what = "partial stage (NOT a result)" if rep.partial else "result"
        done = "was already there" if rep.already else f"fetched: {rep.file_count} file(s), {rep.bytes} bytes, checked"
        out().print(f"job {job}'s {what} in {rep.to}: {done}")
        if rep.skipped:
            from rsk.local.inert import inert
            from rsk.ops.fetch import NAME_RULE

            shown = ", ".join(inert(p) for p in rep.skipped[:10])
            err().print(f"rsk: warning: left out {len(rep.skipped)} file(s) rsk does not fetch ({NAME_RULE}): {shown}")
        return
    assert job is not None
    if batch is not None:  # JOB is the first path: `rsk fetch --batch B out/metrics.json logs/`
        dest = to if to is not None else default_dest(batch)
        full = fetch_batch(*where, batch, [job, *(paths or [])], caller.path(str(dest)), max_bytes)
        report = full if every else full.brief(SUMMARY_ROWS)  # those that lack a path first
        if json_out:
            print_json(report)
            return
        for t in report.tasks:
            lack = f"; missing: {', '.join(t.missing)}" if t.missing else ""
            lack += f"; left out (names rsk does not fetch): {len(t.skipped)}" if t.skipped else ""
            out().print(f"{t.task:<24} job {t.job_id} ({t.state}): {len(t.files)} file(s){lack}")
        if report.tasks_omitted:
            out().print(f"... and {report.tasks_omitted} more task(s) (--all lists every one)")
        out().print(f"fetched {full.bytes} bytes from {len(full.tasks)} task(s) of batch {batch} into {dest}/KEY/")
        return
    dest = to if to is not None else default_dest(job)
    report1 = do_fetch(*where, job, list(paths or []), caller.path(str(dest)), max_bytes)
    if json_out:
        print_json(report1)
        return
    for f in report1.files:
        out().print(f"{f.to}  {f.size} bytes" + (f" (resumed at {f.resumed_from})" if f.resumed_from else ""))
    if report1.skipped:
        from rsk.local.inert import inert
        from rsk.ops.fetch import NAME_RULE

        shown = ", ".join(inert(p) for p in report1.skipped[:10])
        err().print(f"rsk: warning: left out {len(report1.skipped)} file(s) rsk does not fetch ({NAME_RULE}): {shown}")
    out().print(f"fetched {len(report1.files)} file(s), {report1.bytes} bytes from job {job}")


def targets(json_out: JsonOpt = False) -> None:
    from rsk.cluster.targets import TargetList, list_targets
    from rsk.errors import UsageError
    from rsk.local.paths import search_dirs

    found = list_targets()
    if json_out:
        try:
            pinned: str | None = resolve_target(None)
        except UsageError:  # several targets and none chosen
            pinned = None
        print_json(TargetList(pinned=pinned, targets=found))
        return
    if not found:
        from rsk.local.paths import search_dirs

        looked = ", ".join(str(d) for d in search_dirs())
        out().print(f"no targets (looked in {looked}); a target is a NAME.toml file there with host, user and "
                    "remote_root, which the human who owns the cluster account writes")  # fmt: skip
    for t in found:
        where = f"{t.user + '@' if t.user else ''}{t.host}{':' + str(t.port) if t.port else ''}"
        out().print(f"{t.name:<12} {where:<28} root {t.remote_root}  ({t.source})")
    # where rsk looked, first wins: a target missing here is in none of these
    for d in search_dirs():
        n = len(list(d.glob("*.toml"))) if d.is_dir() else 0
        out().print(f"looked in {d}" + (f" ({n} files)" if d.is_dir() else " (absent)"))


def doctor(
    target: Annotated[str | None, typer.Argument(help="Target name.")] = None, json_out: JsonOpt = False
) -> None:
    from rsk.errors import Exit
    from rsk.ops.doctor import doctor as run_doctor

    report = run_doctor(resolve_target(target))
    if json_out:
        print_json(report)
    else:
        o = out()
        mark = {"pass": "ok  ", "fail": "FAIL", "warn": "WARN", "unavailable": "n/a "}
        for c in report.checks:
            o.print(f"{mark[c.result]} {c.name:<13} {c.message}")
            if c.hint and c.result != "pass":
                o.print(f"     {'':<13} hint: {c.hint}")
        o.print("all checks passed" if report.ok else "some checks failed")
    if not report.ok:
        raise typer.Exit(int(Exit.CHECKS))


def gpus(
    target: TargetOpt = None,
    lease: Annotated[
        str | None, typer.Option("--lease", metavar="NAME", help="The GPUs of this lease, as its controller sees them.")
    ] = None,
    project: ProjectOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from rsk.local.inert import inert
    from rsk.ops.gpus import inventory, said

    if lease:
        from rsk.local.project import resolve_project
        from rsk.ops.leases import gpus as lease_gpus

        inv = lease_gpus(resolve_target(target), resolve_project(project), lease)
    else:
        inv = inventory(resolve_target(target))
    if json_out:
        print_json(inv)
        return
    o = out()
    o.print(f"{inv.target}{f' lease {lease}' if lease else ''}: {inv.free} of {inv.total} GPUs free ({inv.at})")
    for n in inv.nodes:
        o.print(f"{n.name} ({n.state.lower()}; {','.join(n.partitions)}): {n.free} of {n.total} free")
        for g in n.gpus:
            kind = f" {g.type}" if g.type else ""
            if g.state != "held":
                o.print(f"  gpu{g.index}{kind}  {g.state}")
                continue
            # whose: a ledger's, by the job's id; any other job's own name is only its words
            who = f"{g.project}/{g.request_id}" if g.project else f"someone else's: {inert(g.job_name or '')}"
            o.print(f"  gpu{g.index}{kind}  held by job {g.job_id} ({who}) since {said(g.since)}")
