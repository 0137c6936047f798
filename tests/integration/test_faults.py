"""Fault injection against the lab cluster: nothing is lost, nothing is done twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsk.errors import Exit
from tests.conftest import LAB_USER, ROOT, Lab, rsk
from tests.integration.helpers import Shims, grant, grant_view, jfield, launch, launched


@pytest.mark.parametrize("when", ["kill-before", "kill-after"])
def test_connection_cut_around_sbatch_never_submits_twice(
    lab: Lab, project: str, sbatch_shim: Shims, when: str
) -> None:
    grant(project, "--jobs", "3")
    sbatch_shim.arm(when)
    cut = launch(project, "-r", "once", command=("sleep", "60"))
    assert cut.rc == Exit.CONNECT, cut.err
    assert "--request-id once" in cut.err  # the hint says how to continue safely
    assert grant_view(project)["jobs_reserved"] == 1  # unknown outcome: the charge is kept
    events = [line.split(" ")[2] for line in lab.journal(project)]
    assert events == ["ev=intent"]
    r = rsk("reconcile", "-t", "lab", "-p", project, "--json")
    if when == "kill-after":
        assert len(lab.jobs_named(f"rsk:{project}:once")) == 1
        assert [i["result"] for i in json.loads(r.out)["items"]] == ["reconciled"]
        # the charge follows: the job exists, so it is submitted (never released: that would be a free job)
        assert grant_view(project)["jobs_spent"] == 1 and grant_view(project)["jobs_reserved"] == 0
    else:
        assert [i["result"] for i in json.loads(r.out)["items"]] == ["abandoned"]
        # nothing ran: reconcile gives the reservation back
        assert grant_view(project)["jobs_spent"] == 0 and grant_view(project)["jobs_reserved"] == 0
    retry = launched(launch(project, "-r", "once", command=("sleep", "60")))
    assert len(lab.jobs_named(f"rsk:{project}:once")) == 1
    assert lab.jobs_named(f"rsk:{project}:once")[0].split(" ")[0] == retry["job_id"]
    view = grant_view(project)
    assert view["jobs_spent"] == 1 and view["jobs_reserved"] == 0
    again = launched(launch(project, "-r", "once", command=("sleep", "60")))
    assert again["job_id"] == retry["job_id"] and again["status"] == "replayed"
    lab.ssh(f"scancel {retry['job_id']}")


def wait_slurm_healthy(timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], capture_output=True, text=True, check=False)
        if r.returncode == 0 and r.stdout.split() and all(s in ("idle", "mix", "alloc") for s in r.stdout.split()):
            return
        time.sleep(0.5)
    raise AssertionError("slurm did not come back")


@pytest.mark.serial  # stops slurmctld
def test_slurmctld_down_during_launch(lab: Lab, project: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import rsk.ops.launch as launch_mod
    from rsk.errors import UnavailableError
    from rsk.wire.protocol import Request

    grant(project, "--jobs", "2")
    real_allow = launch_mod.allow

    def allow_then_stop(*args, **kwargs):  # type: ignore[no-untyped-def]
        allowed = real_allow(*args, **kwargs)
        subprocess.run(["pkill", "-x", "slurmctld"], check=False)
        time.sleep(1)
        return allowed

    monkeypatch.setattr(launch_mod, "allow", allow_then_stop)
    try:
        with pytest.raises(UnavailableError) as info:
            launch_mod.launch("lab", Request(project=project, request_id="down", argv=["true"]))
        assert info.value.exit_code == Exit.UNAVAILABLE
        view = grant_view(project)
        # an error after go is the program's word alone, and Slurm cannot confirm there is no job: the hold
        # stays reserved, as a lost answer's (ADR 0053), and the error says so
        assert view["jobs_reserved"] == 1 and view["jobs_spent"] == 0, view
        assert "stays reserved" in (info.value.hint or ""), info.value.hint
        # truthful: the expect step found the controller gone before anything was attempted, or it
        # journaled the intent and then the failure; never an acceptance
        events = [line.split(" ")[2] for line in lab.journal(project)]
        assert events in ([], ["ev=intent", "ev=failed"])
        if events:
            assert "code=slurm-unavailable" in lab.journal(project)[-1]
        # while it is down, planning says so with its own exit code
        monkeypatch.setattr(launch_mod, "allow", real_allow)
        r = launch(project, "-r", "while-down")
        assert r.rc == Exit.UNAVAILABLE and "Slurm controller" in r.err
    finally:
        subprocess.run(["/usr/sbin/slurmctld"], check=False)
        wait_slurm_healthy()
    ok = launched(launch(project, "-r", "down"))  # the same request goes through once it is back, on its hold
    assert ok["status"] == "submitted"
    view = grant_view(project)
    assert view["jobs_reserved"] + view["jobs_spent"] == 1, view  # one job, one count: the hold was taken, not doubled


@pytest.fixture
def full_root(lab: Lab, tmp_path: Path) -> Iterator[str]:
    """A target whose remote root is a tiny tmpfs, already holding the scripts."""
    name = f"full{uuid.uuid4().hex[:6]}"
    home = Path(f"~{LAB_USER}").expanduser()
    mount = home / f".rsk-{name}"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", str(mount)], check=True)
    subprocess.run(["chown", LAB_USER, str(mount)], check=True)
    (lab.targets_dir / f"{name}.toml").write_text(
        (lab.targets_dir / "lab.toml").read_text().replace(lab.remote_root, f"~/.rsk-{name}")
    )
    try:
        yield name
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        mount.rmdir()
        (lab.targets_dir / f"{name}.toml").unlink()


def test_full_remote_root_refuses_before_sbatch(lab: Lab, project: str, full_root: str) -> None:
    grant(project, "--jobs", "2")
    assert rsk("doctor", full_root).rc == 0  # deploys the scripts while there is room
    lab.ssh(f"dd if=/dev/zero of=~/.rsk-{full_root}/filler bs=4k 2>/dev/null; true")
    r = rsk("launch", "-t", full_root, "-p", project, "-r", "full", "--json", "--", "true")
    assert r.rc == Exit.REMOTE_ROOT, r.err
    assert lab.jobs_named(f"rsk:{project}:") == []
    view = grant_view(project)
    assert view["jobs_reserved"] == 0 and view["jobs_spent"] == 0
    lab.ssh(f"rm -f ~/.rsk-{full_root}/filler")
    assert launched(rsk("launch", "-t", full_root, "-p", project, "-r", "full", "--json", "--", "true"))


AGENT = """
import json, random, sys
from rsk.errors import RskError
from rsk.ops.launch import launch
from rsk.ops.cancel import cancel
from rsk.wire.protocol import Request
project, worker = sys.argv[1], int(sys.argv[2])
rng = random.Random(worker)
mine = []
for i in range(10):
    rid = f"a{worker}-{i}"
    try:
        r = launch("lab", Request(project=project, request_id=rid, argv=["sleep", "30"], mem_mb=64, time_min=2))
        mine.append(rid)
        print(json.dumps({"launched": rid, "job": r.job_id}), flush=True)
    except RskError as exc:
        print(json.dumps({"refused": rid, "code": exc.code}), flush=True)
    if mine and rng.random() < 0.5:
        victim = mine.pop(rng.randrange(len(mine)))
        rep = cancel("lab", project, request_id=victim)
        print(json.dumps({"cancel": victim, "results": [x.result for x in rep.results]}), flush=True)
