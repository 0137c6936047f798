"""Workflows on the lab Slurm: a DAG in one plan and one card, run in dependency order by Slurm itself,
skips that pass on, an `ended` edge, and a submission that is whole or nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rsk.errors import Exit
from tests.conftest import Lab, Ran, rsk
from tests.integration.helpers import Shims, grant, grant_view


def task(key: str, stamp: str, *needs: str | dict[str, str], fail: bool = False) -> str:
    """A task that records when it started and ended in the shared directory STAMP; with `fail`, it then exits 1
    until STAMP/fixed exists (the fix a retry follows)."""
    end = f"[ -e {stamp}/fixed ]" if fail else "true"
    body = f"date +%s.%N > {stamp}/{key}.start; sleep 1; date +%s.%N > {stamp}/{key}.end; {end}"
    return json.dumps({"key": key, "argv": ["sh", "-c", body], "time": 2, "mem": "100M", "needs": list(needs)})


def example(stamp: str, failing: str = "") -> str:
    """prepare -> 3 seeds of train -> eval of each -> one report (the workflow page's example)."""
    lines = [task("prep", stamp)]
    lines += [task(f"train{i}", stamp, "prep", fail=f"train{i}" == failing) for i in range(3)]
    lines += [task(f"eval{i}", stamp, f"train{i}") for i in range(3)]
    lines += [task("report", stamp, *(f"eval{i}" for i in range(3)))]
    return "\n".join(lines) + "\n"


def launch_tasks(project: str, text: str, tmp_path: Path, *options: str) -> Ran:
    f = tmp_path / "tasks.jsonl"
    f.write_text(text)
    return rsk("launch", "--target", "lab", "--project", project, "--json", "--tasks", str(f), *options)


def wait_batch(project: str, rid: str) -> tuple[int, dict[str, dict[str, Any]]]:
    r = rsk("wait", "--batch", rid, "--target", "lab", "--project", project, "--timeout", "240", "--json")
    assert "jobs" in json.loads(r.out), (r.rc, r.out, r.err)
    return r.rc, {j["task"]: j for j in json.loads(r.out)["jobs"]}


def stamps(lab: Lab, stamp: str) -> dict[str, float]:
    r = lab.ssh(f'cd {stamp} && for f in *; do printf \'%s %s\\n\' "$f" "$(cat "$f")"; done')
    return {line.split()[0]: float(line.split()[1]) for line in r.stdout.splitlines() if len(line.split()) == 2}


def shared(lab: Lab, project: str) -> str:
    stamp = f"/tmp/rsk-wf-{project}"
    assert lab.ssh(f"rm -rf {stamp} && mkdir -p {stamp}").returncode == 0
    return stamp


def test_a_workflow_is_one_card_and_runs_in_dependency_order(lab: Lab, project: str, tmp_path: Path) -> None:
    stamp = shared(lab, project)
    first = launch_tasks(project, example(stamp), tmp_path, "--request-id", "wf")
    assert first.rc == Exit.PENDING, first.err
    card = json.loads(first.out)["card_id"]
    shown = rsk("approvals", "show", card, "--project", project)
    assert "workflow, 8 tasks in 4 levels" in shown.out
    assert "level 1       train0, train1, train2" in shown.out and "needs eval0, eval1, eval2" in shown.out
    cards = json.loads(rsk("approvals", "--project", project, "--json").out)["cards"]
    assert len(cards) == 1  # one card for the whole DAG
    assert rsk("approve", card, "--project", project, "--yes").rc == 0
    sub = json.loads(launch_tasks(project, example(stamp), tmp_path, "--request-id", "wf").out)
    assert sub["status"] == "submitted" and len(sub["tasks"]) == 8
    rc, jobs = wait_batch(project, "wf")
    assert rc == 0 and {j["state"] for j in jobs.values()} == {"succeeded"}, jobs
    st = json.loads(rsk("status", "--batch", "wf", "--target", "lab", "--project", project, "--json").out)
    assert st["levels"] == [{"succeeded": 1}, {"succeeded": 3}, {"succeeded": 3}, {"succeeded": 1}]
    t = stamps(lab, stamp)
    for i in range(3):
        assert t[f"train{i}.start"] >= t["prep.end"]
        assert t[f"eval{i}.start"] >= t[f"train{i}.end"]
        assert t["report.start"] >= t[f"eval{i}.end"]


def test_a_failure_skips_exactly_what_needs_it_an_ended_edge_runs_and_a_retry_runs_only_that(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    grant(project, "--gpu-hours", "1", "--cpu-hours", "5")
    stamp = shared(lab, project)
    text = example(stamp, failing="train1") + task("cleanup", stamp, {"task": "train1", "on": "ended"}) + "\n"
    assert launch_tasks(project, text, tmp_path, "--request-id", "wf").rc == 0
    rc, jobs = wait_batch(project, "wf")
    assert rc == Exit.UNSUCCESSFUL
    states = {k: j["state"] for k, j in jobs.items()}
    assert states == {"prep": "succeeded", "train0": "succeeded", "train1": "failed", "train2": "succeeded",
                      "eval0": "succeeded", "eval1": "skipped", "eval2": "succeeded", "report": "skipped",
                      "cleanup": "succeeded"}, states  # fmt: skip
    assert jobs["eval1"]["where"] == "(needs train1: failed)"
    assert jobs["report"]["where"] == "(needs eval1: skipped)"
    ran = stamps(lab, stamp)
    assert "eval1.start" not in ran and "report.start" not in ran  # skipped: never ran
    assert ran["cleanup.start"] >= ran["train1.end"]
    status = json.loads(rsk("status", "--target", "lab", "--project", project, "--json").out)
    assert status["counts"].get("skipped") == 2
    # fixed: a retry of what failed runs train1, then what it skipped, and not the seeds that succeeded
    assert lab.ssh(f"touch {stamp}/fixed && rm -f {stamp}/*.start {stamp}/*.end").returncode == 0
    again = rsk("retry", "--batch", "wf", "--failed", "--target", "lab", "--project", project, "--json")
    assert again.rc == 0, again.err
    assert json.loads(again.out)["request_id"] == "wf.a2"
    assert sorted(t["task"] for t in json.loads(again.out)["tasks"]) == ["eval1", "report", "train1"]
    rc, jobs = wait_batch(project, "wf")
    assert rc == 0, jobs  # every task's latest attempt succeeded
    assert {k: j["attempt"] for k, j in jobs.items() if j["attempt"] > 1} == {"train1": 2, "eval1": 2, "report": 2}
    assert [h["state"] for h in jobs["train1"]["history"]] == ["failed"]
    # the project's status counts the work as it is now: each retried task once, as its latest attempt
    now = json.loads(rsk("status", "--target", "lab", "--project", project, "--json").out)
    assert "failed" not in now["counts"] and "skipped" not in now["counts"] and now["superseded"] == 3, now["counts"]
    assert sum(now["counts"].values()) == len(jobs), now["counts"]
    first = rsk("status", jobs["train1"]["history"][0]["job_id"], "--target", "lab", "--project", project, "--json")
    assert json.loads(first.out)["jobs"][0]["state"] == "failed"  # an earlier attempt is still read by its id
    ran = stamps(lab, stamp)
    assert set(ran) == {"train1.start", "train1.end", "eval1.start", "eval1.end", "report.start", "report.end"}
    assert ran["eval1.start"] >= ran["train1.end"] and ran["report.start"] >= ran["eval1.end"]
    # a task that succeeded is never retried (exit 2, naming it)
    refused = rsk("retry", "--batch", "wf", "--task", "train0", "--target", "lab", "--project", project)
    assert refused.rc == Exit.USAGE and "train0 is succeeded" in refused.err


def test_tasks_skipped_by_a_failure_give_their_jobs_back_once_the_books_settle(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    """A workflow of three tasks whose first fails: Slurm removes the two that need it before they start, and
    the grant's --jobs counts only the task that ran."""
    grant(project, "--cpu-hours", "1", "--jobs", "3")
    stamp = shared(lab, project)
    text = "\n".join([task("a", stamp, fail=True), task("b", stamp, "a"), task("c", stamp, "b")]) + "\n"
    assert launch_tasks(project, text, tmp_path, "--request-id", "sk").rc == 0
    assert grant_view(project)["jobs_left"] == 0  # all three reserved: the grant has no job left meanwhile
    rc, jobs = wait_batch(project, "sk")
    assert rc == Exit.UNSUCCESSFUL and {k: j["state"] for k, j in jobs.items()} == {
        "a": "failed", "b": "skipped", "c": "skipped"}, jobs  # fmt: skip
    rsk("status", "--target", "lab", "--project", project, "--json")  # settles what ended
    g = grant_view(project)
    assert (g["jobs_spent"], g["jobs_reserved"], g["jobs_left"]) == (1, 0, 2), g
    assert g["status"] == "active"


def test_a_bad_graph_is_refused_before_anything_is_planned(lab: Lab, project: str, tmp_path: Path) -> None:
    cycle = [
        json.dumps({"key": "a", "argv": ["true"], "needs": ["c"]}),
        json.dumps({"key": "b", "argv": ["true"], "needs": ["a"]}),
        json.dumps({"key": "c", "argv": ["true"], "needs": ["b"]}),
    ]
    r = launch_tasks(project, "\n".join(cycle) + "\n", tmp_path)
    assert r.rc == Exit.USAGE and "cycle: a -> c -> b -> a" in r.err, r.err
    unknown = json.dumps({"key": "a", "argv": ["true"], "needs": ["nope", "a"]}) + "\n"
    r = launch_tasks(project, unknown, tmp_path)
    assert r.rc == Exit.USAGE and "a needs nope" in r.err and "a needs itself" in r.err
    assert json.loads(rsk("approvals", "--project", project, "--json").out)["cards"] == []  # no card
    assert lab.journal(project) == []  # nothing sent


def test_a_killed_launch_resumed_with_its_id_leaves_exactly_one_whole_workflow(
    lab: Lab, project: str, tmp_path: Path, sbatch_shim: Shims
) -> None:
    grant(project, "--gpu-hours", "1", "--cpu-hours", "5")
    stamp = shared(lab, project)
    sbatch_shim.arm("kill-after")  # the first level is submitted, then the session dies before anything more
    cut = launch_tasks(project, example(stamp), tmp_path, "--request-id", "wf")
    assert cut.rc != 0
    again = launch_tasks(project, example(stamp), tmp_path, "--request-id", "wf")
    assert again.rc == 0, again.err
    rc, jobs = wait_batch(project, "wf")
    assert rc == 0 and len(jobs) == 8 and {j["state"] for j in jobs.values()} == {"succeeded"}, jobs
    # one submission per task, none twice (Slurm's queue forgets ended jobs: the shim's log does not)
    calls = (sbatch_shim.flags / "sbatch.log").read_text().splitlines()
    tasks = [int(i) for c in calls for w in c.split() if w.startswith("--array=") for i in w[8:].split(",")]
    assert sorted(tasks) == list(range(8)), calls


def test_a_submission_that_fails_midway_withdraws_the_whole_workflow(
    lab: Lab, project: str, tmp_path: Path, shims: Shims
) -> None:
    grant(project, "--gpu-hours", "1", "--cpu-hours", "5")
    count = shims.flags / "n"
    shims.add(
        "sbatch",
        f"""#!/bin/sh
case " $* " in *" --test-only "*) exec /usr/bin/sbatch "$@" ;; esac
n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}
[ "$n" -lt 2 ] || {{ echo "sbatch: error: Batch job submission failed: injected" >&2; exit 1; }}
exec /usr/bin/sbatch "$@"
""",
    )
    stamp = shared(lab, project)
    r = launch_tasks(project, example(stamp), tmp_path, "--request-id", "wf")
    assert r.rc == Exit.REJECTED, r.err
    live = [line for line in lab.jobs_named(f"rsk:{project}:wf") if line.split()[2] in ("PENDING", "RUNNING")]
    assert live == []  # nothing of it is left queued
    assert any("ev=withdrawn" in line for line in lab.journal(project))
    again = launch_tasks(project, example(stamp), tmp_path, "--request-id", "wf")
    assert again.rc == Exit.USAGE and "new request id" in again.err


def test_a_retry_reads_what_the_batch_wrote_and_runs_the_fix_it_is_given(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    grant(project, "--gpu-hours", "1", "--cpu-hours", "5")
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.sh").write_text('cat "$RSK_WORK_DIR/data"; exit 1\n')  # the bug
    work = '"$RSK_WORK_DIR"'
    lines = [
        {"key": "prep", "argv": ["sh", "-c", f"echo prepared > {work}/data"], "time": 2, "mem": "100M"},
        {"key": "train", "argv": ["sh", "-c", f"sh train.sh > {work}/trained"], "time": 2, "mem": "100M",
         "needs": ["prep"]},
    ]  # fmt: skip
    text = "".join(json.dumps(t) + "\n" for t in lines)
    assert launch_tasks(project, text, tmp_path, "--request-id", "wc", "--code", str(code)).rc == 0
    rc, jobs = wait_batch(project, "wc")
    assert rc == Exit.UNSUCCESSFUL and jobs["train"]["state"] == "failed", jobs
    (code / "train.sh").write_text('echo "fixed, $(cat "$RSK_WORK_DIR/data")"\n')  # the fix
    again = rsk("retry", "--batch", "wc", "--failed", "--code", str(code), "--target", "lab", "--project", project,
                "--json")  # fmt: skip
    assert again.rc == 0, again.err
    assert [t["task"] for t in json.loads(again.out)["tasks"]] == ["train"]
    first = json.loads(again.out)
    # the same retry again (its answer lost) answers the attempt it made, while it runs and once it ended
    for when in ("at once", "ended"):
        if when == "ended":
            rc, jobs = wait_batch(project, "wc")
            assert rc == 0 and jobs["train"]["attempt"] == 2, jobs
        same = rsk("retry", "--batch", "wc", "--failed", "--code", str(code), "--target", "lab", "--project",
                   project, "--json")  # fmt: skip
        assert same.rc == 0, (when, same.err)
        answer = json.loads(same.out)
        assert answer["status"] == "replayed" and answer["request_id"] == "wc.a2", (when, answer)
        assert answer["tasks"] == first["tasks"], when
    # the attempt ran the fix, in the batch's own work directory, and read what prep wrote there
    got = lab.ssh(f"cat {lab.root_sh}/runs/{project}/wc/work/trained")
    assert got.stdout.strip() == "fixed, prepared", got
    assert lab.ssh(f"test -e {lab.root_sh}/runs/{project}/wc.a2/work").returncode != 0


def test_a_retry_that_waits_for_a_human_says_to_repeat_the_whole_command(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    """The exit-4 hint of a retry names the command that finds the same card again: --failed and --code kept."""
    grant(project, "--gpu-hours", "1", "--cpu-hours", "5", "--jobs", "2")  # the batch; not its retry
    code = tmp_path / "code"
    code.mkdir()
    (code / "run.sh").write_text("exit 1\n")
    text = "".join(json.dumps({"key": k, "argv": ["sh", "run.sh"], "time": 1, "mem": "64M"}) + "\n" for k in "ab")
    assert launch_tasks(project, text, tmp_path, "--request-id", "rh", "--code", str(code)).rc == 0
    assert wait_batch(project, "rh")[0] == Exit.UNSUCCESSFUL
    again = rsk("retry", "--batch", "rh", "--failed", "--code", str(code), "--target", "lab", "--project", project)
    assert again.rc == Exit.PENDING, again.err
    assert f"rsk retry --batch rh --failed --code {code} --project {project} --target lab` again" in again.err
    same = rsk("retry", "--batch", "rh", "--failed", "--code", str(code), "--target", "lab", "--project", project,
               "--json")  # fmt: skip
    assert same.rc == Exit.PENDING and "rh.a2" in same.out, same.out  # the same card, not a new attempt
