"""Thirty-two agents launching five jobs each, all at once, through one broker: every launch is accepted (or
told to retry, exit 75, and accepted when it retries with the same request id), and no request runs twice.

Correctness only: how long it takes is `bench/run.sh agents`.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rsk.errors import Exit
from tests.conftest import ROOT, RSK, Lab, Ran, rsk
from tests.integration.helpers import grant, jfield

AGENTS, EACH = 32, 5


@pytest.fixture
def broker(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """One broker of the test's own, for the human's user (as the automatic one serves)."""
    sock = Path(f"/tmp/rsk-g-{uuid.uuid4().hex[:8]}") / "b.sock"
    monkeypatch.setenv("RSK_BROKER", str(sock))
    r = rsk("broker", "start", "--idle", "300")
    assert r.rc == 0, r.err
    yield sock
    rsk("broker", "stop")
    subprocess.run(["rm", "-rf", str(sock.parent)], check=False)


@pytest.mark.lab
def test_thirty_two_agents_at_once_get_each_launch_accepted_once(lab: Lab, project: str, broker: Path) -> None:
    grant(project, "--jobs", str(AGENTS * EACH * 2))
    lab.set_policy("max_active_jobs = 1000")  # the cluster's default cap (100) is not what this tests
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "RSK_BROKER": str(broker)}
    start = threading.Barrier(AGENTS)
    retried = Counter[str]()

    def agent(k: int) -> list[tuple[str, Ran]]:
        """One agent: five launches one after another, each retried with its own request id while told to."""
        start.wait()
        done = []
        for i in range(EACH):
            rid = f"g{k}-{i}"
            while True:
                p = subprocess.run([*RSK, "launch", "-t", "lab", "-p", project, "-r", rid, "--mem", "64M", "--time",
                                    "1", "--json", "--", "true"], capture_output=True, text=True, env=env,
                                   timeout=300, check=False)  # fmt: skip
                if p.returncode != Exit.CONNECT or retried[rid] >= 20:
                    break
                retried[rid] += 1
            done.append((rid, Ran(p.returncode, p.stdout, p.stderr)))
        return done

    try:
        with ThreadPoolExecutor(AGENTS) as pool:
            launches = [x for batch in pool.map(agent, range(AGENTS)) for x in batch]
        failed = [(rid, r.rc, r.out + r.err) for rid, r in launches if r.rc != 0]
        assert not failed, failed[:3]
        jobs = {rid: json.loads(r.out)["job_id"] for rid, r in launches}
        assert len(jobs) == AGENTS * EACH and len(set(jobs.values())) == AGENTS * EACH
        # none twice: Slurm knows one job per request, and the journal accepted each request once, with that job
        named = Counter(line.split(" ")[1] for line in lab.jobs_named(f"rsk:{project}:"))
        assert named == Counter({f"rsk:{project}:{rid}": 1 for rid in jobs}), named.most_common(3)
        accepted = [line for line in lab.journal(project) if jfield(line, "ev") == "accepted"]
        assert Counter(jfield(line, "rid") for line in accepted) == Counter(dict.fromkeys(jobs, 1))
        assert {jfield(line, "rid"): jfield(line, "job") for line in accepted} == jobs
    finally:  # this test's jobs only, by their names
        mine = f"awk -v p='rsk:{project}:' 'index($2, p) == 1 {{ print $1 }}'"
        lab.ssh(f"squeue -h -o '%i %j' | {mine} | xargs -r scancel")
