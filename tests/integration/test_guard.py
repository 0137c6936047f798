"""The guard under attack, on the lab cluster: each test is a way an agent would try to get work past the
human (docs/security.md keeps the table of attacks, what stops each, and these tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from rsk.errors import Exit
from tests.conftest import BROKER_MODE, LAB_DIR, LAB_USER, ROOT, Lab, rsk
from tests.integration.helpers import (
    Shims,
    finished_output,
    grant,
    grant_view,
    launch,
    launched,
)


def card_of(r: object) -> str:
    return str(json.loads(r.out)["card_id"])  # type: ignore[attr-defined]


def jobs_of(lab: Lab, project: str, rid: str) -> list[str]:
    return [line.split(" ")[0] for line in lab.jobs_named(f"rsk:{project}:{rid}")]


def deny_rule(project: str, *options: str) -> str:
    r = rsk("deny-rule", "add", "-p", project, "--yes", "--json", *options)
    assert r.rc == 0, r.err
    return str(json.loads(r.out)["rule"]["id"])


# 1. continuing a request passes the whole decision again -------------------------------------------
def test_a_retry_after_a_cut_is_decided_again_deny_then_revoke(lab: Lab, project: str, sbatch_shim: Shims) -> None:
    g = grant(project, "--jobs", "3")
    sbatch_shim.arm("kill-before")
    cut = launch(project, "-r", "c1", command=("sleep", "60"))
    assert cut.rc == Exit.CONNECT, cut.err
    assert grant_view(project)["jobs_reserved"] == 1  # the outcome is unknown: the charge is held
    rule = deny_rule(project, "--reason", "stop everything", "--command", "sleep*")
    again = launch(project, "-r", "c1", command=("sleep", "60"))
    assert again.rc == Exit.DENIED, again.err
    assert jobs_of(lab, project, "c1") == []
    assert grant_view(project)["jobs_reserved"] == 0  # the deny gave the hold back
    assert rsk("deny-rule", "remove", rule, "-p", project, "--yes").rc == 0
    sbatch_shim.arm("kill-before")
    assert launch(project, "-r", "c1", command=("sleep", "60")).rc == Exit.CONNECT
    assert rsk("grant", "revoke", g["grant"]["id"], "-p", project, "--yes").rc == 0
    revoked = launch(project, "-r", "c1", command=("sleep", "60"))
    assert revoked.rc == Exit.PENDING, revoked.err
    assert jobs_of(lab, project, "c1") == []


def test_a_held_approval_use_ends_with_the_approval(lab: Lab, project: str, sbatch_shim: Shims) -> None:
    card = card_of(launch(project, "-r", "a1", command=("echo", "once")))
    assert rsk("approve", card, "-p", project, "--expires", "4s", "--yes").rc == 0
    sbatch_shim.arm("kill-before")
    assert launch(project, "-r", "a1", command=("echo", "once")).rc == Exit.CONNECT
    time.sleep(4.5)
    late = launch(project, "-r", "a1", command=("echo", "once"))
    assert late.rc == Exit.PENDING, late.err
    assert "expired" in late.err
    assert jobs_of(lab, project, "a1") == []


def test_rsk_wait_after_a_cut_is_decided_again(lab: Lab, project: str, sbatch_shim: Shims) -> None:
    card = card_of(launch(project, "-r", "w1", command=("echo", "x")))
    assert rsk("approve", card, "-p", project, "--yes").rc == 0
    sbatch_shim.arm("kill-before")
    assert rsk("wait", card, "-p", project).rc == Exit.CONNECT
    deny_rule(project, "--reason", "changed my mind", "--target", "lab")
    waited = rsk("wait", card, "-p", project, "--json")
    assert waited.rc == Exit.DENIED, waited.err
    assert json.loads(waited.out)["reason"] == "changed my mind"
    assert jobs_of(lab, project, "w1") == []


# 2. a used permission never submits a second job, through another target or after a wipe ------------
def other_target(lab: Lab, name: str, root: str) -> None:
    text = (lab.targets_dir / "lab.toml").read_text().replace(lab.remote_root, root)
    (lab.targets_dir / f"{name}.toml").write_text(text)


def test_a_used_approval_does_not_replay_elsewhere_or_after_a_wipe(lab: Lab, project: str) -> None:
    other_target(lab, "lab2", lab.remote_root + "-second")
    try:
        card = card_of(launch(project, "-r", "u1", command=("sleep", "30")))
        assert rsk("approve", card, "-p", project, "--yes").rc == 0
        first = launched(launch(project, "-r", "u1", command=("sleep", "30")))
        # through a second target file that reaches the same cluster with another remote root: another plan
        # hash, so the approval does not apply, and the job of the same request id (found by its name)
        # runs another plan: a conflict, never a replay or a second job
        elsewhere = rsk("launch", "-t", "lab2", "-p", project, "-r", "u1", "--json", "--", "sleep", "30")
        assert elsewhere.rc == Exit.CONFLICT, elsewhere.err
        fresh = rsk("launch", "-t", "lab2", "-p", project, "-r", "u9", "--json", "--", "sleep", "30")
        assert fresh.rc == Exit.PENDING, fresh.err
        assert json.loads(fresh.out)["plan_hash"] != first["plan_hash"]
        # the remote root wiped while the job runs: Slurm still knows it by name and plan: a replay
        lab.ssh(f"rm -rf {lab.root_sh}")
        again = launched(launch(project, "-r", "u1", command=("sleep", "30")))
        assert again["status"] == "replayed" and again["job_id"] == first["job_id"]
        assert jobs_of(lab, project, "u1") == [first["job_id"]]
        # and a new request id is a new decision: the one use is spent
        assert launch(project, "-r", "u2", command=("sleep", "30")).rc == Exit.PENDING
        assert jobs_of(lab, project, "u2") == []
    finally:
        (lab.targets_dir / "lab2.toml").unlink()
        lab.ssh(f"rm -rf {lab.root_sh}-second")


def test_after_a_wipe_and_slurm_forgetting_the_ledger_and_its_archive_still_refuse_a_second_job(
    lab: Lab, project: str
) -> None:
    """The journal is gone and Slurm forgot the jobs (MinJobAge): only the ledger remembers each use. In
    one project an approval's use is in the hot file; in the other the job ended, its charge settled and
    moved to the ledger's archive, which still remembers the request, and its grant what it spent. A third
    project, under a remote root of its own, has a job that forged its outcome before Slurm forgot it: it
    is charged its worst case. (One test, one wait: Slurm takes up to a minute and a half to forget a job.)"""
    from rsk.ledger.store import Store

    hot, cold, forged = project, project + "a", project + "f"
    card = card_of(launch(hot, "-r", "v1", command=("true",)))
    assert rsk("approve", card, "-p", hot, "--yes").rc == 0
    first_hot = launched(launch(hot, "-r", "v1", command=("true",)))
    grant(cold, "--jobs", "5")
    first_cold = launched(launch(cold, "-r", "s1", command=("true",)))
    other_target(lab, "labf", lab.remote_root + "-forged")
    try:
        grant(forged, "--cpu-hours", "1", "--jobs", "5")
        job = launched(rsk("launch", "-t", "labf", "-p", forged, "-r", "m1", "--cpus", "2", "--time", "10",
                           "--json", "--", "sleep", "6"))["job_id"]  # fmt: skip
        store = Store(cold)
        deadline = time.monotonic() + 120
        while store.load().charges:  # a status read settles the ended job; the write archives the charge
            assert time.monotonic() < deadline, "the charge did not settle"
            rsk("status", "-t", "lab", "-p", cold, "--json")
            time.sleep(1)
        assert [c.request_id for c in store.archive.charges()] == ["s1"]
        lab.ssh(f"rm -rf {lab.root_sh}")
        while "COMPLETED" not in lab.ssh(f"squeue -h -t all -j {job} -o %T").stdout:
            assert time.monotonic() < deadline, "the forging job did not end"
            time.sleep(1)
        # what the job's own account can write: an `ended` marker saying it ran 1 s, and a journal that
        # gives it 1 CPU (held: 2 CPUs for about 6 s)
        run = f"{lab.root_sh}-forged/runs/{forged}/m1/t0"
        lab.ssh(f"printf 'rc=0 sig=none elapsed=1 limit=600\\n' > {run}/ended && chmod a-w {run} && "
                f"sed -i 's/ res=[0-9,]*/ res=1,1,1,0,1/' {lab.root_sh}-forged/journal/{forged}.log")  # fmt: skip
        while jobs_of(lab, hot, "v1") or jobs_of(lab, cold, "s1") or jobs_of(lab, forged, "m1"):  # MinJobAge 30 s
            assert time.monotonic() < deadline + 120, "Slurm did not forget the jobs"
            time.sleep(2)
        for p, rid, first in ((hot, "v1", first_hot), (cold, "s1", first_cold)):
            again = launched(launch(p, "-r", rid, command=("true",)))
            assert again["status"] == "replayed" and again["job_id"] == first["job_id"] and again["note"], p
            assert lab.journal(p) == []  # nothing was submitted, nothing journaled
        spent = json.loads(rsk("grant", "list", "-p", cold, "--json").out)["grants"][0]
        assert spent["jobs_spent"] == 1 and spent["jobs_left"] == 4
        # Slurm's record is gone; the markers never lower a charge: the job counts its worst case
        st = json.loads(rsk("status", "-t", "labf", "-p", forged, "--json").out)
        assert [j["state"] for j in st["jobs"]] == ["succeeded"]  # the markers still describe the outcome
        books = json.loads(rsk("grant", "list", "-p", forged, "--json").out)["grants"][0]
        held = round(2 * 6 / 3600, 4)  # 2 CPUs for its 6 s, as the grant's view rounds it
        assert books["cpu_hours_reserved"] == 0 and books["cpu_hours_spent"] >= held, books
        if not BROKER_MODE:  # a broker's watch sees the job end while Slurm lists it: Slurm's word, not the worst
            assert books["jobs_at_worst"] == 1 and "Slurm's record was gone" in books["note"]
            assert "settled at worst case" in rsk("grant", "list", "-p", forged).out
    finally:
        (lab.targets_dir / "labf.toml").unlink()
        lab.ssh(f"chmod -R u+w {lab.root_sh}-forged; rm -rf {lab.root_sh}-forged")


def test_a_spent_grant_does_not_replay_through_another_target(lab: Lab, project: str) -> None:
    other_target(lab, "lab3", lab.remote_root + "-third")
    try:
        grant(project, "--jobs", "1")
        launched(launch(project, "-r", "g1", command=("true",)))
        same = rsk("launch", "-t", "lab3", "-p", project, "-r", "g1", "--json", "--", "true")
        assert same.rc in (Exit.CONFLICT, Exit.PENDING), same.err  # found by name (conflict) or forgotten (ask)
        other = rsk("launch", "-t", "lab3", "-p", project, "-r", "g2", "--json", "--", "true")
        assert other.rc == Exit.PENDING, other.err
        assert grant_view(project)["jobs_spent"] == 1
    finally:
        (lab.targets_dir / "lab3.toml").unlink()
        lab.ssh(f"rm -rf {lab.root_sh}-third")


# 3. cards are inert and complete --------------------------------------------------------------------
CONTROL = "\x1b[2J\x1b[H\r\x07\x9b31m\u202e\u2066"


def test_cards_show_agent_text_inert_and_label_the_requester_a_claim(lab: Lab, project: str, tmp_path: Path) -> None:
    forged = f"{CONTROL}admin (approved)\n  plan hash     0000"
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n" + "".join(f"echo line {i} {CONTROL}\n" for i in range(60)))
    r = rsk("launch", "-t", "lab", "-p", project, "--json", "--script", str(script), "--env", f"MODE=fast{CONTROL}",
            env={"RSK_REQUESTER": forged})  # fmt: skip
    assert r.rc == Exit.PENDING, r.err
    card = card_of(r)
    shown = rsk("approvals", "-p", project)
    text = shown.out
    for ch in "\x1b\r\x07\x9b\u202e\u2066":
        assert ch not in text, repr(ch)
    assert "\\x1b[2J" in text and "\\u202e" in text
    assert "the agent's own claim" in text
    assert sum(line.startswith("  plan hash") for line in text.splitlines()) == 1  # no forged line
    assert "MODE=fast\\x1b" in text  # env names and values
    assert "more line(s): rsk approvals show" in text  # 61 lines are folded on the list
    full = rsk("approvals", "show", card, "-p", project).out
    assert all(f"echo line {i} " in full for i in range(60))


def test_a_card_lists_every_task_of_a_batch(lab: Lab, project: str, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"key": f"k{i}", "argv": ["echo", f"task-{i}"]}) + "\n" for i in range(30)))
    r = rsk("launch", "-t", "lab", "-p", project, "--json", "--tasks", str(tasks))
    card = card_of(r)
    listed = rsk("approvals", "-p", project).out
    assert "echo task-0" in listed and "more task(s)" in listed
    full = rsk("approvals", "show", card, "-p", project).out
    assert all(f"echo task-{i}" in full for i in range(30))


# 4. deny rules see what will run ----------------------------------------------------------------------
def test_deny_rules_match_any_task_and_the_script_text(lab: Lab, project: str, tmp_path: Path) -> None:
    grant(project, "--jobs", "50")
    deny_rule(project, "--reason", "no deletes", "--command", "*rm -rf*")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"key": f"k{i}", "argv": ["echo", str(i)]}) + "\n" for i in range(5))
        + json.dumps({"key": "bad", "argv": ["sh", "-c", "rm -rf /tmp/data"]})
        + "\n"
    )
    batch = rsk("launch", "-t", "lab", "-p", project, "--json", "--tasks", str(tasks))
    assert batch.rc == Exit.DENIED, batch.err
    script = tmp_path / "job.sh"
    script.write_text('#!/bin/sh\necho starting\nrm -rf "$HOME/old"\n')
    scripted = rsk("launch", "-t", "lab", "-p", project, "--json", "--script", str(script))
    assert scripted.rc == Exit.DENIED, scripted.err
    assert lab.journal(project) == []


# 5. --max-active holds under concurrency -------------------------------------------------------------
def test_max_active_holds_with_eight_parallel_launches(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "100", "--max-active", "2")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rsk",
                "launch",
                "-t",
                "lab",
                "-p",
                project,
                "-r",
                f"p{i}",
                "--json",
                "--",
                "sleep",
                "60",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(8)
    ]
    codes = [p.wait(timeout=300) for p in procs]
    assert codes.count(0) == 2, codes
    assert codes.count(Exit.PENDING) == 6, codes
    assert len(lab.jobs_named(f"rsk:{project}:")) == 2
    assert sum(" ev=accepted " in line for line in lab.journal(project)) == 2


# 6. charges follow reality ------------------------------------------------------------------------------
def test_a_full_journal_after_sbatch_keeps_the_charge_and_the_job(lab: Lab, project: str, sbatch_shim: Shims) -> None:
    grant(project, "--jobs", "3")
    lab.ssh(f"mkdir -p {lab.root_sh}/journal && touch {lab.root_sh}/journal/{project}.log")
    home = lab.ssh("echo $HOME").stdout.strip()
    sbatch_shim.arm("fill-after", f"{home}/{lab.remote_root.removeprefix('~/')}/journal/{project}.log")
    first = launched(launch(project, "-r", "f1", command=("sleep", "60")))
    assert any("journal-unwritable" in w for w in first["warnings"]), first  # the agent is told
    assert grant_view(project)["jobs_spent"] == 1 and grant_view(project)["jobs_reserved"] == 0
    lab.ssh(f"chmod u+w {lab.root_sh}/journal/{project}.log")
    again = launched(launch(project, "-r", "f1", command=("sleep", "60")))
    assert again["status"] == "replayed" and again["job_id"] == first["job_id"]
    assert jobs_of(lab, project, "f1") == [first["job_id"]]
    assert grant_view(project)["jobs_spent"] == 1


def test_an_error_after_go_gives_nothing_back_while_slurm_holds_a_job_of_the_request(
    lab: Lab, project: str, sbatch_shim: Shims
) -> None:
    """The cluster's program says sbatch failed, but Slurm took the job (what a process of the account that reads
    and answers on the program's pipes can make it say): the hold is not given back while a job that may be the
    request's runs, and the next status read adopts and charges it. A real failure, with no job on Slurm, still
    gives the hold back."""
    grant(project, "--jobs", "3", "--cpu-hours", "1")
    sbatch_shim.arm("fail-after")
    said = launch(project, "-r", "x1", "--time", "5", command=("sleep", "30"))
    [job] = jobs_of(lab, project, "x1")
    try:
        assert said.rc == Exit.REJECTED and job in said.err and "stays reserved" in said.err, said.err
        assert grant_view(project)["jobs_reserved"] == 1  # held, not given back
        st = json.loads(rsk("status", "-t", "lab", "-p", project, "--json").out)
        assert [j["request_id"] for j in st["jobs"] if j["job_id"] == job] == ["x1"], st
        books = grant_view(project)
        assert books["jobs_spent"] + books["jobs_reserved"] == 1 and books["cpu_hours_reserved"] > 0, books
        sbatch_shim.arm("fail-before")
        failed = launch(project, "-r", "x2", "--time", "5", command=("sleep", "30"))
        assert failed.rc == Exit.REJECTED, failed.err
        assert grant_view(project)["jobs_reserved"] + grant_view(project)["jobs_spent"] == 1  # x2's hold went back
    finally:
        lab.ssh(f"scancel {job}")


def test_an_ended_job_settles_to_what_it_used(lab: Lab, project: str) -> None:
    grant(project, "--cpu-hours", "1", "--jobs", "5")
    job = launched(launch(project, "--time", "30", "--cpus", "2", command=("sleep", "2")))["job_id"]
    held = grant_view(project)
    assert held["cpu_hours_reserved"] == 1.0 and held["cpu_hours_spent"] == 0  # 2 CPUs x 30 min at worst
    finished_output(project, job)
    assert rsk("status", "-t", "lab", "-p", project, "--json").rc == 0
    settled = grant_view(project)
    assert settled["cpu_hours_reserved"] == 0
    assert 0 < settled["cpu_hours_spent"] < 0.01  # about 2 CPUs x 2 s
    assert settled["jobs_spent"] == 1


def test_a_job_that_renames_itself_still_runs_counts_and_is_cancelled(lab: Lab, project: str) -> None:
    """A job can rename itself in Slurm; rsk finds its jobs by the ids the ledger holds, not by name."""
    grant(project, "--jobs", "5", "--max-active", "1")
    job = launched(launch(project, "-r", "n1", command=("sleep", "300")))["job_id"]
    assert lab.ssh(f"scontrol update JobId={job} JobName=innocent").returncode == 0
    assert jobs_of(lab, project, "n1") == []  # Slurm knows it by another name now
    st = json.loads(rsk("status", "-t", "lab", "-p", project, "--json").out)
    [seen] = [j for j in st["jobs"] if j["job_id"] == job]
    assert seen["state"] in ("pending", "running") and seen["request_id"] == "n1", seen
    assert grant_view(project)["cpu_hours_reserved"] > 0  # nothing settled
    second = launch(project, "-r", "n2", command=("true",))
    assert second.rc == Exit.PENDING, second.err  # still counted against --max-active 1: a human decides
    cancelled = json.loads(rsk("cancel", job, "-t", "lab", "-p", project, "--json").out)
    assert [r["result"] for r in cancelled["results"]] == ["cancelled"], cancelled
    assert "RUNNING" not in lab.ssh(f"squeue -h -j {job} -o %T").stdout


def test_a_forged_journal_does_not_get_a_request_submitted_twice(lab: Lab, project: str) -> None:
    """What a job can do to the cluster's journal (rename itself, delete its started marker, append an intent
    line sealed like rsk's: the seal is an unkeyed chain) does not make a relaunch submit a second job: the
    ledger recorded the request's job from the submit's own answer."""
    from rsk.wire.chain import seal

    grant(project, "--jobs", "5")
    first = launched(launch(project, "-r", "j1", command=("sleep", "120")))
    job = first["job_id"]
    assert lab.ssh(f"scontrol update JobId={job} JobName=innocent").returncode == 0
    journal = lab.journal(project)
    intent = next(line for line in journal if " ev=intent " in line and " rid=j1 " in line)
    body = intent.rsplit(" h=", 1)[0] if " h=" in intent else intent
    forged = f"{body} h={seal(journal[-1].rsplit(' h=', 1)[1], [body])}"
    log = f"{lab.root_sh}/journal/{project}.log"
    assert (
        lab.ssh(f"rm -f {lab.root_sh}/runs/{project}/j1/t0/started && printf '%s\\n' '{forged}' >> {log}").returncode
        == 0
    )
    assert json.loads(rsk("journal", "-t", "lab", "-p", project, "--json").out)["chain_ok"]  # the seal proves no author
    again = launched(launch(project, "-r", "j1", command=("sleep", "120")))
    assert again["status"] == "replayed" and again["job_id"] == job, again
    assert jobs_of(lab, project, "j1") == []  # no second job under the request's name
    assert grant_view(project)["jobs_spent"] == 1
    rsk("cancel", job, "-t", "lab", "-p", project)


LOST_ANSWER = """
import sys
from rsk.cluster import remote
from rsk.errors import ConnectError
from rsk.ops.launch import launch
from rsk.request.spec import LaunchSpec, build_request

