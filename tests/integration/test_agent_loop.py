"""What an agent needs to finish work alone, on the lab cluster: a project that sticks, planning without
asking, waiting for work, what the cluster offers, honest answers, and the human told."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from rsk.errors import Exit
from tests.conftest import Lab, rsk
from tests.integration.helpers import finished_output, grant, in_tree, launch, launched


def test_a_project_that_sticks_and_hints_that_carry_it(lab: Lab, project: str, tmp_path: Path) -> None:
    tree = tmp_path / "work"
    (tree / "src" / "deep").mkdir(parents=True)
    r = in_tree(tree, "init", "--project", project, "--target", "lab")
    assert r.rc == 0, r.err
    assert (tree / ".rsk.toml").read_text().count(f'project = "{project}"') == 1
    grant(project, "--jobs", "2")
    deep = tree / "src" / "deep"
    launched_in_tree = in_tree(deep, "launch", "--json", "-r", "t1", "--", "true")
    body = json.loads(launched_in_tree.out)
    assert body["project"] == project and body["target"] == "lab"
    # a flag and RSK_PROJECT override the file
    assert json.loads(in_tree(deep, "status", "--json").out)["project"] == project
    other = in_tree(deep, "status", "--json", env={"RSK_PROJECT": "elsewhere"})
    assert json.loads(other.out)["project"] == "elsewhere"
    # hints name the project and target when they are not what the working tree gives
    plain = rsk("launch", "-t", "lab", "-p", project, "-r", "t2", "--", "true")
    assert f"--project {project}" in plain.out
    pending = rsk("launch", "-t", "lab", "-p", project, "-r", "t3", "--json", "--", "echo", "more")
    assert pending.rc == Exit.PENDING
    assert f"--project {project}" in json.loads(pending.out)["hint"]
    # no project chosen: refused, never the shared default
    assert "no project chosen" in rsk("launch", "-t", "lab", "-r", "t4", "--", "true").err


def test_card_ids_are_found_in_any_project(lab: Lab, project: str) -> None:
    card = json.loads(launch(project, "-r", "c1", command=("echo", "x")).out)["card_id"]
    listed = json.loads(rsk("approvals", "--all-projects", "--json").out)["cards"]  # every project's pending cards
    assert card in [c["id"] for c in listed]
    assert card not in [c["id"] for c in json.loads(rsk("approvals", "-p", f"{project}x", "--json").out)["cards"]]
    assert rsk("approvals", "show", card).rc == 0
    assert rsk("approve", card, "--yes").rc == 0  # no --project: the card says where it belongs
    done = rsk("wait", card, "--json", "--timeout", "60")
    assert done.rc == 0, done.err
    assert json.loads(done.out)["jobs"][0]["state"] == "succeeded"


def test_plan_says_what_would_happen_and_files_nothing(lab: Lab, project: str) -> None:
    r = rsk("plan", "-t", "lab", "-p", project, "--gpus", "1", "--partition", "gpu", "--time", "30", "--json",
            "--", "python", "train.py")  # fmt: skip
    assert r.rc == 0, r.err
    body = json.loads(r.out)
    assert body["would"] == "ask" and body["gpu_hours_worst"] == 0.5 and body["estimate_start"] != "unknown"
    assert json.loads(rsk("approvals", "-p", project, "--json").out)["cards"] == []  # no card
    assert lab.journal(project) == []  # nothing submitted
    g = grant(project, "--jobs", "1", "--max-gpus", "1")
    covered = json.loads(rsk("plan", "-t", "lab", "-p", project, "--json", "--", "true").out)
    assert covered["would"] == "grant" and covered["rule"] == g["grant"]["id"]
    too_big = json.loads(
        rsk("plan", "-t", "lab", "-p", project, "--gpus", "2", "--partition", "gpu", "--json", "--", "true").out
    )
    assert too_big["would"] == "ask" and "GPUs 2 > ceiling 1" in too_big["closest_why"]


def test_a_reused_request_id_is_a_conflict_before_any_card(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "1")
    launched(launch(project, "-r", "same", command=("echo", "a")))
    for verb in ("plan", "launch"):
        r = rsk(verb, "-t", "lab", "-p", project, "-r", "same", "--json", "--", "echo", "b")
        assert r.rc == Exit.CONFLICT, (verb, r.err)
    assert json.loads(rsk("approvals", "-p", project, "--json").out)["cards"] == []


def test_wait_for_a_job_a_request_or_a_batch(lab: Lab, project: str, tmp_path: Path) -> None:
    grant(project, "--jobs", "10")
    quick = launched(launch(project, "-r", "q", command=("sh", "-c", "exit 3")))["job_id"]
    done = rsk("wait", quick, "-t", "lab", "-p", project, "--json", "--timeout", "60")
    assert done.rc == Exit.UNSUCCESSFUL, done.err  # ended, not succeeded: an exit code of its own
    body = json.loads(done.out)
    assert body["status"] == "done" and body["jobs"][0]["state"] == "failed" and body["jobs"][0]["exit_code"] == 3
    assert body["all_succeeded"] is False and f"rsk logs {quick}" in body["hint"]
    launched(launch(project, "-r", "slow", command=("sleep", "60")))
    still = rsk("wait", "-r", "slow", "-t", "lab", "-p", project, "--json", "--timeout", "3")
    assert still.rc == Exit.RUNNING and json.loads(still.out)["status"] == "running"
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps({"key": "ok", "argv": ["true"]}) + "\n" + json.dumps({"key": "bad", "argv": ["false"]}))
    assert rsk("launch", "-t", "lab", "-p", project, "-r", "b1", "--tasks", str(tasks), "--json").rc == 0
    waited = rsk("wait", "--batch", "b1", "-t", "lab", "-p", project, "--json", "--timeout", "60")
    assert waited.rc == Exit.UNSUCCESSFUL, waited.err  # one member failed: not 0
    batch = json.loads(waited.out)
    assert batch["status"] == "done" and batch["counts"] == {"succeeded": 1, "failed": 1}
    assert batch["all_succeeded"] is False
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"key": "a", "argv": ["true"]}) + "\n" + json.dumps({"key": "b", "argv": ["true"]}))
    assert rsk("launch", "-t", "lab", "-p", project, "-r", "b2", "--tasks", str(good), "--json").rc == 0
    fine = rsk("wait", "--batch", "b2", "-t", "lab", "-p", project, "--json", "--timeout", "60")
    assert fine.rc == 0 and json.loads(fine.out)["all_succeeded"] is True, fine.err
    status = json.loads(rsk("status", "-t", "lab", "-p", project, "--batch", "b1", "--json").out)
    assert status["counts"] == {"succeeded": 1, "failed": 1}
    active = json.loads(rsk("status", "-t", "lab", "-p", project, "--active", "--json").out)
    assert [j["request_id"] for j in active["jobs"]] == ["slow"]
    unknown = rsk("wait", "999999", "-t", "lab", "-p", project, "--json")
    assert unknown.rc == Exit.USAGE


def test_info_lists_partitions_policy_and_grants_left(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "7")
    lab.set_policy("max_gpus = 2\n")
    body = json.loads(rsk("info", "lab", "-p", project, "--json").out)
    parts = {p["name"]: p for p in body["partitions"]}
    assert parts["cpu"]["default"] is True and parts["gpu"]["gpus_per_node"] == 4
    assert parts["gpu"]["gpu_types"] == ["fake"] and parts["cpu"]["max_time_min"] == 1440
    assert body["policy"]["max_gpus"] == 2  # a number (no limit: null)
    assert body["grants"][0]["jobs_left"] == 7
    refused = launch(project, "--partition", "gpu", "--gpus", "1", "--nodes", "9")
    assert refused.rc == Exit.REJECTED and "9 nodes are more than the partition's 2" in refused.err


def test_honest_answers_withdraw_cancel_logs_events(lab: Lab, project: str) -> None:
    card = json.loads(launch(project, "-r", "w1").out)["card_id"]
    assert rsk("withdraw", card, "-p", project).rc == 0
    assert json.loads(rsk("approvals", "-p", project, "--json").out)["cards"] == []
    grant(project, "--jobs", "5")
    assert rsk("cancel", "999999", "-t", "lab", "-p", project).rc == Exit.USAGE  # not this project's job
    first = json.loads(rsk("events", "-t", "lab", "-p", project, "--json").out)
    assert first["events"] == [] and "." in first["cursor"]
    idle = json.loads(rsk("events", "-t", "lab", "-p", project, "--after", first["cursor"], "--wait", "60",
                          "--json").out)  # fmt: skip
    assert idle["idle"] is True and idle["note"] == "nothing is pending or running"
    job = launched(launch(project, "-r", "l1", command=("sleep", "30")))["job_id"]
    follow = rsk("logs", job, "-t", "lab", "-p", project, "--follow", "--timeout", "2", "--json")
    body = json.loads(follow.out)
    assert body["timed_out"] is True and body["end"] is None
    assert "stopped following" in rsk("logs", job, "-t", "lab", "-p", project, "--follow", "--timeout", "2").err
    rsk("cancel", job, "-t", "lab", "-p", project)
    deadline = time.monotonic() + 60
    while (end := json.loads(rsk("logs", job, "-t", "lab", "-p", project, "--json").out)["end"]) is None:
        assert time.monotonic() < deadline
        time.sleep(1)
    assert end["signal"] == "TERM" and end["limit_s"] == 3600  # the policy default of 60 min


def _on_a_terminal(*args: str) -> tuple[int, bytes]:
    """rsk run with its standard output on a pseudo-terminal, as a human's: its exit code and what the terminal got."""
    import os
    import pty

    from tests.conftest import ROOT, RSK

    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([*RSK, *args], stdout=slave, stderr=subprocess.DEVNULL, env=env)
    os.close(slave)
    got = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    return proc.wait(timeout=120), got


