"""A workflow whose answer was lost, one of its tasks hidden by a job of the account before any status saw it
(renamed, its output moved, its journal line erased: what a job of the account can do while the task pends).
The ledger keeps the whole plan on its books: the task not found keeps its worst case and counts against
--max-active until reconcile finds its job by its batch script, which then joins the charge and is listed
with Slurm's state (docs/security.md, ADR 0039)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rsk.errors import Exit
from tests.conftest import ROOT, Lab, rsk
from tests.integration.helpers import Shims, grant, grant_view, launch

LOST_WORKFLOW = """
import sys
from rsk.cluster import remote
from rsk.errors import ConnectError
from rsk.ops.launch import launch
from rsk.request.spec import LaunchSpec, build_request
from rsk.request.tasks import parse_tasks

reply = remote.Conversation.reply


def cut(self, *args, **kwargs):  # `go` reaches the cluster, its answer never comes back
    reply(self, *args, **kwargs)
    raise ConnectError("the connection was cut after go")


remote.Conversation.reply = cut
tasks = parse_tasks('{"key": "t0", "argv": ["sleep", "300"]}\\n'
                    '{"key": "t1", "argv": ["sleep", "300"], "needs": ["t0"]}\\n')
spec = LaunchSpec(tasks=tasks, request_id=sys.argv[2], cpus=1, time="10")
try:
    launch("lab", build_request(spec, sys.argv[1], "agent"))
except ConnectError:
    sys.exit(0)
sys.exit(1)
"""


def test_a_task_hidden_after_a_lost_answer_stays_charged_counted_and_listed_with_slurms_state(
    lab: Lab, project: str, shims: Shims
) -> None:
    shims.add("sbatch", '#!/bin/sh\nexec /usr/bin/sbatch --hold "$@"\n')  # the tasks pend until released
    grant(project, "--jobs", "5", "--cpu-hours", "5", "--max-active", "2")
    lost = subprocess.run([sys.executable, "-c", LOST_WORKFLOW, project, "w1"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120, check=False)  # fmt: skip
    assert lost.returncode == 0, lost.stdout + lost.stderr
    mine = [line.split(" ")[0].replace("[", "").replace("]", "") for line in lab.jobs_named(f"rsk:{project}:")]
    try:
        assert len(mine) == 2, mine
        [t0] = [j for j in mine if j.endswith("_0")]
        [t1] = [j for j in mine if j.endswith("_1")]
        worst = grant_view(project)
        assert worst["jobs_reserved"] == 2 and worst["cpu_hours_reserved"] > 0, worst  # the outcome is unknown
        log = f"{lab.root_sh}/journal/{project}.log"
        erase = f"grep -v ' ev=accepted rid=w1 .* idx=1 ' {log} > {log}.x && cat {log}.x > {log} && rm {log}.x"
        hide = f"scontrol update JobId={t1} JobName=innocent Comment=none StdOut=/tmp/{project}.out && {erase}"
        assert lab.ssh(hide).returncode == 0
        st = json.loads(rsk("status", "-t", "lab", "-p", project, "--json").out)
        assert [j["job_id"] for j in st["jobs"] if j["request_id"] == "w1"] == [t0], st  # only t0 is seen
        books = grant_view(project)  # adopted from t0 alone: the plan's t1 is still on the books at its worst case
        assert books["jobs_spent"] + books["jobs_reserved"] == 2, books
        total = books["cpu_hours_spent"] + books["cpu_hours_reserved"]
        assert abs(total - worst["cpu_hours_reserved"]) < 1e-3, (books, worst)
        extra = launch(project, "-r", "x1", "--cpus", "1", "--time", "10", command=("sleep", "300"))
        assert extra.rc == Exit.PENDING, extra.out + extra.err  # --max-active 2: t0 and the hidden t1 count
        rec = json.loads(rsk("reconcile", "-t", "lab", "-p", project, "--json").out)
        assert ("w1", "reconciled", t1) in [(i["request_id"], i["result"], i["job_id"]) for i in rec["items"]], rec
        st = json.loads(rsk("status", "-t", "lab", "-p", project, "--json").out)
        [seen] = [j for j in st["jobs"] if j["job_id"] == t1]
        assert seen["request_id"] == "w1" and seen["state"] == "pending", seen  # Slurm's word, never "lost"
        after = grant_view(project)
        assert after["jobs_spent"] == 2 and after["jobs_reserved"] == 0, after  # t1's job holds the charge
        assert abs(after["cpu_hours_spent"] + after["cpu_hours_reserved"] - total) < 1e-3, after
        again = launch(project, "-r", "x2", "--cpus", "1", "--time", "10", command=("sleep", "300"))
        assert again.rc == Exit.PENDING, again.out + again.err  # t1, found, still counts
    finally:
        mine = [line.split(" ")[0].replace("[", "").replace("]", "") for line in lab.jobs_named(f"rsk:{project}:")]
        lab.ssh(f"scancel {' '.join(mine + [t for t in (locals().get('t1'),) if t])}; rm -f /tmp/{project}.out")


CUT_WORKFLOW = """
import sys
from rsk.errors import RskError
from rsk.ops.launch import launch
from rsk.request.spec import LaunchSpec, build_request
from rsk.request.tasks import parse_tasks

tasks = parse_tasks('{"key": "t0", "argv": ["sleep", "300"]}\\n'
                    '{"key": "t1", "argv": ["sleep", "300"], "needs": ["t0"]}\\n')
spec = LaunchSpec(tasks=tasks, request_id=sys.argv[2], cpus=1, time="10")
try:
    launch("lab", build_request(spec, sys.argv[1], "agent"))
except RskError:
    sys.exit(0)
