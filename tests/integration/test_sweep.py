"""A sweep larger than the cluster's largest job array (the lab's MaxArraySize is 1001: indices 0..1000) is one
launch and one card: Slurm holds it as an array a block of 1,000 tasks, indexed from 0, whose throttles add up to
--max-running; each task runs in its own run directory and reads as itself in status, logs and results; the cluster's
active-jobs cap counts what can run, not what waits (docs/adr/0058, 0059). The test lets a few tasks of the second
array run, then cancels: it never waits for a thousand."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rsk.errors import Exit
from tests.conftest import Lab, rsk

N = 1005


def _sweep(tmp_path: Path) -> Path:
    f = tmp_path / "sweep.jsonl"
    f.write_text("".join(json.dumps({"key": f"s{i}", "argv": ["sh", "-c", f"echo {i} > $RSK_OUT/i; echo seed {i}"]})
                         + "\n" for i in range(N)))  # fmt: skip
    return f


def test_a_sweep_past_the_largest_array_is_one_card_and_runs_each_task_as_itself(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    lab.set_policy("max_active_jobs = 6")  # 1,005 tasks queued, 4 of them able to run at once: within the cap
    tasks = _sweep(tmp_path)
    scope = ("--target", "lab", "--project", project)
    try:
        first = rsk("launch", *scope, "--tasks", str(tasks), "--request-id", "sw", "--max-running", "4",
                    "--mem", "64M", "--time", "2", "--json")  # fmt: skip
        assert first.rc == Exit.PENDING, first.err
        card = json.loads(first.out)["card_id"]
        shown = json.loads(rsk("approvals", "show", card, "--project", project, "--json").out)["card"]
        assert shown["plan"]["jobs"] == N and shown["plan"]["max_running"] == 4 and shown["tasks_file"]
        assert shown["plan"]["cpu_hours"] == pytest.approx(N * 2 / 60)  # every task's worst case, whatever runs at once
        text = rsk("approvals", "show", card, "--project", project).out
        assert "at most 4 running at once" in text and "1005 x" in text  # each kind of task, with its count
        assert "s1004" in rsk("approvals", "show", card, "--project", project, "--all").out  # and, asked, every task
        assert rsk("approve", card, "--project", project, "--yes").rc == 0
        launched = rsk("wait", card, *scope, "--timeout", "1", "--json")
        assert launched.rc in (Exit.OK, Exit.RUNNING, Exit.UNSUCCESSFUL), launched.err
        brief = json.loads(launched.out)["launch"]  # the launch the approval made: its first 50 tasks' jobs
        assert len(brief["tasks"]) == 50 and brief["tasks_omitted"] == N - 50, launched.out[:300]
        every = rsk("wait", card, *scope, "--timeout", "1", "--json", "--all")  # the same launch, every task
        jobs = {t["task"]: t["job_id"] for t in json.loads(every.out)["launch"]["tasks"]}
        assert len(jobs) == N and [jobs[t["task"]] for t in brief["tasks"]] == [t["job_id"] for t in brief["tasks"]]
        first_array, second_array = jobs["s0"].split("_")[0], jobs["s1000"].split("_")[0]
        assert first_array != second_array and jobs["s999"] == f"{first_array}_999"
        assert [jobs[f"s{i}"] for i in (1000, 1004)] == [f"{second_array}_0", f"{second_array}_4"]
        # Slurm holds two arrays whose throttles add up to 4
        throttle = "sed -n 's/.*ArrayTaskThrottle=\\([0-9]*\\).*/\\1/p' | head -n 1"
        held = lab.ssh(f"for j in {first_array} {second_array}; do scontrol show job $j | {throttle}; done")
        assert sum(int(k) for k in held.stdout.split()) == 4, held.stdout
        # the cap counts what can run: another job of the project fits under a cap of 6 (4 + 1), though 1,005 wait
        other = rsk("plan", *scope, "--mem", "64M", "--time", "1", "--json", "--", "true")
        assert other.rc == 0, other.err
        assert json.loads(other.out)["plan"]["active"] <= 4
        # a few tasks of the second array run, each in its own run directory, and read as themselves
        deadline = time.monotonic() + 240
        done: dict[str, dict[str, object]] = {}
        while time.monotonic() < deadline:
            st = json.loads(rsk("status", *scope, "--batch", "sw", "--state", "succeeded", "--json").out)
            assert sum(st["counts"].values()) == N and {j["state"] for j in st["jobs"]} <= {"succeeded"}
            done = {j["task"]: j for j in st["jobs"] if j["task"] in ("s1000", "s1001")}
            running = st["counts"].get("running", 0)
            assert running <= 4, running  # never more than --max-running at once
            assert not any("more than the" in w for w in st["warnings"])
            if len(done) == 2:
                break
            time.sleep(3)
        assert set(done) == {"s1000", "s1001"}, "the second array's first tasks did not run in time"
        # a big batch's answer is a summary: counts of every task, and only the tasks that need attention (none)
        for answer in (rsk("status", *scope, "--batch", "sw", "--json"),
                       rsk("wait", "--batch", "sw", *scope, "--timeout", "1", "--json")):  # fmt: skip
            brief = json.loads(answer.out)
            assert brief["summary"] is True and brief["jobs"] == [] and brief["omitted"] == N, answer.out[:300]
            assert sum(brief["counts"].values()) == N and brief["counts"]["succeeded"] >= 2
            assert len(answer.out) < 4_000
        page = json.loads(rsk("status", *scope, "--batch", "sw", "--limit", "5", "--all", "--json").out)
        assert len(page["jobs"]) == 5 and sum(page["counts"].values()) == N  # counts: the batch, never the page
        assert (
            len(json.loads(rsk("wait", "--batch", "sw", *scope, "--timeout", "1", "--all", "--json").out)["jobs"]) == N
        )
        assert done["s1000"]["job_id"] == f"{second_array}_0" and done["s1000"]["result"] is True
        logs = rsk("logs", f"{second_array}_1", *scope, "--json")
        assert logs.rc == 0 and "seed 1001" in logs.out, logs.out
        assert json.loads(logs.out)["task"] == "s1001" and json.loads(logs.out)["state"] == "succeeded"
        got = rsk("fetch", f"{second_array}_0", "--result", *scope, "--to", str(tmp_path / "r1000"), "--json")
        assert got.rc == 0, got.err
        assert (tmp_path / "r1000" / "i").read_text() == "1000\n"
        runs = f"{lab.root_sh}/runs/{project}/sw"
        run_dir = lab.ssh(f"cat {runs}/t1001/stdout; ls {runs} | wc -l")
        assert run_dir.stdout.split("\n")[0] == "seed 1001" and int(run_dir.stdout.split()[-1]) == N + 1  # + work/
    finally:
        lab.ssh(f"squeue -h -o '%A %j' | awk '$2 == \"rsk:{project}:sw\" {{ print $1 }}' | sort -u | xargs -r scancel")