def test_logs_on_a_terminal_show_a_jobs_escape_codes_as_text(lab: Lab, project: str) -> None:
    """A job prints a screen clear, a fake prompt, OSC 52 (set the clipboard) and a title: on the human's terminal
    `rsk logs` (of a job, of a request) shows them as text; a pipe and --json get the job's bytes as it wrote them."""
    grant(project, "--jobs", "5")
    evil = "ok\\033[2J\\033[H$ \\033]52;c;cnNrIGFwcHJvdmU=\\007\\033]0;owned\\007\\tdone\\n"
    job = launched(launch(project, "-r", "esc1", command=("sh", "-c", f"printf '{evil}'")))["job_id"]
    tail = finished_output(project, job)
    raw = "ok\x1b[2J\x1b[H$ \x1b]52;c;cnNrIGFwcHJvdmU=\x07\x1b]0;owned\x07\tdone\n"
    assert tail["text"] == raw  # --json: the job's text, escapes and all (data)
    piped = rsk("logs", job, "-t", "lab", "-p", project)
    assert piped.rc == 0 and piped.out == raw  # a pipe or a file: the bytes as the job wrote them
    for args in (("logs", job), ("logs", "-r", "esc1")):
        rc, shown = _on_a_terminal(*args, "-t", "lab", "-p", project)
        assert rc == 0, shown
        assert b"\x1b" not in shown and b"\x07" not in shown, shown  # nothing reaches the terminal as a control
        assert b"ok\\x1b[2J\\x1b[H$ \\x1b]52;c;cnNrIGFwcHJvdmU=\\x07\\x1b]0;owned\\x07\tdone" in shown, shown


