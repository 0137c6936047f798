"""A budget as a chain of links (pure): the links' limits, the needs that make Slurm run them in turn."""

from __future__ import annotations

import pytest

from rsk.errors import UsageError
from rsk.request.chain import chain_tasks, link_minutes
from rsk.request.spec import LaunchSpec, build_request
from rsk.wire.states import Facts, job_state, skipped_by


def test_full_links_then_one_shorter_never_more_than_the_budget() -> None:
    assert link_minutes(3 * 1440, 16 * 60, 10) == [960, 960, 960, 960, 480]  # 3 days in 16-hour links
    assert sum(link_minutes(100, 30, 10)) == 100 and link_minutes(100, 30, 10) == [30, 30, 30, 10]
    with pytest.raises(UsageError, match="is 4 links; at most 3"):
        link_minutes(100, 30, 3)


def test_each_link_needs_every_earlier_link_to_have_stopped() -> None:
    links = chain_tasks(["python", "train.py"], ["A=1"], 3, 1, 30, 10)
    assert [t.key for t in links] == ["link1", "link2", "link3"]
    assert [[n.wire for n in t.needs] for t in links] == [[], ["link1:notok"], ["link1:notok", "link2:notok"]]
    assert {t.time_min for t in links} == {1} and links[2].env == ["A=1"]
    with pytest.raises(UsageError, match="does not fit in a link") as refused:
        chain_tasks(["x"], [], 3, 1, 1800, 10)  # a bare `--signal-before 30` is 30 minutes
    assert "--signal-before 0:30 for links of 1 min" in refused.value.hint  # the margin that fits, written right


def test_a_budget_needs_a_time_and_one_command() -> None:
    with pytest.raises(UsageError, match="needs --time"):
        build_request(LaunchSpec(argv=["x"], budget="3:00:00"), "p", "me")
    with pytest.raises(UsageError, match="give --budget too"):
        build_request(LaunchSpec(argv=["x"], signal_before="1:00"), "p", "me")
    r = build_request(LaunchSpec(argv=["x"], budget="2:30:00", time="1:00:00", signal_before="5:00"), "p", "me")
    assert r.budget_min == 150 and r.signal_s == 300 and [t.time_min for t in r.tasks] == [60, 60, 30]


def test_a_link_that_stopped_lets_the_next_go_on_and_one_that_ended_ends_the_chain() -> None:
    assert job_state(Facts(rc=75, signal="none", stop="yielded")) == "stopped"
    assert job_state(Facts(rc=0, signal="USR1")) == "succeeded"  # told before its limit, then finished
    assert skipped_by("pending", [("link1", "notok", "stopped")]) is None
    assert skipped_by("cancelled", [("link1", "notok", "stopped"), ("link2", "notok", "succeeded")]) == "link2"
    assert skipped_by("cancelled", [("link1", "notok", "failed")]) == "link1"