"""


def test_concurrent_agents_launching_and_cancelling_agree(lab: Lab, project: str, tmp_path: Path) -> None:
    grant(project, "--jobs", "60")
    lab.set_policy("max_active_jobs = 1000\n")
    driver = tmp_path / "agent.py"
    driver.write_text(AGENT)
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
    cmd = [sys.executable, str(driver), project]
    procs = [subprocess.Popen([*cmd, str(w)], stdout=subprocess.PIPE, text=True, env=env) for w in range(8)]
    records = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0
        records += [json.loads(line) for line in out.splitlines()]
    launched_jobs = {r["launched"]: r["job"] for r in records if "launched" in r}
    cancelled = {r["cancel"] for r in records if "cancel" in r and r["results"] == ["cancelled"]}
    assert len(launched_jobs) == 60  # the grant's budget, exactly
    assert sum("refused" in r for r in records) == 20
    lines = lab.journal(project)
    accepted = {jfield(line, "rid"): jfield(line, "job") for line in lines if " ev=accepted " in line}
    assert accepted == launched_jobs  # journal and launches agree, one job per request
    journal_cancelled = {jfield(line, "rid") for line in lines if " ev=cancelled " in line}
    assert journal_cancelled == cancelled
    view = grant_view(project)
    assert view["jobs_spent"] == 60 and view["jobs_reserved"] == 0
    slurm = {line.split(" ")[0]: line.split(" ")[2] for line in lab.jobs_named(f"rsk:{project}:")}
    assert set(slurm) <= set(launched_jobs.values())
    for rid in cancelled:  # (a cancelled job's node may still be ending it: COMPLETING on a busy lab)
        assert slurm.get(launched_jobs[rid], "CANCELLED") in ("CANCELLED", "COMPLETING")
    for rid, job in launched_jobs.items():
        if rid not in cancelled:
            assert slurm.get(job) in ("PENDING", "RUNNING", "COMPLETED", "COMPLETING", None)
    lab.ssh(f"squeue -h -o '%i %j' | awk '$2 ~ /^rsk:{project}:/ {{print $1}}' | xargs -r scancel")