reply = remote.Conversation.reply


def cut(self, *args, **kwargs):  # `go` reaches the cluster, its answer never comes back
    reply(self, *args, **kwargs)
    raise ConnectError("the connection was cut after go")


remote.Conversation.reply = cut
spec = LaunchSpec(argv=["sleep", "300"], request_id=sys.argv[2], cpus=1, time="10")
try:
    launch("lab", build_request(spec, sys.argv[1], "agent"))
except ConnectError:
    sys.exit(0)
sys.exit(1)
"""


def test_a_job_that_hides_itself_after_a_lost_answer_is_found_charged_and_not_submitted_again(
    lab: Lab, project: str
) -> None:
    """The launch's answer is lost once `go` reached the cluster; the job then renames itself, removes its
    started marker and its accepted journal line. Slurm still writes its output under the request's run
    directory, which a running job cannot change: reconcile finds it (the hold is never released), status
    shows and charges it, and the same request id replays it instead of submitting a second job."""
    grant(project, "--jobs", "5", "--cpu-hours", "5")
    lost = subprocess.run([sys.executable, "-c", LOST_ANSWER, project, "h1"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120, check=False)  # fmt: skip
    assert lost.returncode == 0, lost.stdout + lost.stderr
    [job] = jobs_of(lab, project, "h1")
    try:
        assert grant_view(project)["jobs_reserved"] == 1  # the outcome is unknown: the hold stays reserved
        log = f"{lab.root_sh}/journal/{project}.log"
        hide = (f"scontrol update JobId={job} JobName=innocent Comment=none && "
                f"rm -f {lab.root_sh}/runs/{project}/h1/t0/started && "
                f"grep -v ' ev=accepted rid=h1 ' {log} > {log}.x && cat {log}.x > {log} && rm -f {log}.x")  # fmt: skip
        assert lab.ssh(hide).returncode == 0
        assert jobs_of(lab, project, "h1") == [] and not any(" ev=accepted " in line for line in lab.journal(project))
        rec = json.loads(rsk("reconcile", "-t", "lab", "-p", project, "--json").out)
        assert [(i["request_id"], i["result"], i["job_id"]) for i in rec["items"]] == [("h1", "reconciled", job)], rec
        books = grant_view(project)
        assert books["jobs_reserved"] == 0 and books["jobs_spent"] == 1, books  # charged, never released
        st = json.loads(rsk("status", "-t", "lab", "-p", project, "--json").out)
        [seen] = [j for j in st["jobs"] if j["job_id"] == job]
        assert seen["request_id"] == "h1" and seen["state"] in ("pending", "running"), seen
        again = launched(launch(project, "-r", "h1", "--cpus", "1", "--time", "10", command=("sleep", "300")))
        assert again["status"] == "replayed" and again["job_id"] == job, again
        assert jobs_of(lab, project, "h1") == []  # no second job
        assert grant_view(project)["jobs_spent"] == 1
    finally:
        lab.ssh(f"scancel {job}")


def _lost_and_hidden(lab: Lab, project: str, shims: Shims, rid: str, erase: str) -> str:
    """A launch whose answer is lost, its job held pending; then a job of the account renames that job, clears its
    comment, moves its output (Slurm lets the owner change a pending job's StdOut) and erases the journal lines
    that match `erase` (a grep pattern). The hidden job's id."""
    shims.add("sbatch", '#!/bin/sh\nexec /usr/bin/sbatch --hold "$@"\n')  # the job pends until released
    grant(project, "--jobs", "5", "--cpu-hours", "5")
    lost = subprocess.run([sys.executable, "-c", LOST_ANSWER, project, rid], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120, check=False)  # fmt: skip
    assert lost.returncode == 0, lost.stdout + lost.stderr
    [job] = jobs_of(lab, project, rid)
    log = f"{lab.root_sh}/journal/{project}.log"
    hide = (f"scontrol update JobId={job} JobName=innocent Comment=none StdOut=/tmp/{project}.out && "
            f"grep -v '{erase}' {log} > {log}.x; cat {log}.x > {log} && rm -f {log}.x")  # fmt: skip
    assert lab.ssh(hide).returncode == 0
    return job


def test_a_pending_job_whose_output_was_moved_is_still_found_by_its_batch_script(
    lab: Lab, project: str, shims: Shims
) -> None:
    """While the lost launch's job still pends, another job of the account renames it, clears its comment and
    moves its output (Slurm lets the owner change a pending job's StdOut); the job then erases its accepted
    line. Its batch script, Slurm's copy, still runs in the request's run directory: reconcile finds it and
    the ledger holds it, and the same request id replays it."""
    job = _lost_and_hidden(lab, project, shims, "p1", " ev=accepted rid=p1 ")
    try:
        assert f"/tmp/{project}.out" in lab.ssh(f"squeue -h -j {job} -O StdOut").stdout  # moved
        rec = json.loads(rsk("reconcile", "-t", "lab", "-p", project, "--json").out)
        assert [(i["request_id"], i["result"], i["job_id"]) for i in rec["items"]] == [("p1", "reconciled", job)], rec
        books = grant_view(project)
        assert books["jobs_reserved"] == 0 and books["jobs_spent"] == 1, books  # held by id, never released
        again = launched(launch(project, "-r", "p1", "--cpus", "1", "--time", "10", command=("sleep", "300")))
        assert again["status"] == "replayed" and again["job_id"] == job, again
        assert jobs_of(lab, project, "p1") == []  # no second job
    finally:
        lab.ssh(f"scancel {job}; rm -f /tmp/{project}.out")


def test_a_relaunch_after_a_lost_answer_looks_for_a_task_whose_journal_lines_were_all_erased(
    lab: Lab, project: str, shims: Shims
) -> None:
    """As above, but the job erases every line of the request, its intent too, and nothing reconciles first: the
    ledger still holds the request with no known outcome, so the relaunch looks for each task's job by its
    batch script before it submits anything. It finds the hidden job and replays it: no second job runs."""
    job = _lost_and_hidden(lab, project, shims, "e1", " rid=e1 ")
    try:
        assert not [line for line in lab.journal(project) if " rid=e1 " in line]  # no line of the request is left
        again = launched(launch(project, "-r", "e1", "--cpus", "1", "--time", "10", command=("sleep", "300")))
        assert again["status"] == "replayed" and again["job_id"] == job, again
        assert jobs_of(lab, project, "e1") == []  # no second job
        books = grant_view(project)
        assert books["jobs_spent"] + books["jobs_reserved"] == 1, books  # the one job, held by the grant
    finally:
        lab.ssh(f"scancel {job}; rm -f /tmp/{project}.out")


def test_a_job_raised_in_slurm_while_it_pended_is_shown_and_charged_for_what_slurm_holds(
    lab: Lab, project: str, shims: Shims
) -> None:
    """A job of the account raises a pending job's GPUs and memory (`scontrol update`, allowed for the owner):
    status says what Slurm holds against the plan, and the grant is charged the GPUs Slurm gave it."""
    shims.add("sbatch", '#!/bin/sh\nexec /usr/bin/sbatch --hold "$@"\n')  # the job pends until released
    grant(project, "--cpu-hours", "1", "--jobs", "3")
    job = launched(launch(project, "-r", "g1", "--time", "2", command=("sleep", "3")))["job_id"]
    try:
        assert grant_view(project)["gpu_hours_reserved"] == 0
        raise_it = f"scontrol update JobId={job} Gres=gpu:1 && scontrol update JobId={job} MinMemoryNode=1500"
        assert lab.ssh(raise_it).returncode == 0
        st = json.loads(rsk("status", "-t", "lab", "-p", project, "--json").out)
        [seen] = [j for j in st["jobs"] if j["job_id"] == job]
        assert "1 GPUs, its plan 0" in seen["slurm_holds"] and "1500 MB" in seen["slurm_holds"], seen
        assert any(job in w and "charged for what Slurm holds" in w for w in st["warnings"]), st["warnings"]
        assert grant_view(project)["gpu_hours_reserved"] > 0  # 1 GPU x its 2 min limit, at worst
        assert lab.ssh(f"scontrol release {job}").returncode == 0
        finished_output(project, job)
        assert rsk("status", "-t", "lab", "-p", project, "--json").rc == 0
        books = grant_view(project)
        assert books["gpu_hours_reserved"] == 0 and books["gpu_hours_spent"] > 0, books
    finally:
        lab.ssh(f"scancel {job}")


def test_jobs_raised_by_other_spellings_or_moved_out_of_their_grants_partition_are_flagged_and_charged(
    lab: Lab, project: str, shims: Shims
) -> None:
    """A job of the account raises a pending job's GPUs by the job's own GRES field (`TresPerJob`, what `--gpus`
    sets) and moves it to a partition its grant does not cover, and raises another's CPUs (`MinCPUsNode`): status
    flags them (the first outside its grant's scope) and charges the GPUs and CPUs Slurm holds, while they pend
    and once they ran."""
    shims.add("sbatch", '#!/bin/sh\nexec /usr/bin/sbatch --hold "$@"\n')  # the jobs pend until released
    grant(project, "--partition", "cpu", "--cpu-hours", "1", "--gpu-hours", "0", "--max-gpus", "0", "--jobs", "3")
    gpus = launched(launch(project, "-r", "m1", "--partition", "cpu", "--time", "2", command=("sleep", "3")))
    cpus = launched(launch(project, "-r", "m2", "--partition", "cpu", "--time", "2", command=("sleep", "3")))
    jobs = [gpus["job_id"], cpus["job_id"]]
    try:
        raise_it = (f"scontrol update JobId={jobs[0]} TresPerJob=gres:gpu:1 && "
                    f"scontrol update JobId={jobs[0]} Partition=gpu && "
                    f"scontrol update JobId={jobs[1]} MinCPUsNode=2")  # fmt: skip
        assert lab.ssh(raise_it).returncode == 0
        st = json.loads(rsk("status", "-t", "lab", "-p", project, "--json").out)
        seen = {j["job_id"]: j for j in st["jobs"]}
        assert seen[jobs[0]]["slurm_holds"] == "holds 1 GPUs, its plan 0", seen
        assert seen[jobs[0]]["undecided"].startswith("partition gpu is not in grant "), seen
        assert any(jobs[0] in w and "left the scope that allowed it" in w for w in st["warnings"]), st["warnings"]
        assert seen[jobs[1]]["slurm_holds"] == "holds 2 CPUs, its plan 1" and not seen[jobs[1]]["undecided"], seen
        books = grant_view(project)
        # 1 GPU for its 2 min limit; 1 CPU and 2 CPUs for theirs (the plans reserved 1 and 1)
        assert (round(books["gpu_hours_reserved"], 3), round(books["cpu_hours_reserved"], 3)) == (0.033, 0.1), books
        assert lab.ssh(f"scontrol release {jobs[0]} {jobs[1]}").returncode == 0
        for job in jobs:
            finished_output(project, job)
        assert rsk("status", "-t", "lab", "-p", project, "--json").rc == 0
        books = grant_view(project)
        assert books["gpu_hours_reserved"] == 0 and books["gpu_hours_spent"] > 0, books
    finally:
        lab.ssh(f"scancel {jobs[0]} {jobs[1]}")


def test_a_job_whose_limit_was_raised_while_it_pended_is_flagged_and_charged_for_slurms_limit(
    lab: Lab, project: str, shims: Shims
) -> None:
    """The owner of a pending job can raise its time limit (`scontrol update TimeLimit=`): status flags the limit
    Slurm holds against the plan's and the grant holds its worst case for that limit, so its run settles on it."""
    shims.add("sbatch", '#!/bin/sh\nexec /usr/bin/sbatch --hold "$@"\n')  # the job pends until released
    grant(project, "--cpu-hours", "1", "--jobs", "3")
    job = launched(launch(project, "-r", "t1", "--time", "1", command=("sleep", "3")))["job_id"]
    try:
        assert lab.ssh(f"scontrol update JobId={job} TimeLimit=4").returncode == 0
        st = json.loads(rsk("status", "-t", "lab", "-p", project, "--json").out)
        [seen] = [j for j in st["jobs"] if j["job_id"] == job]
        assert seen["slurm_holds"] == "holds a 240 s limit, its plan 60 s", seen
        assert round(grant_view(project)["cpu_hours_reserved"], 4) == round(4 / 60, 4)  # 1 CPU for 4 min
    finally:
        lab.ssh(f"scancel {job}")


def test_a_running_broker_settles_a_charge_on_slurms_word_without_any_status_read(lab: Lab, project: str) -> None:
    """The broker watches its targets' unsettled jobs: a job's end is captured while Slurm still lists it."""
    sock = Path(f"/tmp/rsk-bw-{uuid.uuid4().hex[:8]}") / "b.sock"
    assert rsk("broker", "start", "--socket", str(sock), "--idle", "300").rc == 0
    try:
        grant(project, "--cpu-hours", "1", "--jobs", "2")
        job = launched(launch(project, "--cpus", "2", "--time", "10", command=("sleep", "3")))["job_id"]
        deadline = time.monotonic() + 90
        while "COMPLETED" not in lab.ssh(f"squeue -h -t all -j {job} -o %T").stdout:
            assert time.monotonic() < deadline, "the job did not end"
            time.sleep(1)
        while grant_view(project)["cpu_hours_reserved"] > 0:  # no rsk command reads status meanwhile
            assert time.monotonic() < deadline, "the broker did not settle the charge"
            time.sleep(1)
        books = grant_view(project)
        assert 0 < books["cpu_hours_spent"] < 0.01 and books["jobs_at_worst"] == 0, books  # about 2 CPUs x 3 s
    finally:
        rsk("broker", "stop", "--socket", str(sock))
        subprocess.run(["rm", "-rf", str(sock.parent)], check=False)


# 7. bad input is refused before anything happens ---------------------------------------------------------
def test_bad_input_is_refused_before_anything_happens(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "10")
    assert rsk("launch", "-t", "lab", "-p", project + "\n", "--", "true").rc == Exit.USAGE
    for env in ("SLURM_JOB_ID=1", "RSK_HOME=/x", "rsk_run=/tmp", "PATH=/tmp", "SBATCH_GRES=gpu:4"):
        r = launch(project, "--env", env)
        assert r.rc == Exit.USAGE and "belongs to rsk or Slurm" in r.err, (env, r.err)
    raw = subprocess.run(
        [sys.executable.encode(), b"-m", b"rsk", b"launch", b"-t", b"lab", b"-p", project.encode(), b"--", b"echo",
         b"\xff\xfe"],
        capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=False,
    )  # fmt: skip
    assert raw.returncode == Exit.USAGE, raw.stderr
    assert b"not valid UTF-8" in raw.stderr and b"Traceback" not in raw.stderr
    assert lab.journal(project) == []
    assert grant_view(project)["jobs_spent"] == 0 and grant_view(project)["jobs_reserved"] == 0


# 8. human acts are recorded with where they came from --------------------------------------------------------
def test_human_acts_record_terminal_and_parent_chain(lab: Lab, project: str, rsk_env: Path) -> None:
    card = card_of(launch(project))
    gate = rsk("approve", card, "-p", project, stdin="")
    assert gate.rc == Exit.HUMAN  # no terminal, no --yes: refused, and the card still waits
    assert [c["status"] for c in json.loads(rsk("approvals", "-p", project, "--json").out)["cards"]] == ["pending"]
    assert rsk("approve", card, "-p", project, "--yes").rc == 0
    audit = [json.loads(line) for line in (rsk_env / "projects" / project / "audit.jsonl").read_text().splitlines()]
    act = next(a for a in audit if a["event"] == "approve")
    assert act["tty"] is None and act["parents"] and "python" in act["parents"][0]


# 9. the plan binds the resolved working directory and the QOS -----------------------------------------------
def test_plan_binds_resolved_workdir_and_qos(lab: Lab, project: str) -> None:
    lab.ssh(f"mkdir -p {lab.root_sh}/real && ln -sfn {lab.root_sh}/real {lab.root_sh}/alias")
    grant(project, "--jobs", "5", "--qos", "normal")
    r = launched(launch(project, "--verbose", "--workdir", f"{lab.remote_root}/alias", "--qos", "normal"))
    assert r["plan"]["workdir"].endswith("/real") and r["plan"]["qos"] == "normal"
    other = launch(project, "--qos", "high")
    assert other.rc == Exit.PENDING
    assert (
        "qos high not in normal"
        in json.loads(rsk("approvals", "-p", project, "--json").out)["cards"][0]["closest_why"][0]
    )
    lab.set_policy("qos = normal\n")
    assert launch(project, "--qos", "high").rc == Exit.DENIED


# SSH: a ProxyJump chain of several hops is followed hop by hop, never cut to the first ----------------------
def test_proxy_jump_chain_of_two_hops(lab: Lab, project: str, tmp_path: Path) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host 127.0.0.1\n  IdentityFile {LAB_DIR / 'id_ed25519'}\n")
    hop = f"{LAB_USER}@127.0.0.1:2223"
    text = (
        (ROOT / "targets" / "lab.toml")
        .read_text()
        .replace('remote_root = "~/.rsk"', f'remote_root = "{lab.remote_root}"')
    )
    (lab.targets_dir / "chain.toml").write_text(text + f'proxy_jump = "{hop},{hop}"\nssh_config = "{cfg}"\n')
    try:
        grant(project, "--jobs", "1")
        r = rsk("launch", "-t", "chain", "-p", project, "--json", "--", "true")
        assert r.rc == 0, r.err
        (lab.targets_dir / "chain.toml").write_text(
            text + f'proxy_jump = "{hop},{LAB_USER}@127.0.0.1:1"\nssh_config = "{cfg}"\n'
        )
        broken = rsk("launch", "-t", "chain", "-p", project, "--", "true")
        assert broken.rc == Exit.CONNECT, broken.err  # the second hop is used (and fails), never skipped
        assert "127.0.0.1:1" in broken.err
    finally:
        (lab.targets_dir / "chain.toml").unlink()


# 5. a second launch of a request id never frees what a first one is submitting -----------------------------
def test_a_second_launch_of_a_request_id_never_frees_what_a_first_is_submitting(lab: Lab, project: str) -> None:
    """The first launch is allowed by the grant, then waits for the project's lock on the cluster (a job of
    the account holds it); a second launch of the same request id, with another plan, is decided meanwhile.
    It must not give back the first one's charge: the first one's job counts, and the grant is used up."""
    grant(project, "--jobs", "1")
    journal = f"{lab.root_sh}/journal"
    hold = f"{journal}/{project}.held"  # the job holds the lock while this file exists
    lab.ssh(f"mkdir -p {journal} && touch {hold} && (nohup flock {journal}/{project}.lock sh -c "
            f"'while [ -e {hold} ]; do sleep 0.2; done' >/dev/null 2>&1 &)")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    first = subprocess.Popen(
        [sys.executable, "-S", str(ROOT / "src" / "rsk" / "launcher.py"), "launch", "--target", "lab", "--project",
         project, "--json", "-r", "same", "--", "sleep", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while grant_view(project)["jobs_reserved"] != 1:  # the first launch holds its charge, at the lock
            assert time.monotonic() < deadline and first.poll() is None, first.communicate()
            time.sleep(0.3)
        second = launch(project, "-r", "same", command=("sleep", "31"))
        # the budget is the first launch's (a human decides), or the cluster already knows its plan
        assert second.rc in (Exit.PENDING, Exit.CONFLICT), second.err
        assert first.poll() is None  # still at the lock
        lab.ssh(f"rm {hold}")
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    job = launched(type(second)(first.returncode, out, err))["job_id"]
    view = grant_view(project)
    assert view["jobs_spent"] + view["jobs_reserved"] == 1 and view["jobs_left"] == 0, view
    third = launch(project, "-r", "other", command=("true",))
    assert third.rc == Exit.PENDING, third.err  # the grant allowed one job, and it runs
    assert jobs_of(lab, project, "other") == []
    rsk("cancel", job, "-t", "lab", "-p", project)


def test_evidence_a_job_forges_then_withdraws_never_submits_an_undecided_plan(lab: Lab, project: str) -> None:
    """A job of the account writes a `started` marker claiming a request it was never allowed, so the plan shows
    the request submitted and rsk replays it without a decision; then, holding the project's lock, it removes the
    marker, so the submit program finds nothing done. A replay submits nothing: the launch is refused."""
    grant(project, "--max-gpus", "0", "--cpu-hours", "1")  # covers small CPU jobs only
    big = ("--gpus", "2", "--time", "60", "--mem", "100M")
    planned = json.loads(rsk("plan", "--target", "lab", "--project", project, "-r", "big1", "--json", *big,
                             "--", "true").out)  # fmt: skip
    assert planned["would"] == "ask"
    run = f"{lab.root_sh}/runs/{project}/big1/t0"
    lock = f"{lab.root_sh}/journal/{project}.lock"
    marker = f"job=999990 node=n1 t=1 plan={planned['plan']['hash']}"
    assert lab.ssh(f"mkdir -p {run} {lab.root_sh}/journal && echo '{marker}' > {run}/started").returncode == 0
    holder = subprocess.Popen(
        ["ssh", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={LAB_DIR / 'known_hosts'}", "-i",
         str(LAB_DIR / "id_ed25519"), "-p", str(os.environ.get("RSK_LAB_PORT", "2222")), f"{LAB_USER}@127.0.0.1",
         f"flock {lock} sh -c 'sleep 4; rm -f {run}/started'"],
    )  # fmt: skip
    try:
        time.sleep(1)  # the lock is held; the marker still shows the request submitted
        r = rsk("launch", "--target", "lab", "--project", project, "-r", "big1", "--json", *big, "--", "true")
    finally:
        holder.wait(timeout=30)
    assert r.rc == Exit.CONFLICT and "replay-changed" in r.out + r.err, (r.rc, r.out, r.err)
    assert jobs_of(lab, project, "big1") == []  # nothing submitted
    assert grant_view(project)["jobs_spent"] == 0 and grant_view(project)["jobs_reserved"] == 0


# 10. the human's cancel works whatever a job holds ------------------------------------------------------------
HOLDER = """import fcntl, glob, os, sys, time
held = [open(p, "a") for p in glob.glob(os.path.expanduser(sys.argv[1] + "/journal/*.lock"))]
for f in held:
    fcntl.flock(f, fcntl.LOCK_EX)
open(os.path.expanduser(sys.argv[2]), "w").close()
time.sleep(600)
"""


def test_a_job_holding_every_lock_neither_blocks_nor_fakes_the_humans_cancel(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    """A job of the account holds every lock under the remote root (flock on each journal/*.lock, this project's
    among them). The human's cancel of a request and of a batch returns at once, on Slurm's word, journaling
    nothing (the journal loses nothing either); a launch and reconcile fail with `lock-held` (exit 75), naming
    the lock and `rsk cancel`, well within the command's time, and submit nothing."""
    grant(project, "--jobs", "10")
    one = launched(launch(project, "-r", "one", command=("sleep", "300")))["job_id"]
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("".join(json.dumps({"key": f"k{i}", "argv": ["sleep", "300"]}) + "\n" for i in range(3)))
    r = rsk("launch", "-t", "lab", "-p", project, "-r", "bb", "--tasks", str(tasks), "--json")
    batch = [t["job_id"] for t in launched(r)["tasks"]]
    marker = f"{lab.remote_root}/held-{project}"
    holder = lab.ssh(f"cat > {lab.root_sh}/holder.py <<'EOF'\n{HOLDER}EOF\n"
                     f"sbatch --parsable -t 10 --mem=50M --chdir=/tmp --output=/dev/null --job-name=holder "
                     f"--wrap 'python3 {lab.root_sh}/holder.py {lab.remote_root} {marker}'").stdout.strip()  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while lab.ssh(f"test -f {marker}").returncode != 0:  # the job runs and holds every lock
            assert time.monotonic() < deadline, "the job holding the locks did not start"
            time.sleep(1)
        journal = lab.journal(project)
        started = time.monotonic()
        cancelled = [rsk("cancel", "-t", "lab", "-p", project, "-r", "one", "--json"),
                     rsk("cancel", "-t", "lab", "-p", project, "--batch", "bb", "--json")]  # fmt: skip
        took = time.monotonic() - started
        results = {}
        for c in cancelled:
            assert c.rc == 0, (c.out, c.err)
            body = json.loads(c.out)
            results |= {x["job_id"]: x["result"] for x in body["results"]}
            assert "lock of project" in " ".join(body["warnings"]) and "rsk: warning:" in c.err
        assert results == dict.fromkeys([one, *batch], "cancelled")
        assert took < 60, took  # (a cancel that waited on the lock timed out after 120 s, exit 75)
        states = lab.ssh(f"squeue -h -r -t all -j {','.join([one, *batch])} -o '%i %T'").stdout.split("\n")
        assert all(line.split(" ")[1] in ("CANCELLED", "COMPLETING") for line in states if line), states
        assert lab.journal(project) == journal  # nothing lost, and nothing written without the lock
        # a launch and reconcile wait for the lock only so long, and say why
        started = time.monotonic()
        blocked = [launch(project, "-r", "two", command=("sleep", "300")),
                   rsk("reconcile", "-t", "lab", "-p", project, "--json")]  # fmt: skip
        assert time.monotonic() - started < 110
        for b in blocked:
            assert b.rc == Exit.CONNECT, (b.rc, b.out, b.err)
            error = json.loads(b.out)
            assert error["error"] == "lock-held" and error["retryable"], error
            assert f"journal/{project}.lock" in error["message"] and "rsk cancel" in error["message"] + error["hint"]
        assert jobs_of(lab, project, "two") == []
        assert grant_view(project)["jobs_reserved"] == 0  # the launch's hold was given back, on Slurm's word
    finally:
        lab.ssh(f"scancel {holder}; scancel {one} {' '.join(batch)}")
    assert lab.journal(project) == journal
    assert json.loads(rsk("journal", "-t", "lab", "-p", project, "--json").out)["chain_ok"] is True