@pytest.fixture
def notify_hook(tmp_path: Path, rsk_env: Path) -> Path:
    seen = tmp_path / "notified.json"
    config = Path(str(rsk_env)).parent / "config" / "rsk"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(f'[notify]\ncommand = "cat > {seen}"\n')
    return seen


def test_a_filed_card_runs_the_humans_hook_and_a_failing_hook_blocks_nothing(
    lab: Lab, project: str, notify_hook: Path, rsk_env: Path
) -> None:
    r = launch(project, "-r", "n1", command=("echo", "notify"))
    assert r.rc == Exit.PENDING
    card = json.loads(r.out)["card_id"]
    deadline = time.monotonic() + 10
    while not notify_hook.exists() or not notify_hook.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.2)
    told = json.loads(notify_hook.read_text())
    assert told["card_id"] == card and "echo notify" in told["summary"]
    config = Path(str(rsk_env)).parent / "config" / "rsk" / "config.toml"
    config.write_text('[notify]\ncommand = "sleep 30; exit 1"\nurl = "http://127.0.0.1:1/nothing"\n')
    t0 = time.monotonic()
    assert launch(project, "-r", "n2", command=("echo", "again")).rc == Exit.PENDING
    assert time.monotonic() - t0 < 20  # the hook runs detached


def test_the_whole_loop_from_a_fresh_working_tree(lab: Lab, project: str, tmp_path: Path) -> None:
    """init -> plan -> launch --code (pending) -> a human approves -> wait -> status -> fetch -> cancel."""
    tree = tmp_path / "proj"
    (tree / "data").mkdir(parents=True)
    (tree / "train.sh").write_text(
        '#!/bin/sh\nmkdir -p out\necho "trained on $(cat data/input.txt)" > out/result.txt\n'
    )
    (tree / "train.sh").chmod(0o755)
    (tree / "data" / "input.txt").write_text("42 samples\n")
    (tree / ".gitignore").write_text("scratch/\n")
    (tree / "scratch").mkdir()
    (tree / "scratch" / "big.bin").write_bytes(b"x" * 1000)
    import subprocess

    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    assert in_tree(tree, "init", "--project", project, "--target", "lab").rc == 0
    planned = in_tree(tree, "plan", "--code", ".", "-r", "loop-1", "--json", "--", "./train.sh")
    assert planned.rc == 0, planned.err
    plan = json.loads(planned.out)
    assert plan["would"] == "ask" and len(plan["plan"]["code"]) == 64
    # the snapshot's files as the card will list them: untracked ones in, what .gitignore names out
    assert "train.sh" in plan["code_files"] and "data/input.txt" in plan["code_files"], plan["code_files"]
    assert not any(f.startswith("scratch/") for f in plan["code_files"])
    assert plan["code_count"] == len(plan["code_files"])
    pending = in_tree(tree, "launch", "--code", ".", "-r", "loop-1", "--json", "--", "./train.sh")
    assert pending.rc == Exit.PENDING
    card = json.loads(pending.out)["card_id"]
    shown = rsk("approvals", "show", card).out
    assert plan["plan"]["code"] in shown
    assert rsk("approve", card, "--yes").rc == 0  # the human, in their own terminal
    waited = in_tree(tree, "wait", card, "--json", "--timeout", "90")
    assert waited.rc == 0, waited.err
    body = json.loads(waited.out)
    job = body["launch"]["job_id"]
    assert body["jobs"][0]["state"] == "succeeded"
    status = json.loads(in_tree(tree, "status", "--json").out)
    assert [j["state"] for j in status["jobs"] if j["job_id"] == job] == ["succeeded"]
    got = in_tree(tree, "fetch", job, "out/result.txt", "--to", str(tmp_path / "results"), "--json")
    assert got.rc == 0, got.err
    assert (tmp_path / "results" / "out" / "result.txt").read_text() == "trained on 42 samples\n"
    # the ignored file never travelled
    listing = in_tree(tree, "fetch", job, "data", "--to", str(tmp_path / "all"), "--json")
    fetched = {f["path"] for f in json.loads(listing.out)["files"]}
    assert fetched == {"data/input.txt"}
    assert (tmp_path / "all" / "data" / "input.txt").read_text() == "42 samples\n"
    grant(project, "--jobs", "2")
    second = json.loads(in_tree(tree, "launch", "-r", "loop-2", "--json", "--", "sleep", "120").out)
    cancelled = in_tree(tree, "cancel", second["job_id"], "--json")
    assert cancelled.rc == 0 and json.loads(cancelled.out)["results"][0]["result"] == "cancelled"


