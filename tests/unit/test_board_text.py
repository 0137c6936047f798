"""The human's job table shows the words a job could write (a task key, a node or reason, a warning) as they are:
no markup read, no terminal escape passed (a job of the account can write the journal and the markers)."""

from __future__ import annotations

import io

from rich.console import Console

from rsk.cli.board import render_status
from rsk.ops.status import JobState, Status

CRAFTED = "[bold]HI[/bold]\x1b[31mRED[link=http://evil.example/]x[/link]\x1b]52;c;aGk=\x07"


def _shown(status: Status, *, terminal: bool) -> str:
    out = io.StringIO()
    console = Console(file=out, width=400, force_terminal=terminal, color_system="standard" if terminal else None)
    console.print(render_status([status]))
    return out.getvalue()


def test_crafted_words_from_the_cluster_are_shown_inert_in_status_and_watch() -> None:
    job = JobState(request_id="zz", task=CRAFTED, job_id="99998", state="running", exit_code=None, signal=None,
                   elapsed_s=1, limit_s=60, where=CRAFTED, submitted="")  # fmt: skip
    status = Status(target="lab", project="p", slurm="up", at="", jobs=[job], warnings=[f"task {CRAFTED} ran"])
    for terminal in (False, True):
        shown = _shown(status, terminal=terminal)
        assert "evil.example" in shown and "[bold]HI[/bold]" in shown  # the words are shown as they are
        assert "\\x1b" in shown and "\\x07" in shown  # escapes shown, never sent
        assert "\x1b]" not in shown and "\x07" not in shown  # no OSC (a link, the clipboard) reaches the terminal
        if not terminal:
            assert "\x1b" not in shown


def test_a_sweep_of_ten_thousand_jobs_is_a_table_a_terminal_can_show_failures_first() -> None:
    def job(i: int, state: str) -> JobState:
        return JobState(request_id="sweep", task=f"t{i}", job_id=f"7_{i}", state=state, exit_code=None, signal=None,
                        elapsed_s=1, limit_s=60, where="n1", submitted="")  # fmt: skip

    jobs = [job(i, "failed" if i == 9_999 else "succeeded" if i < 5_000 else "pending") for i in range(10_000)]
    shown = _shown(Status(target="lab", project="p", slurm="up", at="", jobs=jobs), terminal=False)
    assert len(shown.splitlines()) < 60
    assert "t9999" in shown and "failed" in shown  # the one that failed, though it is the last
    assert "9960 more" in shown and "10000 job(s)" in shown and "5000 succeeded" in shown


def test_a_retried_batch_reads_as_its_tasks_latest_attempts_as_status_of_the_batch_does() -> None:
    """`rsk watch` and `rsk status` of the project: a batch of 4 whose 2 failures a retry (B.a2) ran again is one
    row of counts, 4 succeeded, as `rsk status --batch B` says; not 2 failed beside a block of the retry."""

    def job(rid: str, i: int, state: str) -> JobState:
        return JobState(request_id=rid, task=f"t{i}", job_id=f"{rid}-{i}", state=state, exit_code=None, signal=None,
                        elapsed_s=1, limit_s=60, where="n1", submitted="")  # fmt: skip

    jobs = [job("B", i, "failed" if i < 2 else "succeeded") for i in range(4)] + [job("B.a2", i, "succeeded")
                                                                                    for i in range(2)]  # fmt: skip
    shown = _shown(Status(target="lab", project="p", slurm="up", at="", jobs=jobs), terminal=False)
    assert "4 succeeded" in shown and "failed" not in shown and "= B.a2" not in shown, shown
