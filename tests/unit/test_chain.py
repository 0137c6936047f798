"""A budget as a chain of links (pure): the links' limits, the needs that make Slurm run them in turn."""

from __future__ import annotations

import pytest

from rsk.errors import UsageError
from rsk.ops.status import JobState, outcome
from rsk.ops.wait import _hint
from rsk.request.chain import chain_tasks, link_minutes
from rsk.request.spec import LaunchSpec, build_request
from rsk.request.tasks import parse_tasks, read_tasks
from rsk.wire.states import Facts, State, job_state, skipped_by


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


def test_a_budget_is_rounded_down_and_binds_what_its_links_add_up_to() -> None:
    def links(budget: str, time: str, signal: str) -> tuple[list[int | None], int | None]:
        r = build_request(LaunchSpec(argv=["x"], budget=budget, time=time, signal_before=signal), "p", "me")
        return [t.time_min for t in r.tasks], r.budget_min

    assert links("2:30", "1", "0:30") == ([1, 1], 2)  # 2 min 30 s is 2 whole minutes, never 3
    assert links("5", "2", "1:30") == ([2, 2], 4)  # a 1-min rest would be told at once: left out, and not bound
    assert links("5", "2", "0:30") == ([2, 2, 1], 5)
    with pytest.raises(UsageError, match="at least one minute"):
        links("0:30", "1", "0:10")
    with pytest.raises(UsageError, match="is one link: that is a job, not a chain"):
        links("1:30", "1", "0:30")  # one whole link: Slurm's order of links is what makes a chain


def test_a_link_that_stopped_lets_the_next_go_on_and_one_that_ended_ends_the_chain() -> None:
    assert job_state(Facts(rc=75, signal="none", stop="yielded")) == "stopped"
    assert job_state(Facts(rc=0, signal="USR1")) == "succeeded"  # told before its limit, then finished
    assert skipped_by("pending", [("link1", "notok", "stopped")]) is None
    assert skipped_by("cancelled", [("link1", "notok", "stopped"), ("link2", "notok", "succeeded")]) == "link2"
    assert skipped_by("cancelled", [("link1", "notok", "failed")]) == "link1"


def test_a_tasks_file_whose_one_line_has_a_budget_is_a_chain_of_that_line() -> None:
    line = ('{"key": "train", "argv": ["python", "t.py"], "env": {"A": "1"}, "gpus": 1, "mem": "2G", '
            '"time": "1:00:00", "budget": "2:30:00", "signal_before": "5:00", "max_links": 3}')  # fmt: skip
    read = read_tasks(line, "t.jsonl")
    assert read.tasks == [] and read.chain is not None
    r = build_request(LaunchSpec(chain_line=read.chain, env=["B=2"], cpus=2), "p", "me")
    assert r.budget_min == 150 and r.signal_s == 300 and [t.time_min for t in r.tasks] == [60, 60, 30]
    assert r.name == "train" and r.gpus == 1 and r.cpus == 2 and r.mem_mb == 2048 and r.time_min is None
    assert r.tasks[0].argv == ["python", "t.py"] and r.tasks[0].env == ["B=2", "A=1"]
    flags = LaunchSpec(argv=["python", "t.py"], env=["B=2", "A=1"], name="train", gpus=1, cpus=2, mem="2G",
                       time="1:00:00", budget="2:30:00", signal_before="5:00")  # fmt: skip
    same = build_request(flags, "p", "me")
    assert same.tasks == r.tasks and same.budget_min == r.budget_min and same.signal_s == r.signal_s
    numbers = read_tasks('{"key": "t", "script": "exit 75", "time": 60, "budget": 120}').chain
    assert numbers is not None and build_request(LaunchSpec(chain_line=numbers), "p", "me").budget_min == 120
    with pytest.raises(UsageError, match="is 3 links; at most 2"):
        build_request(LaunchSpec(chain_line=read.chain.model_copy(update={"max_links": 2})), "p", "me")


def test_a_chain_line_is_refused_beside_other_tasks_with_needs_or_with_chain_options_too() -> None:
    chain = '{"key": "train", "argv": ["x"], "time": "1:00:00", "budget": "3:00:00"}'
    with pytest.raises(UsageError, match="a chain is the only task of its file") as beside:
        read_tasks(chain + '\n{"key": "eval", "argv": ["e"], "needs": [{"task": "train", "on": "ended"}]}')
    assert "rsk wait --request-id" in (beside.value.hint or "")
    with pytest.raises(UsageError, match="cannot have needs"):
        read_tasks('{"key": "prep", "argv": ["p"]}\n' + chain[:-1] + ', "needs": ["prep"]}')
    with pytest.raises(UsageError, match="give budget too"):
        read_tasks('{"key": "t", "argv": ["x"], "signal_before": "5:00"}')
    with pytest.raises(UsageError, match="is a chain"):
        parse_tasks(chain)  # a reader of plain batches never takes a chain for one task
    line = read_tasks(chain).chain
    with pytest.raises(UsageError, match="on its line"):
        build_request(LaunchSpec(chain_line=line, budget="4:00:00"), "p", "me")
    with pytest.raises(UsageError, match='its "time"'):
        build_request(LaunchSpec(chain_line=read_tasks('{"key": "t", "argv": ["x"], "budget": 60}').chain), "p", "me")
    with pytest.raises(UsageError, match="no --script, --tasks or --lease"):
        build_request(LaunchSpec(chain_line=line, lease="l"), "p", "me")


def _link(n: int, of: int, state: State, elapsed: int | None) -> JobState:
    return JobState(request_id="run", task=f"link{n}", job_id=f"9_{n - 1}", state=state, exit_code=None, signal=None,
                    elapsed_s=elapsed, limit_s=60, where="", submitted="", link=f"{n}/{of}")  # fmt: skip


def test_a_chain_cancelled_mid_way_is_judged_by_the_link_that_was_running_and_goes_on_by_extend() -> None:
    links = [_link(1, 4, "stopped", 30), _link(2, 4, "cancelled", 12), _link(3, 4, "cancelled", None),
             _link(4, 4, "cancelled", 0)]  # fmt: skip
    assert [j.task for j in outcome(links)] == ["link2"]
    hint = _hint(links, done=True)
    assert "cancelled at link 2/4" in hint and "rsk extend --request-id run" in hint and "retry" not in hint
    assert [j.task for j in outcome([_link(k, 2, "cancelled", None) for k in (1, 2)])] == ["link1"]
    failed = _hint([_link(1, 2, "failed", 5), _link(2, 2, "skipped", None)], done=True)
    assert "ended failed at link 1/2" in failed and "not retried" in failed and "rsk retry" not in failed


def test_a_chain_whose_links_never_yielded_is_not_sent_to_extend() -> None:
    killed = [_link(k, 2, "stopped", 60).model_copy(update={"exit_code": 143, "where": "(time-limit)"}) for k in (1, 2)]
    hint = _hint(killed, done=True)
    assert "no link yielded (exit 75)" in hint and "rsk extend" not in hint
    yielded = [j.model_copy(update={"exit_code": 75}) for j in killed]
    assert "rsk extend --request-id run" in _hint(yielded, done=True)


def test_an_unknown_task_field_is_named_with_the_field_meant_and_the_fields_a_line_takes() -> None:
    with pytest.raises(UsageError) as bad:
        read_tasks('{"key": "a", "argv": ["true"], "gpu": 1}', "t.jsonl")
    assert bad.value.message == "t.jsonl line 1 (task a): unknown field 'gpu' (did you mean 'gpus'?)"
    assert bad.value.hint is not None and "key, argv, script, env" in bad.value.hint and "max_links" in bad.value.hint
