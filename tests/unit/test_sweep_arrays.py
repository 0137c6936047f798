"""How the cluster splits a batch into job arrays and shares its max running among them (docs/adr/0058, 0059): the
submit program's own `arrays` function, run by the local sh on task lines as resolve_tasks writes them. Pure: no
Slurm, no lab."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from rsk.wire.bundle import awk_library, files

SHAPE = "1 1 64 0 1"


def arrays(tasks: list[str], block: int, max_running: int | None, todo: str = "*") -> tuple[list[list[str]], int]:
    """The submit program's arrays(): its lines split at "|" (N, SHAPE, NEEDS, OFFSET, AFTER, ARRAY, IDXS), and the
    count of tasks that can run at once (its last line)."""
    src = files()
    script = "\n".join([
        "set -eu", f"RSK_AWK={shlex.quote(awk_library())}", src["kv.sh"], src["lib.sh"], src["policy.sh"],
        src["submit.sh"], f"TASKOUT={shlex.quote(chr(10).join(tasks))}", f"BLOCK={block}",
        f"MAX_RUNNING={max_running or ''}", f"arrays {shlex.quote(todo)}",
    ])  # fmt: skip
    out = subprocess.run(["sh"], input=script, capture_output=True, text=True, check=True).stdout.splitlines()
    return [line.split("|") for line in out[:-1]], int(out[-1])


def batch(n: int) -> list[str]:
    """A sweep's task lines: n tasks of one shape, none needing another."""
    return [line for i in range(n) for line in (f"S {i} {SHAPE}", f"D {i} 0 -")]


def indices(array: str) -> list[int]:
    listed = array.partition("%")[0]
    return [int(x) for x in listed.split(",")]


def test_a_sweep_past_the_largest_array_is_one_array_a_block_its_indices_from_zero() -> None:
    got, at_once = arrays(batch(1005), 1000, None)
    assert [(a[0], a[3], a[4]) for a in got] == [("1", "0", "-"), ("2", "1000", "-")]
    assert indices(got[0][5]) == list(range(1000)) and indices(got[1][5]) == list(range(5))
    assert got[1][6].split() == [str(i) for i in range(1000, 1005)]  # the tasks: offset + index
    assert "%" not in got[0][5] + got[1][5] and at_once == 1005  # no max running: every task can run


def test_max_running_is_shared_over_the_arrays_and_never_more_than_each_can_use() -> None:
    got, at_once = arrays(batch(1005), 1000, 5)
    assert [a[5].partition("%")[2] for a in got] == ["3", "2"] and at_once == 5
    got, at_once = arrays(batch(1005), 1000, 50)
    assert [a[5].partition("%")[2] for a in got] == ["45", "5"] and at_once == 50  # the small array is full at 5
    got, at_once = arrays(batch(12), 10, 100)
    assert [a[5].partition("%")[2] for a in got] == ["10", "2"] and at_once == 12  # more than the tasks: all of them
    for k in (1, 2, 3, 7, 10, 64):
        got, _ = arrays(batch(95), 10, k)
        running = sum(int(a[5].partition("%")[2]) for a in got if a[4] == "-")
        assert running == min(k, 95) or (k < len(got) and running == k), k


def test_fewer_places_than_arrays_run_them_in_lanes_so_never_more_than_max_running_at_once() -> None:
    got, at_once = arrays(batch(45), 10, 2)  # five arrays, two at a time: 1 and 2, then 3 after 1, 4 after 2, ...
    assert [(a[0], a[4], a[5].partition("%")[2]) for a in got] == [
        ("1", "-", "1"), ("2", "-", "1"), ("3", "1", "1"), ("4", "2", "1"), ("5", "3", "1")
    ]  # fmt: skip
    assert at_once == 5  # each array waiting for its lane holds one place of the cap (docs/adr/0059)


def test_a_workflows_arrays_go_level_by_level_and_only_the_tasks_to_do_are_submitted() -> None:
    tasks = [f"S 0 {SHAPE}", "D 0 0 -", f"S 1 {SHAPE}", "D 1 0 -", "S 2 1 2 64 0 1", "D 2 1 0:ok", f"S 3 {SHAPE}",
             "D 3 1 0:ok,1:any", f"S 4 {SHAPE}", "D 4 0 -"]  # fmt: skip
    got, at_once = arrays(tasks, 1000, None)
    assert [(a[1], a[2], a[6].split()) for a in got] == [
        (SHAPE, "-", ["0", "1", "4"]), ("1 2 64 0 1", "0:ok", ["2"]), (SHAPE, "0:ok,1:any", ["3"])
    ]  # fmt: skip
    got, at_once = arrays(tasks, 1000, 2, todo=" 2 3")  # a replay: tasks 0, 1 and 4 have their jobs
    assert [a[6].split() for a in got] == [["2"], ["3"]] and at_once == 2


@pytest.mark.parametrize(("n", "block", "arrays_"), [(10_000, 1000, 10), (10_000, 100_000, 1), (1001, 1000, 2)])
def test_ten_thousand_tasks_are_as_many_arrays_as_blocks(n: int, block: int, arrays_: int) -> None:
    got, at_once = arrays(batch(n), block, 100)
    assert len(got) == arrays_ and at_once == 100
    assert sorted(int(i) for a in got for i in a[6].split()) == list(range(n))
    assert all(max(indices(a[5])) < block for a in got)
