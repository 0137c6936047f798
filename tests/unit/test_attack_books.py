"""F1: what a job of the cluster account writes (a journal line, a job's output path) reaches an answer's `idx=`,
which the client reads as a number its own program printed: one such value stops every status and reconcile
read of the project (exit 75), and with them the books' settling and every warning the human relies on.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rsk.errors import ProtocolError
from rsk.wire import answers
from rsk.wire.bundle import awk_library
from tests.unit.test_answers import recorded


@pytest.mark.parametrize("crafted", ["99999999999999999999", "9e+99", "abc"])
def test_an_index_a_job_wrote_into_the_journal_never_stops_status(crafted: str) -> None:
    """status.awk copies a journal line's idx when it matches /^[0-9]+$/ (any length), and a job's output path's
    `/tB%Da/` through task_of() (`9e+99`): the project's other jobs are still read, the row's index unknown."""
    from rsk.ops.status import jobs_from

    out = recorded("status", "task= idx=0 job=2184 sq=", f"task= idx={crafted} job=2184 sq=")
    try:
        jobs = jobs_from(out)
    except ProtocolError as exc:  # today: "the cluster's @@job line's idx= is '...', not a number"
        pytest.fail(f"one row a job can shape stopped the whole status read: {exc}")
    assert [j.job_id for j in jobs] == ["2184", "2187", "2190", "2190s1"]


def test_an_open_intent_a_job_forged_never_stops_reconcile() -> None:
    """reconcile.sh prints an open intent's idx as the journal has it (`ev=intent rid=zz idx=abc`)."""
    out = recorded("reconcile_items", "rid=gone idx=1", "rid=gone idx=abc")
    try:
        got = answers.reconcile(out)
    except ProtocolError as exc:
        pytest.fail(f"one journal line a job wrote stopped reconcile: {exc}")
    assert [i.rid for i in got.items] == ["seen", "gone"]


@pytest.mark.parametrize(
    ("path", "bounded"),
    [("/r/t%a/stdout", True), ("/r/t1%3a/stdout", True), ("/r/t9%99a/stdout", False), ("/r/t99999%9a/stdout", False)],
)
def test_task_of_gives_no_index_past_a_batch_whatever_path_a_job_chose(path: str, bounded: bool) -> None:
    """The account sets a job's StdOut freely (`sbatch -o`, `scontrol update StdOut=` while it pends): an index
    is a task's only up to the batch's 10,000 tasks; past that it is no task of rsk's (empty)."""
    prog = awk_library() + 'BEGIN { printf "%s", task_of("123_7", w) }'
    got = subprocess.run(["awk", "-v", f"w={path}", prog], capture_output=True, text=True, check=True,
                         cwd=Path("/")).stdout  # fmt: skip
    if bounded:
        assert got.isdigit() and int(got) < 10000, got
    else:
        assert got == "" or (got.isdigit() and int(got) < 10000), f"task_of gave {got!r} for {path}"


def test_a_job_row_that_does_not_read_is_left_out_and_warned_of_never_the_whole_status() -> None:
    """More generally: whatever one @@job line holds, the other jobs are read and the books kept; the row left out
    is a warning the human sees."""
    from typing import cast

    from rsk.cluster.remote import Remote
    from rsk.ops.status import status_call
    from tests.unit.test_launch_ledger import PROJECT
    from tests.unit.test_status_ledger import RUNNING, _books, _Cluster

    _books()
    st, _ = status_call(cast(Remote, _Cluster(RUNNING, "job rid=r2 job=12 starts=x")), "lab", PROJECT)
    assert [j.job_id for j in st.jobs] == ["11"]
    assert any("job 12" in w and "did not read" in w for w in st.warnings), st.warnings


def test_the_brokers_books_poll_never_fails_silently() -> None:
    """The books poll swallowed a failed status read: while one forged line stopped every read, nothing grew to what
    Slurm held and nobody was told. A failed read is a warning in `rsk grant list` and `rsk approvals` until a
    read succeeds again."""
    from rsk.broker import books
    from rsk.ledger.models import Charge, JobCost
    from rsk.ledger.store import Store
    from rsk.ledger.unread import warnings

    store = Store("p1")
    with store.transaction() as ledger:
        ledger.charges.append(Charge(grant_id="g-1", plan_hash="h", request_id="r1", target="lab", gpu_hours=1.0,
                                     cpu_hours=1.0, state="submitted",
                                     job_costs={"11": JobCost(gpu_hours_worst=1.0, cpu_hours_worst=1.0)}))  # fmt: skip

    def failing(target: str, project: str) -> None:
        raise ProtocolError("the cluster's @@job line's idx= is '9e+99', not a number")

    assert books.watch_once(failing) == 1
    said = warnings(store)
    assert len(said) == 1 and "p1" in said[0] and "on lab" in said[0] and "9e+99" in said[0], said
    assert books.watch_once(lambda target, project: None) == 1
    assert warnings(store) == []
