"""The ledger on the launch path, against the lab cluster: precedence, expiry, budgets, release, humans."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rsk.errors import Exit
from rsk.ledger.models import MAX_PENDING_CARDS
from tests.conftest import ROOT, Lab, rsk
from tests.integration.helpers import Shims, finished_output, grant, grant_view, jfield, launch, launched


def test_deny_rule_wins_over_approval_and_grant(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "5")
    pending = launch(project, "--gpus", "1", "--partition", "gpu", "-r", "a")
    assert pending.rc == 0  # the grant covers it
    r = rsk("deny-rule", "add", "-p", project, "--reason", "no GPU jobs this week", "--gpus-at-least", "1", "--yes")
    assert r.rc == 0
    denied = launch(project, "--gpus", "1", "--partition", "gpu", "-r", "b")
    assert denied.rc == Exit.DENIED
    body = json.loads(denied.out)
    assert body["reason"] == "no GPU jobs this week"
    assert not [line for line in lab.journal(project) if " rid=b " in line]
    assert launch(project, "-r", "c").rc == 0  # a CPU job is still covered


def test_approval_of_exact_plan_allows_once_then_asks_again(lab: Lab, project: str) -> None:
    first = launch(project, "-r", "x1", command=("echo", "approved"))
    assert first.rc == Exit.PENDING
    card = json.loads(first.out)["card_id"]
    same = launch(project, "-r", "x1", command=("echo", "approved"))
    assert json.loads(same.out)["card_id"] == card  # the same plan finds the same card
    cards = json.loads(rsk("approvals", "-p", project, "--json").out)["cards"]
    assert [c["id"] for c in cards] == [card]
    assert cards[0]["plan"]["command"] == "echo approved"
    assert rsk("approve", card, "-p", project, "--yes").rc == 0
    ok = launched(launch(project, "-r", "x1", command=("echo", "approved")))
    assert ok["allowed_by"]["kind"] == "approval"
    assert finished_output(project, ok["job_id"])["text"] == "approved\n"
    # the one use is spent: the same plan under a new request id asks again
    assert launch(project, "-r", "x2", command=("echo", "approved")).rc == Exit.PENDING


def test_an_approval_runs_its_cards_request_and_another_request_of_the_same_plan_does_not_ride_it(
    lab: Lab, project: str
) -> None:
    mine = launch(project, "-r", "own-a", command=("echo", "mine"))
    assert mine.rc == Exit.PENDING, mine.out + mine.err
    card = json.loads(mine.out)["card_id"]
    other = launch(project, "-r", "own-b", command=("echo", "mine"))  # the same plan under another request id
    assert other.rc == Exit.PENDING
    theirs = json.loads(other.out)
    assert theirs["new_card"] and theirs["card_id"] != card  # its own card: the human sees two requests
    cards = json.loads(rsk("approvals", "-p", project, "--json").out)["cards"]
    assert sorted((c["id"], c["request_id"]) for c in cards) == sorted([(card, "own-a"), (theirs["card_id"], "own-b")])
    assert rsk("approve", card, "-p", project, "--yes").rc == 0
    rode = launch(project, "-r", "own-b", command=("echo", "mine"))  # launched first, it still asks
    assert rode.rc == Exit.PENDING and json.loads(rode.out)["card_id"] == theirs["card_id"], rode.out
    assert "allows request own-a" in json.loads(rode.out)["message"]
    waited = rsk("wait", card, "-p", project, "--json", "--timeout", "90")
    assert waited.rc == 0, waited.out + waited.err
    ran = json.loads(waited.out)["launch"]
    assert ran["request_id"] == "own-a" and ran["allowed_by"]["kind"] == "approval"
    assert finished_output(project, ran["job_id"])["text"] == "mine\n"
    assert not [line for line in lab.journal(project) if " rid=own-b " in line]  # nothing of own-b reached Slurm
    left = json.loads(rsk("approvals", "-p", project, "--json").out)["cards"]
    assert [c["id"] for c in left] == [theirs["card_id"]]


def test_changed_plan_needs_a_new_approval(lab: Lab, project: str) -> None:
    card = json.loads(launch(project, "-r", "p1", command=("echo", "v1")).out)["card_id"]
    assert rsk("approve", card, "-p", project, "--uses", "5", "--yes").rc == 0
    changed = launch(project, "-r", "p2", command=("echo", "v2"))
    assert changed.rc == Exit.PENDING
    assert json.loads(changed.out)["card_id"] != card
    more_gpus = launch(project, "-r", "p3", "--partition", "gpu", "--gpus", "1", command=("echo", "v1"))
    assert more_gpus.rc == Exit.PENDING


def test_human_denial_reaches_the_agent(lab: Lab, project: str) -> None:
    card = json.loads(launch(project, "-r", "d1").out)["card_id"]
    assert rsk("deny", card, "-p", project, "--reason", "use the cpu partition", "--yes").rc == 0
    again = launch(project, "-r", "d1")
    assert again.rc == Exit.DENIED
    assert "use the cpu partition" in again.err
    waited = rsk("wait", card, "-p", project, "--json")
    assert waited.rc == Exit.DENIED and json.loads(waited.out)["reason"] == "use the cpu partition"
    assert lab.journal(project) == []


def test_wait_blocks_until_a_human_approves_then_submits(lab: Lab, project: str) -> None:
    card = json.loads(launch(project, "-r", "w1", command=("echo", "waited")).out)["card_id"]
    env = {"PYTHONPATH": str(ROOT / "src")}
    waiter = subprocess.Popen(
        [sys.executable, "-m", "rsk", "wait", card, "-p", project, "--json", "--timeout", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**__import__("os").environ, **env},
    )  # fmt: skip
    time.sleep(2)
    assert waiter.poll() is None  # still waiting
    assert rsk("approve", card, "-p", project, "--yes").rc == 0
    out, err = waiter.communicate(timeout=90)
    assert waiter.returncode == 0, err  # done: approved, submitted, and the job ended within the timeout
    body = json.loads(out)
    assert body["status"] == "done" and body["card_id"] == card
    job = body["launch"]["job_id"]
    assert [(j["job_id"], j["state"], j["exit_code"]) for j in body["jobs"]] == [(job, "succeeded", 0)]
    assert finished_output(project, job)["text"] == "waited\n"


def test_waits_at_once_on_an_approved_card_submit_once_and_file_nothing_new(lab: Lab, project: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    card = json.loads(launch(project, "-r", "race", command=("echo", "once")).out)["card_id"]
    assert rsk("approve", card, "-p", project, "--yes").rc == 0
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: rsk("wait", card, "-p", project, "--json", "--timeout", "90"), range(4)))
    assert all(r.rc == 0 for r in runs), [(r.rc, r.err) for r in runs]
    said = sorted(json.loads(r.out)["launch"]["status"] for r in runs)
    assert said == ["replayed", "replayed", "replayed", "submitted"], said
    assert len({json.loads(r.out)["launch"]["job_id"] for r in runs}) == 1
    cards = json.loads(rsk("approvals", "-p", project, "--json").out)["cards"]
    assert cards == [], cards  # no new card for work that already ran
    # a second card of the same plan, withdrawn by its agent: waiting on it ends at once, and files nothing
    other = json.loads(launch(project, "-r", "race-2", command=("echo", "once")).out)["card_id"]
    assert rsk("withdraw", other, "-p", project).rc == 0
    w = rsk("wait", other, "-p", project, "--json", "--timeout", "5")
    assert w.rc == Exit.DENIED and json.loads(w.out)["error"] == "card-withdrawn", w.out
    assert json.loads(rsk("approvals", "-p", project, "--json").out)["cards"] == []


def test_a_card_whose_request_a_grant_then_allowed_waits_no_more_and_its_wait_follows_the_job(
    lab: Lab, project: str
) -> None:
    card = json.loads(launch(project, "-r", "sup", command=("echo", "granted")).out)["card_id"]
    grant(project, "--jobs", "2")
    job = launched(launch(project, "-r", "sup", command=("echo", "granted")))["job_id"]
    assert json.loads(rsk("approvals", "-p", project, "--json").out)["cards"] == []  # nothing left for the human
    shown = json.loads(rsk("approvals", "show", card, "-p", project, "--json").out)["card"]
    assert shown["status"] == "withdrawn" and shown["superseded_by"], shown
    w = rsk("wait", card, "-p", project, "--json", "--timeout", "60")
    assert w.rc == 0 and json.loads(w.out)["launch"]["status"] == "replayed", w.out + w.err
    assert json.loads(w.out)["launch"]["job_id"] == job


def test_launch_wait_times_out_as_pending(lab: Lab, project: str) -> None:
    r = launch(project, "--wait", "1")
    assert r.rc == Exit.PENDING
    assert "still pending" in r.err


def test_expired_grant_does_not_cover(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "5", "--expires", "2s")
    time.sleep(2.5)
    r = launch(project)
    assert r.rc == Exit.PENDING
    cards = json.loads(rsk("approvals", "-p", project, "--json").out)["cards"]
    assert cards[0]["closest_why"][0].startswith("expired")


def test_expired_approval_does_not_allow(lab: Lab, project: str) -> None:
    card = json.loads(launch(project, "-r", "e1").out)["card_id"]
    assert rsk("approve", card, "-p", project, "--expires", "2s", "--yes").rc == 0
    time.sleep(2.5)
    again = launch(project, "-r", "e1")
    assert again.rc == Exit.PENDING
    assert "of this plan expired at" in again.err


def test_budget_exhaustion_gpu_hours_and_jobs(lab: Lab, project: str) -> None:
    grant(project, "--gpu-hours", "1", "--jobs", "10")
    gpu = ("--partition", "gpu", "--gpus", "1", "--time", "30")
    assert launch(project, *gpu, "-r", "g1").rc == 0  # 0.5 GPU-h
    assert launch(project, *gpu, "-r", "g2").rc == 0  # 1.0 GPU-h
    third = launch(project, *gpu, "-r", "g3")
    assert third.rc == Exit.PENDING
    cards = json.loads(rsk("approvals", "-p", project, "--json").out)["cards"]
    assert "needs 0.50 GPU-h, 0.00 left" in cards[0]["closest_why"][0]
    view = grant_view(project)  # both jobs still pending or running: their worst case is reserved
    assert view["gpu_hours_reserved"] == 1.0 and view["gpu_hours_left"] == 0.0 and view["jobs_spent"] == 2
    assert view["status"] == "active"  # GPU-hours spent: work without GPUs still fits (docs/adr/0070)


def test_charge_is_released_when_the_cluster_refuses(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "3")
    lab.set_policy("max_active_jobs = 1\n")
    assert launch(project, "-r", "c1", command=("sleep", "60")).rc == 0
    refused = launch(project, "-r", "c2", command=("sleep", "61"))
    assert refused.rc == Exit.CAP
    view = grant_view(project)
    assert view["jobs_spent"] == 1 and view["jobs_reserved"] == 0 and view["jobs_left"] == 2
    assert "ev=refused rid=c2" in lab.journal(project)[-1]


def test_charge_is_released_when_sbatch_fails(lab: Lab, project: str, sbatch_shim: Shims) -> None:
    """The partition stops taking jobs between plan and submit: sbatch fails, the charge is released. (sbatch
    says so here, as it does for a partition an admin drained in between: draining one would refuse the jobs of
    every suite sharing the lab.)"""
    from rsk.errors import RejectedError
    from rsk.ops import launch as launch_mod
    from rsk.wire.protocol import Request

    grant(project, "--jobs", "2")
    sbatch_shim.arm("fail-before")  # the plan's --test-only passes; the submit's sbatch fails
    with pytest.raises(RejectedError):
        launch_mod.launch("lab", Request(project=project, request_id="s1", partition="gpu", argv=["true"]))
    view = grant_view(project)
    assert view["jobs_spent"] == 0 and view["jobs_reserved"] == 0 and view["jobs_left"] == 2
    events = [line.split(" ")[2] for line in lab.journal(project)]
    assert events == ["ev=intent", "ev=failed"]
    assert "code=sbatch-failed" in lab.journal(project)[-1]


def test_policy_refusal_is_a_denial_with_reasons_and_files_no_card(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "2")
    lab.set_policy("max_gpus = 1\n")
    r = launch(project, "--partition", "gpu", "--gpus", "2")
    assert r.rc == Exit.DENIED
    assert "gpus per node 2 exceeds the ceiling 1" in r.err
    assert json.loads(rsk("approvals", "-p", project, "--json").out)["cards"] == []


DRIVER = """
import json, sys
from rsk.errors import RskError
from rsk.ops.launch import launch
from rsk.wire.protocol import Request
project, worker = sys.argv[1], int(sys.argv[2])
for i in range(25):
    rid = f"w{worker}-{i}"
    req = Request(project=project, request_id=rid, argv=["true", rid], mem_mb=64, time_min=1)
    try:
        r = launch("lab", req)
        print(json.dumps({"rid": rid, "ok": True, "job": r.job_id}), flush=True)
    except RskError as exc:
        print(json.dumps({"rid": rid, "ok": False, "code": exc.code}), flush=True)
