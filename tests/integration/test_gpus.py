"""rsk gpus on the lab: what each GPU job was given, as the jobs themselves saw it, is what the
inventory says they hold."""

from __future__ import annotations

import json
import time

from tests.conftest import Lab, rsk
from tests.integration.helpers import grant, launch, launched


def test_the_inventory_names_the_jobs_holding_each_gpu(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "2", "--gpu-hours", "2", "--max-time", "10")
    seen = 'echo "$SLURM_JOB_NODELIST $CUDA_VISIBLE_DEVICES" > "$RSK_RUN_DIR/gpus"; sleep 120'
    jobs = {}
    for rid, n in (("two", "2"), ("one", "1")):
        body = launched(launch(project, "-r", rid, "--partition", "gpu", "--gpus", n, "--time", "5",
                               command=("sh", "-c", seen)))  # fmt: skip
        jobs[rid] = body["job_id"]
    # each job records the GPUs Slurm gave it
    given: dict[str, tuple[str, set[int]]] = {}
    deadline = time.monotonic() + 120
    while len(given) < 2 and time.monotonic() < deadline:
        for rid in jobs:
            r = lab.ssh(f"cat {lab.root_sh}/runs/{project}/{rid}/t0/gpus 2>/dev/null")
            if r.stdout.strip():
                host, devices = r.stdout.split()
                given[rid] = (host, {int(d) for d in devices.split(",")})
        time.sleep(1)
    assert len(given) == 2, "the GPU jobs did not start"
    r = rsk("gpus", "--target", "lab", "--json")
    assert r.rc == 0, r.err
    inv = json.loads(r.out)
    held = {}
    for node in inv["nodes"]:
        for g in node["gpus"]:
            if g["project"] == project:
                held.setdefault(g["request_id"], (node["name"], set()))[1].add(g["index"])
                assert g["job_id"] == jobs[g["request_id"]] and g["since"]
    assert held == given
    assert inv["total"] == sum(n["total"] for n in inv["nodes"]) >= 3
    assert inv["free"] <= inv["total"] - 3
    text = rsk("gpus", "--target", "lab")
    assert f"({project}/two)" in text.out and "GPUs free" in text.out
    assert rsk("cancel", "--target", "lab", "--project", project, "-r", "two").rc == 0
    assert rsk("cancel", "--target", "lab", "--project", project, "-r", "one").rc == 0


def test_a_gpu_is_a_projects_by_its_ledgers_job_ids_never_by_the_name_a_job_gives_itself(
    lab: Lab, project: str
) -> None:
    """A job of the project renames itself as another project's request, and a job outside rsk names itself as
    this project's: each GPU is shown as the ledger that holds its job says, the other job as someone else's."""
    other = project + "o"
    grant(project, "--jobs", "2", "--gpu-hours", "2", "--max-time", "10")
    grant(other, "--jobs", "1")  # a ledger of that project exists here: its name alone must not claim the job
    renamed = f"scontrol update JobId=$SLURM_JOB_ID JobName=rsk:{other}:stolen; touch $RSK_RUN_DIR/renamed; sleep 280"
    mine = launched(launch(project, "-r", "mine", "--gpus", "1", "--time", "5", "--mem", "50M",
                           command=("sh", "-c", renamed)))["job_id"]  # fmt: skip
    fake = lab.ssh(f"sbatch --parsable --gres=gpu:1 -t 5 --mem=50M --chdir=/tmp --output=/dev/null "
                   f"--job-name=rsk:{project}:fake --wrap 'sleep 280'").stdout.strip()  # fmt: skip
    try:
        deadline = time.monotonic() + 300  # (the lab is shared: other tests' jobs may hold its GPUs a while)
        while time.monotonic() < deadline:
            ran = lab.ssh(f"test -f {lab.root_sh}/runs/{project}/mine/t0/renamed && squeue -h -j {fake} -o %T")
            if ran.stdout.strip() == "RUNNING":
                break
            time.sleep(1)
        assert ran.stdout.strip() == "RUNNING", "the two GPU jobs did not start"
        r = rsk("gpus", "--target", "lab", "--json")
        assert r.rc == 0, r.err
        whose = {g["job_id"]: (g["project"], g["request_id"], g["job_name"])
                 for n in json.loads(r.out)["nodes"] for g in n["gpus"] if g["state"] == "held"}  # fmt: skip
        assert whose[mine] == (project, "mine", None)
        assert whose[fake] == (None, None, f"rsk:{project}:fake")
        assert f"someone else's: rsk:{project}:fake" in rsk("gpus", "--target", "lab").out
    finally:
        lab.ssh(f"scancel {fake}")
        rsk("cancel", "--target", "lab", "--project", project, "-r", "mine")
