"""Long work on the lab Slurm: a budget as a chain of one-minute links queued up front, driven by the cluster,
each link told before its limit (SIGUSR1, 30 s) and going on only when it stopped short of success."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from rsk.errors import Exit
from tests.conftest import ROOT, RSK, Lab, Ran, rsk
from tests.integration.helpers import grant, grant_view


def chain_args(project: str, rid: str, body: str, budget: str = "3") -> list[str]:
    return ["launch", "--target", "lab", "--project", project, "--json", "--request-id", rid, "--budget", budget,
            "--time", "1", "--signal-before", "0:30", "--mem", "100M", "--", "sh", "-c", body]  # fmt: skip


def chain(project: str, rid: str, body: str, budget: str = "3") -> Ran:
    return rsk(*chain_args(project, rid, body, budget))


def until(what: str, check: Any, timeout: float = 120) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"gave up waiting: {what}")


def link_states(project: str, rid: str) -> dict[str, str]:
    r = rsk("status", "--request-id", rid, "--target", "lab", "--project", project, "--json")
    return {j["task"]: j["state"] for j in json.loads(r.out)["jobs"]} if r.rc == 0 else {}


def links(project: str, rid: str) -> tuple[int, dict[str, dict[str, Any]]]:
    r = rsk("wait", "--request-id", rid, "--target", "lab", "--project", project, "--timeout", "240", "--json")
    doc = json.loads(r.out)
    assert "jobs" in doc, (r.rc, r.out, r.err)
    return r.rc, {j["task"]: j for j in doc["jobs"]}


def test_a_command_that_yields_runs_in_exactly_its_links_spends_the_budget_and_extends(lab: Lab, project: str) -> None:
    grant(project, "--cpu-hours", "1")
    body = 'echo "$RSK_LINK/$RSK_LINKS $RSK_BUDGET" >> "$RSK_WORK_DIR/seen"; exit 75'
    r = chain(project, "y", body)
    assert r.rc == 0, r.err
    assert len(json.loads(r.out)["tasks"]) == 3
    rc, got = links(project, "y")
    assert rc == Exit.UNSUCCESSFUL  # a chain that spent its budget did not succeed
    assert {k: j["state"] for k, j in got.items()} == {"link1": "stopped", "link2": "stopped", "link3": "stopped"}
    assert got["link1"]["where"] == "(yielded)" and got["link3"]["where"] == "(budget-spent)"
    st = json.loads(rsk("status", "--request-id", "y", "--target", "lab", "--project", project, "--json").out)
    assert st["chain"].startswith("link 3/3, run time ") and st["chain"].endswith(" / 0:03:00"), st["chain"]
    seen = lab.ssh(f"cat {lab.root_sh}/runs/{project}/y/work/seen").stdout.split()
    assert seen == ["1/3", "180", "2/3", "180", "3/3", "180"]  # every link saw the one work directory
    # more budget: two more links, numbered on, in the same directory; only the extra is planned
    more = rsk("extend", "--request-id", "y", "--budget", "5", "--target", "lab", "--project", project, "--json")
    assert more.rc == 0, more.err
    assert json.loads(more.out)["request_id"] == "y.a2" and len(json.loads(more.out)["tasks"]) == 2
    rc, got = links(project, "y")
    assert rc == Exit.UNSUCCESSFUL and got["link5"]["where"] == "(budget-spent)" and len(got) == 5
    seen = lab.ssh(f"cat {lab.root_sh}/runs/{project}/y/work/seen").stdout.split()
    assert seen[6:] == ["4/5", "120", "5/5", "120"]
    refused = rsk("extend", "--request-id", "y", "--budget", "4", "--target", "lab", "--project", project)
    assert refused.rc == Exit.USAGE and "already has 5 min" in refused.err
    # the same extend again (its answer lost) answers the extension it made, as a repeated launch does
    same = rsk("extend", "--request-id", "y", "--budget", "5", "--target", "lab", "--project", project, "--json")
    assert same.rc == 0 and json.loads(same.out)["status"] == "replayed", (same.out, same.err)
    assert json.loads(same.out)["request_id"] == "y.a2" and len(json.loads(same.out)["tasks"]) == 2


def test_a_checkpointed_run_resumes_on_the_next_link_and_later_links_never_start(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    grant(project, "--cpu-hours", "1")
    # link 1 checkpoints, then waits for SIGUSR1 and exits 1; link 2 finds the checkpoint and succeeds
    body = ('if [ -e "$RSK_WORK_DIR/ckpt" ]; then echo "resumed at $RSK_RUN_TIME" | tee "$RSK_OUT/r"; exit 0; fi; '
            'touch "$RSK_WORK_DIR/ckpt"; trap "exit 1" USR1; while :; do sleep 1; done')  # fmt: skip
    assert chain(project, "ck", body).rc == 0
    held = grant_view(project)["cpu_hours_reserved"]
    assert abs(held - 3 / 60) < 1e-6, held  # the chain's worst case: every link for its whole limit, one CPU
    rc, got = links(project, "ck")
    assert rc == 0, got  # the chain succeeded: its last link that ran did
    assert got["link1"]["state"] == "stopped" and got["link1"]["where"] == "(time-limit: exit 1 after SIGUSR1)"
    assert got["link2"]["state"] == "succeeded"
    assert got["link3"]["state"] == "skipped" and got["link3"]["where"] == "(not needed: link2 finished the work)"
    assert got["link3"]["elapsed_s"] in (0, None)  # removed by Slurm before it allocated anything
    log = rsk("logs", got["link2"]["job_id"], "--target", "lab", "--project", project, "--json")
    assert "resumed at" in json.loads(log.out)["text"]
    # how far it got, in numbers, wherever its jobs are answered
    where = ["--target", "lab", "--project", project]
    c = json.loads(rsk("wait", "-r", "ck", *where, "--timeout", "30", "--json").out)["chain"]
    # (its budget counts the links that started, each at its whole limit: link3, never needed, counts nothing;
    # every link has ended, so nothing is left)
    assert (c["request_id"], c["link"], c["links"], c["budget_s"]) == ("ck", 2, 3, 120), c
    assert c["left_s"] == 0 and c["run_time_s"] > 0 and c["text"].startswith("link 2/3, ")
    assert json.loads(rsk("status", "-r", "ck", *where, "--json").out)["chains"] == [c]
    # each link's output, in order, labelled; a link that never ran says so
    every = json.loads(rsk("logs", "-r", "ck", *where, "--json").out)
    assert [(t["task"], t["state"]) for t in every["logs"]] == [("link1", "stopped"), ("link2", "succeeded"),
                                                               ("link3", "skipped")]  # fmt: skip
    assert "resumed at" in every["logs"][1]["text"] and every["logs"][2]["note"].startswith("never ran")
    shown = rsk("logs", "-r", "ck", *where).out
    assert shown.index("==> link1: job") < shown.index("==> link2: job") < shown.index("resumed at"), shown
    res = rsk("fetch", "-r", "ck", "--result", "--to", str(tmp_path / "res"), "--target", "lab", "--project", project,
              "--json")  # fmt: skip
    assert res.rc == 0 and json.loads(res.out)["job_id"] == got["link2"]["job_id"], res.err  # the chain's result
    assert (tmp_path / "res" / "r").read_text().startswith("resumed at")
    named = rsk("fetch", "-r", "ck", "--result", *where, "--json", cwd=tmp_path)  # named for the chain, not a link
    assert named.rc == 0 and (tmp_path / "rsk-results" / "ck" / "r").is_file(), (named.out, named.err)
    rsk("status", "--target", "lab", "--project", project, "--json")  # settles what ended
    g = grant_view(project)
    used = sum((j["elapsed_s"] or 0) * j["cpus"] for j in got.values()) / 3600
    assert g["cpu_hours_reserved"] == 0 and abs(g["cpu_hours_spent"] - used) < 0.002, (g, used)


def test_links_a_chain_never_needed_give_their_jobs_back_and_a_job_cannot_read_as_never_started(
    lab: Lab, project: str
) -> None:
    """Link 1 finishes the work: Slurm removes links 2 and 3 before they start, and once the books settle they
    count no job against the grant's --jobs (nor any CPU-h). A job that started and then cancels itself at once,
    with its started marker gone, still counts: Slurm names the node it ran on."""
    grant(project, "--cpu-hours", "1", "--jobs", "5")
    assert chain(project, "one", 'echo done > "$RSK_OUT/r"').rc == 0
    assert grant_view(project)["jobs_spent"] == 3  # queued up front: every link counts while it may run
    rc, got = links(project, "one")
    assert rc == 0 and [got[k]["state"] for k in ("link1", "link2", "link3")] == ["succeeded", "skipped", "skipped"]
    # the links are skipped on rsk's reading at once; the books settle once Slurm has removed them too (its
    # kill_invalid_depend pass), which a busy controller does a little later
    deadline = time.monotonic() + 60
    while True:
        rsk("status", "--target", "lab", "--project", project, "--json")  # settles what ended
        g = grant_view(project)
        if g["cpu_hours_reserved"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert (g["jobs_spent"], g["jobs_reserved"], g["jobs_left"]) == (1, 0, 4), g
    assert abs(g["cpu_hours_spent"] - (got["link1"]["elapsed_s"] or 0) / 3600) < 0.002, g
    # a job that ran, cancelled itself at once and removed its marker: it started, so it counts
    body = 'rm -f "$RSK_RUN_DIR/started"; /usr/bin/scancel "$SLURM_JOB_ID"; sleep 30'
    r = rsk("launch", "--target", "lab", "--project", project, "--json", "--request-id", "self", "--time", "1",
            "--mem", "100M", "--", "sh", "-c", body)  # fmt: skip
    assert r.rc == 0, r.err
    done = rsk("wait", "--request-id", "self", "--target", "lab", "--project", project, "--timeout", "120", "--json")
    assert json.loads(done.out)["jobs"][0]["state"] == "cancelled", done.out
    rsk("status", "--target", "lab", "--project", project, "--json")
    g = grant_view(project)
    assert (g["jobs_spent"], g["jobs_reserved"]) == (2, 0), g


def test_a_failure_before_the_signal_ends_the_chain_and_cancel_leaves_no_link_queued(lab: Lab, project: str) -> None:
    grant(project, "--cpu-hours", "1")
    assert chain(project, "f", "exit 3").rc == 0
    rc, got = links(project, "f")
    assert rc == Exit.UNSUCCESSFUL
    assert [got[k]["state"] for k in ("link1", "link2", "link3")] == ["failed", "skipped", "skipped"]
    assert got["link1"]["exit_code"] == 3
    # mid-chain: link 1 yields at once, link 2 runs; cancel then leaves no link queued and link 3 never starts
    # (link 2 ignores SIGUSR1: Slurm may send it well before the margin, and link 2 must be running when cancelled)
    assert chain(project, "c", 'if [ "$RSK_LINK" = 2 ]; then trap "" USR1; sleep 120; fi; exit 75').rc == 0
    until("link2 running", lambda: link_states(project, "c").get("link2") == "running")
    time.sleep(2)  # link 2 has run a while
    cancel = rsk("cancel", "--request-id", "c", "--target", "lab", "--project", project, "--json")
    assert cancel.rc == 0, cancel.err
    live = [line for line in lab.jobs_named(f"rsk:{project}:c") if line.split()[2] in ("PENDING", "RUNNING")]
    assert live == []
    rc, got = links(project, "c")
    assert rc == Exit.UNSUCCESSFUL and got["link1"]["state"] == "stopped" and got["link2"]["state"] == "cancelled"
    assert got["link3"]["state"] in ("cancelled", "skipped") and got["link3"]["elapsed_s"] in (0, None), got["link3"]
    # a cancel is a pause: the hint says so, and extend goes on from the chain's work directory (link 4 of 4)
    hint = json.loads(rsk("wait", "--request-id", "c", "--target", "lab", "--project", project, "--json").out)["hint"]
    assert "cancelled at link 2/3" in hint and "rsk extend" in hint, (hint, got)
    # links 1 and 2 ran (2 min), link 3 never started: a new total of 3 min is one more link
    more = rsk("extend", "--request-id", "c", "--budget", "3", "--target", "lab", "--project", project, "--json")
    assert more.rc == 0 and len(json.loads(more.out)["tasks"]) == 1, more.err
    rc, got = links(project, "c")
    assert got["link4"]["state"] == "stopped" and got["link4"]["where"] == "(budget-spent)", got["link4"]


def test_an_extension_card_says_what_the_chain_ran_and_cost_and_its_total(lab: Lab, project: str) -> None:
    """With no grant, a chain and its extension each wait for a human; the extension's card, in the terminal,
    says what the chain's links ran and cost on the books (settled on Slurm's word) and the total if the
    extension is spent in full."""
    import re

    body = "sleep 3; exit 75"
    first = chain(project, "x", body, budget="2")
    assert first.rc == Exit.PENDING, first.err
    assert rsk("approve", json.loads(first.out)["card_id"], "--project", project, "--yes").rc == 0
    assert chain(project, "x", body, budget="2").rc == 0
    _, got = links(project, "x")
    assert [got[k]["state"] for k in ("link1", "link2")] == ["stopped", "stopped"], got
    ran_s = sum(j["elapsed_s"] for j in got.values())
    more = rsk("extend", "--request-id", "x", "--budget", "3", "--target", "lab", "--project", project, "--json")
    assert more.rc == Exit.PENDING, more.err
    card = json.loads(more.out)["card_id"]
    for argv in (["approvals", "show", card], ["approvals"]):
        text = rsk(*argv, "--project", project).out
        m = re.search(
            r"so far +2 link\(s\) ran \(of 2 queued\), run time 0:00:(\d\d), 0\.00 GPU-h, (\d\.\d\d) CPU-h", text
        )
        assert m and int(m[1]) == ran_s, text
        assert abs(float(m[2]) - ran_s / 3600) < 0.006, text  # one CPU for the time Slurm says the links ran
        total = f"3 links, run time 0:01:{ran_s:02d}, 0.00 GPU-h, {ran_s / 3600 + 1 / 60:.2f} CPU-h"
        assert f"in all        if this extension is spent in full: {total}" in text, text


def test_a_chain_is_one_card_that_says_its_links_and_budget(lab: Lab, project: str) -> None:
    r = chain(project, "card", "exit 75", budget="3:30")  # rounded down: 3 min
    assert r.rc == Exit.PENDING, r.err
    shown = rsk("approvals", "show", json.loads(r.out)["card_id"], "--project", project).out
    assert "chain: up to 3 links of 1 min (the last 1)" in shown and "at most 3 min of run time" in shown
    refused = rsk("launch", "--target", "lab", "--project", project, "--budget", "3", "--", "true")
    assert refused.rc == Exit.USAGE and "needs --time" in refused.err
    assert len(json.loads(rsk("approvals", "--project", project, "--json").out)["cards"]) == 1


def test_a_client_killed_right_after_submit_changes_nothing_the_chain_runs_to_its_end(lab: Lab, project: str) -> None:
    grant(project, "--cpu-hours", "1")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "RSK_BROKER": "off"}  # this process submits, no broker
    client = subprocess.Popen([*RSK, *chain_args(project, "k", 'echo "$RSK_LINK" >> "$RSK_WORK_DIR/ran"; exit 75',
                                                 budget="2")],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:  # both links queued by Slurm: the client is killed at once, whatever it was still doing
        until("both links queued", lambda: len(lab.jobs_named(f"rsk:{project}:k")) == 2, timeout=60)
    finally:
        client.send_signal(signal.SIGKILL)
        client.wait()
    rc, got = links(project, "k")  # a new client, on the cluster's word alone
    assert rc == Exit.UNSUCCESSFUL
    assert [(got[k]["state"], got[k]["where"]) for k in ("link1", "link2")] == [
        ("stopped", "(yielded)"), ("stopped", "(budget-spent)")]  # fmt: skip
    assert lab.ssh(f"cat {lab.root_sh}/runs/{project}/k/work/ran").stdout.split() == ["1", "2"]
    rsk("status", "--target", "lab", "--project", project, "--json")  # settles what ended
    g = grant_view(project)
    used = sum((j["elapsed_s"] or 0) * j["cpus"] for j in got.values()) / 3600
    assert g["cpu_hours_reserved"] == 0 and abs(g["cpu_hours_spent"] - used) < 0.002, (g, used)


def test_a_chain_through_a_shell_without_exec_is_warned_before_it_runs(lab: Lab, project: str) -> None:
    r = rsk("plan", "--target", "lab", "--project", project, "-r", "shx", "--budget", "4", "--time", "2",
            "--json", "--", "sh", "-c", "python3 long.py")  # fmt: skip
    assert r.rc == 0, r.err
    assert any("without exec" in w for w in json.loads(r.out)["warnings"]), r.out
    fine = rsk("plan", "--target", "lab", "--project", project, "-r", "shy", "--budget", "4", "--time", "2",
               "--json", "--", "sh", "-c", "exec python3 long.py")  # fmt: skip
    assert not any("without exec" in w for w in json.loads(fine.out)["warnings"]), fine.out


def test_an_extension_with_code_runs_a_fixed_program_in_the_chains_work_directory(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    """A chain whose program did not do what it should goes on, after a fix sent with `rsk extend --code`, from
    what its links left in its RSK_WORK_DIR; the extension's card shows the new snapshot and its files, and a
    later extension without --code keeps the fix."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "run.sh").write_text('echo "v1 $RSK_LINK" >> "$RSK_WORK_DIR/seen"; exit 75\n')
    args = ["--target", "lab", "--project", project, "--json"]
    first = rsk("launch", *args, "-r", "fx", "--budget", "2", "--time", "1", "--signal-before", "0:30", "--mem",
                "100M", "--code", str(code), "--", "sh", "run.sh")  # fmt: skip
    assert first.rc == Exit.PENDING, first.err
    assert rsk("approve", json.loads(first.out)["card_id"], "--project", project, "--yes").rc == 0
    assert rsk("wait", json.loads(first.out)["card_id"], *args).rc == Exit.UNSUCCESSFUL  # submitted; ran out
    rc, got = links(project, "fx")
    assert rc == Exit.UNSUCCESSFUL and got["link2"]["where"] == "(budget-spent)", got
    (code / "run.sh").write_text('echo "v2 $RSK_LINK" >> "$RSK_WORK_DIR/seen"; exit 75\n')
    (code / "fix.txt").write_text("the fix\n")
    more = rsk("extend", *args, "-r", "fx", "--budget", "3", "--code", str(code))
    assert more.rc == Exit.PENDING, more.err
    card = json.loads(more.out)["card_id"]
    shown = rsk("approvals", "show", card, "--project", project).out
    digest = json.loads(rsk("plan", *args, "-r", "fx-d", "--time", "1", "--code", str(code), "--", "true").out)
    assert f"code          snapshot {digest['plan']['code']}" in shown, shown
    assert "fix.txt" in shown and "run.sh" in shown and "they add 1 min to its budget" in shown, shown
    assert rsk("approve", card, "--project", project, "--yes").rc == 0
    assert rsk("wait", card, *args).rc == Exit.UNSUCCESSFUL
    rc, got = links(project, "fx")
    assert rc == Exit.UNSUCCESSFUL and got["link3"]["where"] == "(budget-spent)", got
    # a later extension without --code goes on with the fix
    again = rsk("extend", *args, "-r", "fx", "--budget", "4")
    assert again.rc == Exit.PENDING, again.err
    shown = rsk("approvals", "show", json.loads(again.out)["card_id"], "--project", project).out
    assert f"code          snapshot {digest['plan']['code']}" in shown, shown
    assert lab.ssh(f"cat {lab.root_sh}/runs/{project}/fx/work/seen").stdout.splitlines() == ["v1 1", "v1 2", "v2 3"]