def test_code_that_changed_on_the_cluster_does_not_run_and_fetch_stays_inside(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    tree = tmp_path / "c"
    tree.mkdir()
    (tree / "run.sh").write_text("#!/bin/sh\necho approved code\n")
    (tree / "run.sh").chmod(0o755)
    grant(project, "--jobs", "5")
    first = launched(rsk("launch", "-t", "lab", "-p", project, "--code", str(tree), "-r", "k1", "--json", "--",
                         "./run.sh"))  # fmt: skip
    assert rsk("wait", first["job_id"], "-t", "lab", "-p", project, "--json", "--timeout", "60").rc == 0
    # a job (same account) rewrites the snapshot; the next job of that exact plan refuses to run it
    digest = first["code"]
    lab.ssh(f"chmod -R u+w {lab.root_sh}/code && echo 'echo EVIL' > {lab.root_sh}/code/{project}/snap/{digest}/run.sh")
    again = rsk("launch", "-t", "lab", "-p", project, "--code", str(tree), "-r", "k2", "--json", "--", "./run.sh")
    assert again.rc == 0, again.err  # its manifest still hashes right, so it plans and submits: the job checks
    job = json.loads(again.out)["job_id"]
    waited = json.loads(rsk("wait", job, "-t", "lab", "-p", project, "--json", "--timeout", "60").out)
    assert waited["jobs"][0]["state"] == "failed" and waited["jobs"][0]["exit_code"] == 2
    log = json.loads(rsk("logs", job, "-t", "lab", "-p", project, "--stream", "stderr", "--json").out)
    assert "differs from the snapshot" in log["text"]
    out = json.loads(rsk("logs", job, "-t", "lab", "-p", project, "--json").out)
    assert "EVIL" not in out["text"]
    # stdout is empty and stderr holds the error: the first call says where to look
    assert out["size"] == 0 and out["other_size"] > 0 and "stderr has" in out["note"]
    assert f"rsk logs {job} --stream stderr" in rsk("logs", job, "-t", "lab", "-p", project).err
    # fetch never leaves the job's directory
    for bad in ("../../journal", "/etc/passwd", "a/../../b"):
        r = rsk("fetch", first["job_id"], bad, "-t", "lab", "-p", project, "--to", str(tmp_path / "x"))
        assert r.rc == Exit.USAGE, (bad, r.err)
    lab.ssh(f"ln -s /etc {lab.root_sh}/runs/{project}/k1/t0/work/etc-link")
    r = rsk("fetch", first["job_id"], "etc-link/passwd", "-t", "lab", "-p", project, "--to", str(tmp_path / "x"))
    assert r.rc == Exit.USAGE and "symlink" in r.err


def test_journal_and_events_share_one_cursor_form(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "3")
    launched(launch(project, "-r", "cur1"))
    ev = json.loads(rsk("events", "-t", "lab", "-p", project, "--json").out)
    journal = json.loads(rsk("journal", "-t", "lab", "-p", project, "--after", ev["cursor"], "--json").out)
    assert journal["events"] == [] and journal["cursor"] == int(ev["cursor"].split(".")[0])
    launched(launch(project, "-r", "cur2"))
    after_journal = json.loads(rsk("events", "-t", "lab", "-p", project, "--after", str(journal["cursor"]),
                                   "--json").out)  # fmt: skip
    assert {e["request_id"] for e in after_journal["events"] if e["kind"] == "journal"} == {"cur2"}
    assert rsk("journal", "-t", "lab", "-p", project, "--after", "x.y", "--json").rc == Exit.USAGE


def test_a_request_the_partition_can_never_run_is_refused_before_any_card(lab: Lab, project: str) -> None:
    """sbatch --test-only accepts a time limit over the partition's (the job would pend forever with
    PartitionTimeLimit): the plan program refuses it with the limit that fits, before the ledger files a card."""
    for verb in ("plan", "launch"):
        r = rsk(verb, "-t", "lab", "-p", project, "--time", "2-00:00:00", "--json", "--", "true")
        assert r.rc == Exit.REJECTED, (verb, r.out, r.err)
        assert "over the partition's 1440 min" in json.loads(r.out)["message"]
    big = rsk("launch", "-t", "lab", "-p", project, "--partition", "gpu", "--gpus", "5", "--json", "--", "true")
    assert big.rc == Exit.REJECTED, big.err
    # what Slurm refuses without saying why is named: the resource, and the most the partition has
    for ask, says in ((["--mem", "8G"], "8192 MB per node is more than its largest node's 4000 MB"),
                      (["--nodes", "3"], "3 nodes are more than the partition's 2")):  # fmt: skip
        r = rsk("plan", "-t", "lab", "-p", project, "--time", "1", *ask, "--json", "--", "true")
        assert r.rc == Exit.REJECTED and says in json.loads(r.out)["message"], r.out
    assert json.loads(rsk("approvals", "-p", project, "--json").out)["cards"] == []  # no card for the human
    assert lab.journal(project) == []  # nothing submitted


def test_a_command_that_exits_0_in_the_kill_grace_after_its_limit_reads_timed_out(lab: Lab, project: str) -> None:
    """One rule (docs/protocol.md): Slurm ended it at its limit, so it is timed-out; exit_code is its own 0."""
    grant(project, "--jobs", "1")
    graceful = ("sh", "-c", "trap 'sleep 1; exit 0' TERM; sleep 600 & wait")
    job = launched(launch(project, "-r", "grace", "--time", "1", command=graceful))["job_id"]
    waited = rsk("wait", job, "-t", "lab", "-p", project, "--json", "--timeout", "150")
    body = json.loads(waited.out)
    assert body["status"] == "done" and body["jobs"][0]["state"] == "timed-out", body
    assert waited.rc == Exit.UNSUCCESSFUL


def test_the_card_lists_the_code_snapshots_files(lab: Lab, project: str, tmp_path: Path) -> None:
    """The human approves code they can inspect: the card names every file of the snapshot, its count and size."""
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "train.py").write_text("print('hi')\n")
    (tree / "pkg" / "model.py").write_text("x = 1\n")
    r = rsk(
        "launch", "-t", "lab", "-p", project, "--code", str(tree), "-r", "c1", "--json", "--", "python3", "train.py"
    )
    assert r.rc == Exit.PENDING, r.err
    card = json.loads(r.out)["card_id"]
    shown = json.loads(rsk("approvals", "show", card, "-p", project, "--json").out)["card"]
    assert sorted(shown["plan"]["code_files"]) == ["pkg/model.py", "train.py"] and shown["plan"]["code_bytes"] == 18
    text = rsk("approvals", "show", card, "-p", project).out
    assert "2 files, 18 bytes" in text and "pkg/model.py" in text and shown["plan"]["code_count"] == 2


