"""The answers an agent reads, on the lab: every read command's --json is one object with its schema_version;
work that falls to the shared project says so; fetched files land where a code snapshot never looks."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from rsk.errors import Exit
from tests.conftest import ROOT, RSK, Lab, rsk
from tests.integration.helpers import grant, launch, launched


def _doc(out: str) -> dict[str, object]:
    doc = json.loads(out)
    assert isinstance(doc, dict) and isinstance(doc.get("schema_version"), int), out
    return doc


def test_every_read_command_answers_one_object_with_its_schema_version(lab: Lab, project: str) -> None:
    grant(project, "--cpu-hours", "1")
    job = str(launched(launch(project, "-r", "one", "--mem", "100M", "--time", "2", command=("echo", "hi")))["job_id"])
    where = ["--target", "lab", "--project", project]
    reads = [
        ["status"], ["status", job], ["status", "-r", "one"], ["events"], ["journal"], ["info", "lab"], ["gpus"],
        ["lease", "status"], ["watch", "--once"], ["wait", job, "--timeout", "60"], ["logs", job], ["targets"],
        ["approvals"], ["grant", "list"], ["deny-rule", "list"], ["reconcile"],
    ]  # fmt: skip
    for argv in reads:
        ledger = argv[0] in ("approvals", "grant", "deny-rule", "info")
        extra = [] if argv[0] == "targets" else ["--project", project] if ledger else where
        r = rsk(*argv, *extra, "--json", timeout=120)
        assert r.rc == 0, (argv, r.rc, r.out, r.err)
        doc = _doc(r.out)
        if argv[0] == "watch":  # counts per state, as status has them: the project's one job
            statuses = doc["statuses"]
            assert isinstance(statuses, list) and sum(statuses[0]["counts"].values()) == 1, statuses
    idle = rsk("status", "--active", *where)  # the job ended: the filter matches nothing, and says so
    assert idle.rc == 0 and f"no active jobs in project {project}" in idle.out, idle.out
    d = rsk("doctor", "lab", "--json", timeout=120)
    assert d.rc in (0, Exit.CHECKS) and "checks" in _doc(d.out)


def _in(cwd: Path, *args: str, lab: Lab) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "RSK_TARGETS_PATH": str(lab.targets_dir)}
    return subprocess.run([*RSK, *args], cwd=cwd, capture_output=True, text=True, env=env, check=False, timeout=300)


def test_plan_and_launch_with_no_project_chosen_are_refused_and_default_runs_when_named(
    lab: Lab, tmp_path: Path
) -> None:
    for verb in ("plan", "launch"):
        ran = _in(tmp_path, verb, "--target", "lab", "-r", "shared-1", "--time", "1", "--json", "--", "true", lab=lab)
        assert ran.returncode == Exit.USAGE, ran.stderr
        assert _doc(ran.stdout)["error"] == "no-project" and "--project default" in _doc(ran.stdout)["hint"]
    named = _in(tmp_path, "plan", "--target", "lab", "-p", "default", "-r", "shared-1", "--time", "1", "--json", "--",
                "true", lab=lab)  # fmt: skip
    assert named.returncode == 0 and _doc(named.stdout)["project"] == "default" and "warning" not in named.stderr


def test_a_pending_launch_says_which_grant_came_closest_and_why_it_does_not_cover(lab: Lab, project: str) -> None:
    g = grant(project, "--max-time", "5", "--cpu-hours", "1")["grant"]["id"]
    r = launch(project, "-r", "long", "--mem", "100M", "--time", "10")
    assert r.rc == Exit.PENDING, r.err
    err = _doc(r.out)
    assert err["closest_grant"] == g and any("ceiling 5" in w for w in err["closest_why"]), err
    assert f"closest grant {g}" in err["message"]


def test_fetch_lands_in_rsk_results_which_the_next_snapshot_leaves_out(lab: Lab, project: str, tmp_path: Path) -> None:
    grant(project, "--cpu-hours", "1")
    code = tmp_path / "code"
    code.mkdir()
    (code / "run.sh").write_text("echo 0.9 > metrics.txt\n")
    args = ["launch", "--target", "lab", "--project", project, "-r", "fx", "--code", ".", "--mem", "100M", "--time",
            "2", "--json", "--", "sh", "run.sh"]  # fmt: skip
    first = _in(code, *args, lab=lab)
    assert first.returncode == 0, first.stderr
    job = json.loads(first.stdout)["job_id"]
    w = rsk("wait", job, "--target", "lab", "--project", project, "--timeout", "120", "--json")
    assert w.rc == 0, w.out
    got = _in(code, "fetch", job, "metrics.txt", "--target", "lab", "--project", project, "--json", lab=lab)
    assert got.returncode == 0, got.stderr
    assert (code / "rsk-results" / job / "metrics.txt").read_text() == "0.9\n"
    again = _in(code, *args, lab=lab)  # the same files: the same plan, a replay, not a request conflict
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["status"] == "replayed"