# A job's own `mv` (first on the PATH its plan binds) that lands its ended marker LATE s after it wrote it, while the
# job has ended: as a login node on a shared file system sees a compute node's file seconds after Slurm's word
MV_LATE = """#!/bin/sh
case $2 in
    */ended) setsid sh -c 'sleep {late}; exec /bin/mv "$0" "$1"' "$1" "$2" </dev/null >/dev/null 2>&1 & exit 0 ;;
esac
exec /bin/mv "$@"
"""


def test_a_link_whose_marker_lands_late_reads_ending_until_it_does(lab: Lab, project: str) -> None:
    """Slurm's FAILED for a link is its wrapper's exit 75 (go on), not how its command ended: until the link's marker
    says that, the link is `ending` (`rsk wait`: still running, exit 10), never a `failed` guessed with no exit
    code, and then `stopped`. Its charge settles on Slurm's record of its run meanwhile, never at its worst case."""
    import tempfile

    late = Path(tempfile.mkdtemp(prefix="rsk-late-"))
    try:
        late.chmod(0o755)
        (late / "mv").write_text(MV_LATE.format(late=15))
        (late / "mv").chmod(0o755)
        grant(project, "--cpu-hours", "1")
        args = chain_args(project, "late", "exit 75", budget="2")
        at = args.index("--")
        assert rsk(*args[:at], "--path", f"{late}:/usr/local/bin:/usr/bin:/bin", *args[at:]).rc == 0

        def link1() -> dict[str, Any] | None:
            r = rsk("status", "--request-id", "late", "--target", "lab", "--project", project, "--json")
            got = {j["task"]: j for j in json.loads(r.out)["jobs"]} if r.rc == 0 else {}
            one = got.get("link1")
            return one if one and one["state"] not in ("pending", "running") else None

        first = until("link 1 ended on Slurm", link1, timeout=180)
        assert (first["state"], first["exit_code"]) == ("ending", None), first  # before: "failed", no exit code
        waited = rsk("wait", "--request-id", "late", "--target", "lab", "--project", project, "--timeout", "1")
        assert waited.rc == Exit.RUNNING, waited.out + waited.err
        rc, got = links(project, "late")  # the markers land 15 s after each link ended
        assert rc == Exit.UNSUCCESSFUL
        assert [(got[k]["state"], got[k]["where"], got[k]["exit_code"]) for k in ("link1", "link2")] == [
            ("stopped", "(yielded)", 75), ("stopped", "(budget-spent)", 75)]  # fmt: skip
        rsk("status", "--target", "lab", "--project", project, "--json")  # settles what ended
        g = grant_view(project)
        used = sum((j["elapsed_s"] or 0) * j["cpus"] for j in got.values()) / 3600
        assert g["cpu_hours_reserved"] == 0 and abs(g["cpu_hours_spent"] - used) < 0.002, (g, used)
    finally:
        shutil.rmtree(late, ignore_errors=True)