# what an agent reads for a 6-task batch, in bytes: the answers stay what it acts on (docs: "Compact answers")
JSON_BOUNDS = {"launch": 1_200, "wait": 4_000, "status": 4_000, "plan": 4_000}  # measured: 792, 2701, 2630, 2759


def test_answers_for_a_six_task_batch_stay_compact(lab: Lab, project: str, tmp_path: Path) -> None:
    grant(project, "--jobs", "6")
    tasks = tmp_path / "six.jsonl"
    tasks.write_text("".join(json.dumps({"key": f"cfg-{i}", "argv": ["true"]}) + "\n" for i in range(6)))
    where = ("-t", "lab", "-p", project)
    sizes = {
        "plan": rsk("plan", *where, "-r", "six", "--tasks", str(tasks), "--json").out,
        "launch": rsk("launch", *where, "-r", "six", "--tasks", str(tasks), "--json").out,
        "wait": rsk("wait", "--batch", "six", *where, "--json", "--timeout", "60").out,
        "status": rsk("status", "--batch", "six", *where, "--json").out,
    }
    launched_ = json.loads(sizes["launch"])
    assert len(launched_["tasks"]) == 6 and launched_["plan"] is None and launched_["plan_hash"]
    assert launched_["gpu_hours"] >= 0 and launched_["allowed_by"]["kind"] == "grant"
    measured = {k: len(v.encode()) for k, v in sizes.items()}
    assert all(measured[k] <= JSON_BOUNDS[k] for k in measured), measured
    full = json.loads(rsk("launch", *where, "-r", "six", "--tasks", str(tasks), "--json", "--verbose").out)
    assert len(full["plan"]["tasks"]) == 6  # the whole plan when asked for


