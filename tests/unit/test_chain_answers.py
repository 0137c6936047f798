"""A chain as status and wait answer it (pure: recorded status lines): how far it got in numbers, and why its
later links never run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rsk.ops.status import JobState, chains_of, jobs_from
from rsk.wire.protocol import parse

N = "0" * 32


def chain_jobs(*rows: str) -> list[JobState]:
    out = parse("".join(f"@@{N} {r}\n" for r in [*rows, "done rc=0"]), N)
    assert out is not None
    return jobs_from(out)


def test_links_after_the_one_that_finished_the_work_say_they_were_not_needed() -> None:
    jobs = chain_jobs(
        "job rid=c idx=0 task=link1 job=1 sq=COMPLETED sq_elapsed=50 sq_limit=60 rc=0 res=1,1,1,0,1",
        "job rid=c idx=1 task=link2 job=2 sq=CANCELLED sq_elapsed=0 sq_limit=60 needs=0:notok res=1,1,1,0,1",
        "job rid=c idx=2 task=link3 job=3 sq=PENDING sq_elapsed=0 sq_limit=60 needs=1:notok res=1,1,1,0,1",
    )
    assert [j.state for j in jobs] == ["succeeded", "skipped", "skipped"]
    assert jobs[1].where == "(not needed: link1 finished the work)"
    assert jobs[2].where == "(not needed: link1 finished the work)"  # not "link2 skipped": the cause passes on


def test_links_after_a_failed_link_say_the_chain_ended_there() -> None:
    jobs = chain_jobs(
        "job rid=c idx=0 task=link1 job=1 sq=FAILED sq_elapsed=5 sq_limit=60 rc=1 res=1,1,1,0,1",
        "job rid=c idx=1 task=link2 job=2 sq=CANCELLED sq_elapsed=0 sq_limit=60 needs=0:notok res=1,1,1,0,1",
    )
    assert jobs[1].where == "(not run: the chain ended at link1, failed)"


def test_a_chains_progress_is_in_numbers_with_what_is_left_of_its_budget() -> None:
    jobs = chain_jobs(
        "job rid=c idx=0 task=link1 job=1 sq=COMPLETED sq_elapsed=60 sq_limit=60 rc=75 res=1,1,1,0,1",
        "job rid=c idx=1 task=link2 job=2 sq=RUNNING sq_elapsed=20 sq_limit=60 needs=0:notok res=1,1,1,0,1",
        "job rid=c idx=2 task=link3 job=3 sq=PENDING sq_elapsed=0 sq_limit=60 needs=1:notok res=1,1,1,0,1",
        "job rid=other job=9 sq=RUNNING sq_elapsed=5 sq_limit=60 res=1,1,1,0,1",
    )
    [c] = chains_of("lab", jobs)
    assert (c.request_id, c.link, c.links) == ("c", 2, 3)
    assert (c.run_time_s, c.budget_s, c.left_s) == (80, 180, 100)
    assert c.text == "link 2/3, run time 0:01:20 / 0:03:00"


def test_an_ended_chain_has_nothing_left_and_its_budget_leaves_out_links_that_never_started() -> None:
    # link1 started and was cancelled; link2 was cancelled before it started; the extension's links 3 and 4 ran
    # and link 4 stopped with the budget spent: `rsk extend --budget 6` counted link1 (2 min) and added 4
    jobs = chain_jobs(
        "job rid=c idx=0 task=link1 job=1 sq=CANCELLED sq_elapsed=20 sq_limit=120 res=1,1,1,0,1",
        "job rid=c idx=1 task=link2 job=2 sq=CANCELLED sq_elapsed=0 sq_limit=120 needs=0:notok res=1,1,1,0,1",
        "job rid=c.a2 idx=0 task=link3 job=3 sq=COMPLETED sq_elapsed=60 sq_limit=120 rc=75 res=1,1,1,0,1",
        "job rid=c.a2 idx=1 task=link4 job=4 sq=COMPLETED sq_elapsed=69 sq_limit=120 rc=75 needs=0:notok res=1,1,1,0,1",
    )
    [c] = chains_of("lab", jobs)
    assert (c.link, c.links) == (4, 4)
    assert (c.run_time_s, c.budget_s, c.left_s) == (149, 360, 0)
    assert c.unused_s == 120 and c.text.endswith("(0:02:00 of links never started, given back)")  # link2's


def test_an_extended_chain_says_the_links_not_needed_gave_their_time_back() -> None:
    # `rsk extend --budget 10` of a chain of 3 two-minute links added link4 and link5; link4 finished the work
    jobs = chain_jobs(
        *(f"job rid=c idx={k} task=link{k + 1} job={k + 1} sq=COMPLETED sq_elapsed=100 sq_limit=120 rc=75"
          + (f" needs={k - 1}:notok" if k else "") + " res=1,1,1,0,2" for k in range(3)),
        "job rid=c.a2 idx=0 task=link4 job=4 sq=COMPLETED sq_elapsed=30 sq_limit=120 rc=0 res=1,1,1,0,2",
        "job rid=c.a2 idx=1 task=link5 job=5 sq=CANCELLED sq_elapsed=0 sq_limit=120 needs=0:notok res=1,1,1,0,2",
    )  # fmt: skip
    [c] = chains_of("lab", jobs)
    assert (c.budget_s, c.unused_s) == (480, 120)  # 8:00 that ran or could have, and link5's 2:00: the 10:00 asked
    assert c.text == "link 4/5, run time 0:05:30 / 0:08:00 (0:02:00 of links never started, given back)"


# the misread under a busy lab: link 2 ended on Slurm (FAILED: its wrapper's exit 75, or its wrapper killed before
# it could write its marker) and no marker is there to say how
LINK1 = "job rid=x idx=0 task=link1 job=7_0 sq=FAILED sq_elapsed=3 sq_limit=60 rc=75 sig=none elapsed=3 stop=yielded"
LINK2 = "job rid=x idx=1 task=link2 job=8_1 sq=FAILED sq_elapsed=0 sq_limit=60 needs=0:notok"
MARKED = " rc=75 sig=none elapsed=3 limit=60 stop=budget-spent"


def test_a_link_slurm_ended_without_its_marker_is_ending_never_failed() -> None:
    link1, link2 = chain_jobs(LINK1 + " res=1,1,1,0,1", LINK2 + " res=1,1,1,0,1")
    assert (link1.state, link1.where) == ("stopped", "(yielded)")
    assert link2.state == "ending" and link2.exit_code is None and link2.link == "2/2"
    [c] = chains_of("lab", [link1, link2])
    assert (c.link, c.left_s) == (2, 0)  # Slurm says it ran: nothing of it is left to run
    link1, link2 = chain_jobs(LINK1 + " res=1,1,1,0,1", LINK2 + MARKED + " res=1,1,1,0,1")
    assert (link2.state, link2.where, link2.exit_code) == ("stopped", "(budget-spent)", 75)


def test_wait_and_the_books_settle_only_on_a_settled_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """`rsk wait` answers `running` (exit 10) while a link is ending, and done once its marker says how it ended;
    its charge settles on Slurm's record of its run (FAILED after 3 s) either way, never at its worst case."""
    from contextlib import contextmanager

    from rsk.ledger.models import Charge, JobCost
    from rsk.ledger.store import Store
    from rsk.ops import wait
    from tests.unit.test_status_ledger import _Cluster

    with Store("p").transaction() as ledger:
        ledger.charges.append(Charge(grant_id="g-1", plan_hash="h", request_id="x", target="lab", gpu_hours=0,
                                     cpu_hours=2 / 60, state="submitted",
                                     job_costs={j: JobCost(gpu_hours_worst=0, cpu_hours_worst=1 / 60)
                                                for j in ("7_0", "8_1")}))  # fmt: skip
    answers = [_Cluster(LINK1, LINK2.replace("sq_elapsed=0", "sq_elapsed=3")), _Cluster(LINK1, LINK2 + MARKED)]

    @contextmanager
    def remote_for(_: str) -> Iterator[_Cluster]:
        yield answers.pop(0)

    monkeypatch.setattr(wait, "remote_for", remote_for)
    first = wait.wait_jobs("lab", "p", request_id="x", timeout=0.001)
    assert first.status == "running" and first.all_succeeded is None
    assert [j.state for j in first.jobs] == ["stopped", "ending"]
    costs = Store("p").archive.charges()[0].job_costs
    assert [(c.cpu_hours_used, c.at_worst) for c in costs.values()] == [(1 / 60 * 3 / 60, False)] * 2
    done = wait.wait_jobs("lab", "p", request_id="x", timeout=0.001)
    assert done.status == "done" and [j.state for j in done.jobs] == ["stopped", "stopped"]
