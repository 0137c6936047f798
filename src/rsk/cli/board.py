"""Rich rendering of job tables (status, watch). Every word in them may come from the cluster, where a job of the
account can write the journal: each is shown as inert text (rsk.local.inert), never parsed as markup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rsk.local.inert import inert
from rsk.ops.board import BatchView, batches, duration, with_attempts

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.text import Text

    from rsk.ops.status import JobState, Status

STYLE = {
    "pending": "yellow",
    "blocked": "red",
    "running": "cyan",
    "ending": "cyan",
    "succeeded": "green",
    "failed": "red",
    "cancelled": "magenta",
    "timed-out": "red",
    "skipped": "magenta",
    "lost": "red",
    "unknown": "dim",
}


FOLD_JOBS = 40  # a batch of more jobs shows this many, those a human looks at first; --json lists every one
_FIRST = {"failed": 0, "timed-out": 0, "lost": 0, "blocked": 0, "unknown": 0, "cancelled": 1, "running": 2}


def latest_views(statuses: list[Status]) -> list[BatchView]:
    """Each request with its later attempts as one view of each task's latest attempt, as `rsk status --batch B`
    counts it: a batch retried reads what it is now, not its first try's failures beside a block of the retry."""
    from rsk.ops.status import of_request

    views = with_attempts(batches(statuses))
    for v in views:
        if v.attempts and not v.request_id.startswith("lease "):
            v.jobs = of_request(v.jobs, v.request_id)
    return views


def fold_jobs(jobs: list[JobState]) -> list[JobState]:
    """A big batch's jobs worth a row: the failed and blocked first, then the cancelled, the running, and the rest, in
    their order within each, FOLD_JOBS of them (a sweep of 10,000 tasks stays a table a terminal can show)."""
    if len(jobs) <= FOLD_JOBS:
        return jobs
    return sorted(jobs, key=lambda j: _FIRST.get(j.state, 3))[:FOLD_JOBS]


def _resources(j: JobState) -> str:
    if j.nodes is None:
        return "-"
    gpu = f" {j.gpus}g" if j.gpus else ""
    return f"{j.nodes}n {j.cpus}c {j.mem_mb}M{gpu}"


def _cell(value: str, style: str = "") -> Text:
    """A table cell or line of words from the cluster: escapes shown, markup not read."""
    from rich.text import Text

    return Text(inert(value), style=style)


def render_status(statuses: list[Status], stale: dict[str, str] | None = None, title: str = "") -> RenderableType:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    stale = stale or {}
    table = Table(title=title or None, expand=False, show_lines=False, padding=(0, 1))
    # what a human scans for never truncates (job, state, time); the rest folds on narrow terminals
    table.add_column("batch", overflow="fold", max_width=24)
    table.add_column("task", overflow="fold", max_width=40)  # a sweep's keys (lr0.6-wd0.0001-s0) on one line
    table.add_column("job", no_wrap=True, min_width=5)
    table.add_column("state", no_wrap=True, min_width=9)
    table.add_column("elapsed/limit", no_wrap=True, min_width=15)
    table.add_column("resources", overflow="fold")
    table.add_column("node/reason", overflow="fold")
    table.add_column("exit", overflow="fold")
    for view in latest_views(statuses):
        shown = fold_jobs(view.jobs)
        for j in shown:
            state = _cell(j.state, STYLE.get(j.state, ""))
            if j.undecided:  # the ledger never allowed it (rsk.ops.status.mark_undecided)
                state = _cell(f"{j.state} UNDECIDED", "bold red")
            exit_text = str(j.exit_code) if j.exit_code is not None else ""
            if j.signal:
                exit_text += f" ({j.signal})"
            elapsed = f"{duration(j.elapsed_s)}/{duration(j.limit_s)}"
            task = j.task or (j.request_id if j.lease else "")  # a lease's rows: each step's request id
            table.add_row(*map(_cell, (view.request_id, task, j.job_id)), state, elapsed, _resources(j),
                          _cell(j.where), _cell(exit_text))  # fmt: skip
        if len(view.jobs) == 1:
            table.add_section()
            continue
        if len(shown) < len(view.jobs):
            table.add_row(Text(f"  ... {len(view.jobs) - len(shown)} more", style="dim"), "", "", "", "", "",
                          "--json lists every job", "")  # fmt: skip
        counts = ", ".join(f"{n} {s}" for s, n in sorted(view.counts.items()))
        if view.chain:  # a chain: how far it got
            table.add_row(Text("  chain", style="dim"), "", "", _cell(view.chain), "", "", "", "")
        for i, level in enumerate([] if view.chain else view.levels):  # a workflow: what each level has done
            table.add_row(Text(f"  level {i}", style="dim"), f"{sum(level.values())} task(s)", "",
                          _cell(", ".join(f"{n} {s}" for s, n in sorted(level.items()))), "", "", "", "")  # fmt: skip
        table.add_row(
            _cell(f"= {view.request_id}", "bold"), f"{len(view.jobs)} job(s)", "", _cell(counts), "",
            _cost(view, statuses), "", "",
            end_section=True,
        )  # fmt: skip
    parts: list[RenderableType] = [table]
    for st in statuses:
        if st.omitted:  # a filter, a summary or a limit: what the table leaves out is counted still
            counts = ", ".join(f"{n} {s}" for s, n in sorted(st.counts.items()))
            parts.append(Text(f"{st.target}: {len(st.jobs)} of {len(st.jobs) + st.omitted} job(s) listed "
                              f"(all of them: {counts}); --all --json lists every job"))  # fmt: skip
    for st in statuses:
        if st.slurm == "down":
            parts.append(Text(f"{st.target}: Slurm controller not answering; states may be stale", style="yellow"))
    for st in statuses:
        for warning in st.warnings:
            parts.append(_cell(f"{st.target}: WARNING: {warning}", "bold red"))
    for target, why in stale.items():
        parts.append(_cell(f"{target}: STALE: {why}", "bold yellow"))
    if not any(st.jobs or st.omitted for st in statuses):
        parts.append(Text("no rsk jobs yet"))
    return Group(*parts)


def _cost(view: BatchView, statuses: list[Status]) -> str:
    """What the request costs, its later attempts with it: the books' charges of them (status's `costs`), else an
    estimate from its jobs' times."""
    held = [st.costs[r] for st in statuses if st.target == view.target
            for r in (view.request_id, *view.attempts) if r in st.costs]  # fmt: skip
    c = None
    if held:
        c = held[0].model_copy(update={k: sum(getattr(x, k) for x in held) for k in type(held[0]).model_fields})
    if c is None:
        return (f"~{view.cpu_hours_used:.2f} CPU-h, {view.gpu_hours_used:.2f} GPU-h used; "
                f"{view.cpu_hours_reserved:.2f} CPU-h, {view.gpu_hours_reserved:.2f} GPU-h reserved")  # fmt: skip
    return (f"{c.cpu_hours_used:.2f} CPU-h, {c.gpu_hours_used:.2f} GPU-h used; "
            f"{c.cpu_hours_reserved:.2f} CPU-h, {c.gpu_hours_reserved:.2f} GPU-h reserved")  # fmt: skip