def test_fetch_brings_a_whole_batchs_results_into_a_folder_per_task(lab: Lab, project: str, tmp_path: Path) -> None:
    grant(project, "--jobs", "2")
    tasks = tmp_path / "t.jsonl"
    wrote = ["sh", "-c", 'mkdir -p "$RSK_RUN_DIR/out" && echo 0.25 > "$RSK_RUN_DIR/out/m.json"']
    tasks.write_text(json.dumps({"key": "ok", "argv": wrote}) + "\n" + json.dumps({"key": "bad", "argv": ["false"]}))
    where = ("-t", "lab", "-p", project)
    assert rsk("launch", *where, "-r", "fb", "--tasks", str(tasks), "--json").rc == 0
    assert rsk("wait", "--batch", "fb", *where, "--timeout", "60").rc == Exit.UNSUCCESSFUL
    got = rsk("fetch", "--batch", "fb", "out/m.json", *where, "--to", str(tmp_path / "res"), "--json")
    assert got.rc == 0, got.err
    report = {t["task"]: t for t in json.loads(got.out)["tasks"]}
    assert report["ok"]["missing"] == [] and report["bad"]["missing"] == ["out/m.json"]
    assert (tmp_path / "res" / "ok" / "out" / "m.json").read_text() == "0.25\n"
    assert not (tmp_path / "res" / "bad").exists()


