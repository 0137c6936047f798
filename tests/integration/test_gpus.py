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