sys.exit(1)
"""


def test_a_task_never_submitted_after_a_lost_answer_is_released_by_the_human_only_when_the_cluster_shows_none(
    lab: Lab, project: str, shims: Shims
) -> None:
    # the submit program dies between its two sbatch calls: t0 is submitted (held), t1 never is, the answer is lost
    shims.add(
        "sbatch",
        f"""#!/bin/sh
case " $* " in *" --test-only "*) exec /usr/bin/sbatch "$@" ;; esac
if [ -f {shims.flags}/cut ]; then
    if [ -f {shims.flags}/one ]; then rm -f {shims.flags}/cut; kill -9 0; fi
    : > {shims.flags}/one
fi
exec /usr/bin/sbatch --hold "$@"
""",
    )
    shims.arm("cut")
    grant(project, "--jobs", "5", "--cpu-hours", "5", "--max-active", "2")
    cut = subprocess.run([sys.executable, "-c", CUT_WORKFLOW, project, "w2"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120, check=False)  # fmt: skip
    assert cut.returncode == 0, cut.stdout + cut.stderr
    mine = [line.split(" ")[0].replace("[", "").replace("]", "") for line in lab.jobs_named(f"rsk:{project}:")]
    try:
        assert len(mine) == 1 and mine[0].endswith("_0"), mine  # t1 was never submitted
        [t0] = mine
        rec = json.loads(rsk("reconcile", "-t", "lab", "-p", project, "--json").out)  # adopts t0; t1 abandoned
        assert ("w2", "abandoned") in [(i["request_id"], i["result"]) for i in rec["items"]], rec
        held = grant_view(project)
        assert held["jobs_spent"] == 2 and held["jobs_reserved"] == 0, held  # t1's stand-in still holds a job
        assert held["stand_ins"] == [{"request_id": "w2", "target": "lab", "count": 1}], held  # told to the human
        extra = launch(project, "-r", "x1", "--cpus", "1", "--time", "10", command=("sleep", "300"))
        assert extra.rc == Exit.PENDING, extra.out + extra.err  # --max-active 2: t0 and t1's stand-in

        # not the agent's to do: through the broker (exit 77) or without a terminal and --yes
        assert rsk("grant", "release", "w2", "-t", "lab", "-p", project, stdin="").rc == Exit.HUMAN
        assert grant_view(project)["jobs_spent"] == 2

        # the human's word, once reconcile and status show no job of t1
        r = rsk("grant", "release", "w2", "-t", "lab", "-p", project, "--reason", "cut before t1", "--yes", "--json")
        assert r.rc == 0, r.out + r.err
        done = json.loads(r.out)
        [book] = done["released"]
        assert book["stand_ins"] == ["unfound:1"] and book["jobs"] == [t0], done
        after = grant_view(project)
        assert after["jobs_spent"] == 1, after  # the stand-in counts no job; t0 still held at its worst case
        assert after["cpu_hours_reserved"] > 0 and after["stand_ins"] == [], after
        assert launch(project, "-r", "x2", "--cpus", "1", "--time", "10", command=("sleep", "300")).rc == 0
        audit = [json.loads(line) for line in (Path(os.environ["RSK_HOME"]) / "projects" / project /
                                               "audit.jsonl").read_text().splitlines()]  # fmt: skip
        [entry] = [e for e in audit if e["event"] == "stand-ins-released"]
        assert "cut before t1" in entry["detail"] and entry["by"].endswith("(--yes)"), entry
        again = rsk("grant", "release", "w2", "-t", "lab", "-p", project, "--yes")
        assert again.rc == Exit.USAGE and "holds no stand-in" in again.err  # nothing left to release
    finally:
        mine = [line.split(" ")[0] for line in lab.jobs_named(f"rsk:{project}:")]
        if mine:
            lab.ssh(f"scancel {' '.join(mine)}")


def test_a_hidden_pending_task_is_never_released_as_never_run(lab: Lab, project: str, shims: Shims) -> None:
    """A job of the account hides a task of a lost answer (renamed, re-pointed, its journal lines erased) while it
    pends: the human's release must be refused while Slurm holds the task's job (its batch script names the
    request's run directory), and that job is charged, not the stand-in given back."""
    shims.add("sbatch", '#!/bin/sh\nexec /usr/bin/sbatch --hold "$@"\n')
    grant(project, "--jobs", "5", "--cpu-hours", "5", "--max-active", "3")
    lost = subprocess.run([sys.executable, "-c", LOST_WORKFLOW, project, "w3"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120, check=False)  # fmt: skip
    assert lost.returncode == 0, lost.stdout + lost.stderr
    mine = [line.split(" ")[0].replace("[", "").replace("]", "") for line in lab.jobs_named(f"rsk:{project}:")]
    try:
        [t1] = [j for j in mine if j.endswith("_1")]
        log = f"{lab.root_sh}/journal/{project}.log"
        erase = f"grep -v ' rid=w3 .* idx=1 ' {log} > {log}.x && cat {log}.x > {log} && rm {log}.x"
        hide = f"scontrol update JobId={t1} JobName=innocent Comment=none StdOut=/tmp/{project}.out && {erase}"
        assert lab.ssh(hide).returncode == 0
        rsk("status", "-t", "lab", "-p", project, "--json")  # adopted from t0 alone: t1 stands in
        r = rsk("grant", "release", "w3", "-t", "lab", "-p", project, "--reason", "cut", "--yes", "--json")
        assert r.rc != 0, r.out  # refused: Slurm holds t1's job
        held = grant_view(project)
        assert held["jobs_spent"] == 2, held  # t1 (found, or its stand-in) still counts
    finally:
        lab.ssh(f"scancel {' '.join(mine)}; rm -f /tmp/{project}.out")