@pytest.mark.serial  # holds every GPU of the lab for a few seconds
def test_a_job_that_can_never_start_is_blocked_and_wait_stops(lab: Lab, project: str) -> None:
    """A pending reason that never clears by itself (here DependencyNeverSatisfied, which an admin's dependency
    on a failed job gives) makes the job read blocked, with Slurm's reason, and rsk wait stop with exit 12."""
    grant(project, "--jobs", "1", "--max-gpus", "1")
    sb = ["runuser", "-u", "rsklab", "--", "sbatch", "--parsable", "--chdir=/tmp", "-o", "/dev/null"]
    failed = subprocess.run([*sb, "--wrap", "false"], capture_output=True, text=True, check=True).stdout.strip()
    hold = [*sb, "-p", "gpu", "-N", "2", "--gres=gpu:4", "-t", "2", "--wrap", "sleep 60"]
    blocker = subprocess.run(hold, capture_output=True, text=True, check=True).stdout.strip()
    try:
        job = launched(launch(project, "-r", "never", "--partition", "gpu", "--gpus", "1", "--time", "5"))["job_id"]
        subprocess.run(["scontrol", "update", f"JobId={job}", f"Dependency=afterok:{failed}"], check=True)
        waited = rsk("wait", job, "-t", "lab", "-p", project, "--json", "--timeout", "60")
        body = json.loads(waited.out)
        assert waited.rc == Exit.BLOCKED, waited.out
        assert body["status"] == "blocked" and body["jobs"][0]["state"] == "blocked"
        assert body["jobs"][0]["where"] == "(DependencyNeverSatisfied)" and "DependencyNeverSatisfied" in body["hint"]
    finally:
        subprocess.run(["scancel", blocker], check=False)


def test_a_journal_read_with_a_limit_pages_from_its_cursor(lab: Lab, project: str) -> None:
    """A sweep's journal is megabytes: `--limit N` (the MCP tool's default 200) gives the first N events after the
    cursor, `more`, and the cursor of the last, from which the next call goes on; every event is read once."""
    grant(project, "--jobs", "2")
    for rid in ("pg1", "pg2"):
        launched(launch(project, "-r", rid))
    whole = json.loads(rsk("journal", "-t", "lab", "-p", project, "--json").out)
    assert len(whole["events"]) >= 4 and not whole["more"]
    pages, after = [], "0"
    while True:
        page = json.loads(rsk("journal", "-t", "lab", "-p", project, "--after", after, "--limit", "3", "--json").out)
        assert len(page["events"]) <= 3 and page["chain_ok"]
        pages += page["events"]
        after = str(page["cursor"])
        if not page["more"]:
            break
        assert page["cursor"] == page["events"][-1]["n"]
    assert pages == whole["events"] and int(after) == whole["cursor"]
