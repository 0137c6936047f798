"""A chain as status and wait answer it (pure: recorded status lines): how far it got in numbers, and why its
later links never run."""

from __future__ import annotations

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