# The wrapper's first mkdir (its run directory's) waits while FLAGS/hold exists, its job's id in FLAGS/held: a start
# as slow as a busy node makes it, long enough for the link's notice to come before its command runs
MKDIR_HOLD = """#!/bin/sh
if [ $# = 2 ] && [ "$1" = -p ] && [ -e {flags}/hold ]; then
    case $2 in
        */runs/*/t0) echo "${{SLURM_JOB_ID:-}}" >{flags}/held; while [ -e {flags}/hold ]; do sleep 0.2; done ;;
    esac
fi
exec /bin/mkdir "$@"
"""


def test_a_links_notice_that_comes_while_its_wrapper_starts_is_given_to_its_command(lab: Lab, project: str) -> None:
    """Slurm sends a link's SIGUSR1 from a periodic check, up to a minute before the margin it was asked for: a
    one-minute link can get it as it starts, and under load its wrapper starts slowly. The wrapper keeps a signal from
    its first line and gives it to the command once it runs: the link stops with its marker and the chain goes on.
    Before, the notice killed the wrapper: the link read `failed` with no exit code and no run time."""
    import tempfile

    slow, flags = Path(tempfile.mkdtemp(prefix="rsk-slow-")), Path(tempfile.mkdtemp(prefix="rsk-flags-"))
    try:
        slow.chmod(0o755)
        flags.chmod(0o777)
        (slow / "mkdir").write_text(MKDIR_HOLD.format(flags=flags))
        (slow / "mkdir").chmod(0o755)
        (flags / "hold").touch()
        grant(project, "--cpu-hours", "1")
        args = chain_args(project, "n", 'echo "$RSK_LINK" >> "$RSK_WORK_DIR/ran"; exit 75', budget="2")
        at = args.index("--")
        assert rsk(*args[:at], "--path", f"{slow}:/usr/local/bin:/usr/bin:/bin", *args[at:]).rc == 0
        held = flags / "held"
        job = until("link 1's wrapper starting", lambda: held.exists() and held.read_text().strip(), timeout=180)
        assert lab.ssh(f"scancel --signal=USR1 --batch {job}").returncode == 0  # as Slurm's --signal=B:USR1 sends it
        time.sleep(2)  # (delivered by the node's slurmd)
        (flags / "hold").unlink()
        rc, got = links(project, "n")
        assert rc == Exit.UNSUCCESSFUL
        assert got["link1"]["state"] == "stopped" and got["link1"]["exit_code"] in (75, 138), got["link1"]  # 138: USR1
        assert (got["link2"]["state"], got["link2"]["where"]) == ("stopped", "(budget-spent)"), got["link2"]
        assert "2" in lab.ssh(f"cat {lab.root_sh}/runs/{project}/n/work/ran").stdout.split()
    finally:
        shutil.rmtree(slow, ignore_errors=True)
        shutil.rmtree(flags, ignore_errors=True)