"""


def test_parallel_launches_never_overspend_a_grant(lab: Lab, project: str, tmp_path: Path) -> None:
    """8 processes x 25 launches against a grant of 100 jobs: exactly 100 run, the rest wait for a human (as many
    cards as one user may have waiting; the others are refused at that cap)."""
    grant(project, "--jobs", "100")
    lab.set_policy("max_active_jobs = 1000\n")
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT / "src") + ":" + str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, str(driver), project, str(w)], stdout=subprocess.PIPE, text=True, env=env)
        for w in range(8)
    ]
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0
        results += [json.loads(line) for line in out.splitlines()]
    assert len(results) == 200
    allowed = [r for r in results if r["ok"]]
    refused = [r for r in results if not r["ok"]]
    assert len(allowed) == 100
    assert len(refused) == 100 and {r["code"] for r in refused} == {"approval-pending", "cards-cap"}
    assert sum(r["code"] == "approval-pending" for r in refused) == MAX_PENDING_CARDS  # one user's cards (ADR 0067)
    jobs = {r["job"] for r in allowed}
    assert len(jobs) == 100  # 100 distinct Slurm jobs
    # the ledger agrees
    view = grant_view(project)
    assert view["jobs_spent"] == 100 and view["jobs_reserved"] == 0 and view["jobs_left"] == 0
    # the cluster's journal agrees: one intent and one acceptance per allowed request, nothing else
    lines = lab.journal(project)
    accepted = {jfield(line, "job") for line in lines if " ev=accepted " in line}
    assert accepted == jobs
    assert sum(" ev=intent " in line for line in lines) == 100
    # and Slurm agrees: every rsk job of this project it knows is one the journal accepted
    seen = {line.split(" ")[0] for line in lab.jobs_named(f"rsk:{project}:")}
    assert seen <= jobs
    started = lab.ssh(f"cat {lab.root_sh}/runs/{project}/*/started 2>/dev/null | sed -n 's/^job=\\([0-9]*\\).*/\\1/p'")
    assert set(started.stdout.split()) <= jobs


def test_one_request_id_waits_on_one_card_another_plan_is_a_conflict_naming_what_differs(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    """A second plan under a request id whose card still waits is refused before any card is filed (exit 5),
    saying what differs: the human never sees two cards for one request and picks the wrong one."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print(1)\n")
    first = launch(project, "-r", "dup", "--time", "8", "--code", str(code), command=("python3", "train.py"))
    assert first.rc == Exit.PENDING, first.err
    card = json.loads(first.out)["card_id"]
    (code / "extra.txt").write_text("x\n")
    other = launch(project, "-r", "dup", "--time", "9", "--code", str(code), command=("python3", "train.py"))
    assert other.rc == Exit.CONFLICT, other.out + other.err
    body = json.loads(other.out)
    assert body["error"] == "request-conflict" and body["card_id"] == card
    assert body["differs"] == ["code", "time_min"] and body["code_added"] == ["extra.txt"], body
    assert f"rsk withdraw {card}" in body["hint"]
    cards = json.loads(rsk("approvals", "-p", project, "--json").out)["cards"]
    assert [c["id"] for c in cards] == [card]  # no second card
    (code / "extra.txt").unlink()
    same = launch(project, "-r", "dup", "--time", "8", "--code", str(code), command=("python3", "train.py"))
    assert same.rc == Exit.PENDING and json.loads(same.out)["card_id"] == card  # the same plan: the same card
    assert rsk("withdraw", card, "-p", project, "--json").rc == 0
    again = launch(project, "-r", "dup", "--time", "9", command=("python3", "train.py"))
    assert again.rc == Exit.PENDING and json.loads(again.out)["card_id"] != card  # withdrawn: a new plan may ask
