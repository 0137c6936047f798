"""F2 of the attack review: a sandbox of the human's own user had the human's broker write the job's file over the
ledger. A fetch never writes into rsk's own state or configuration, whoever asks, directly or through a broker."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

from rsk.errors import Exit
from tests.conftest import Lab, rsk
from tests.integration.helpers import grant, launch, launched


def test_a_fetch_never_writes_rsks_own_state_even_for_the_brokers_own_user(
    lab: Lab, project: str, rsk_env: Path
) -> None:
    """F2. A sandbox of the human's own user that writes only its tree (and has no network) still reaches the
    human's broker, which serves it as its owner: `rsk fetch JOB ledger.json --to $RSK_HOME/projects/P` put the
    job's file (the agent's) over the human's ledger, with every limit of the grant lifted. A destination in
    rsk's state (or configuration) is never written, directly or through a broker."""
    grant(project, "--cpu-hours", "1", "--max-gpus", "0")
    ledger = rsk_env / "projects" / project / "ledger.json"
    forged = json.loads(ledger.read_text())
    for g in forged["grants"]:
        g.update(max_gpus=None, gpu_hours=None, cpu_hours=None, note="lifted by the agent")
    body = json.dumps(forged).replace("'", "'\\''")
    write = f"printf '%s' '{body}' > \"$RSK_RUN_DIR/ledger.json\""
    job = launched(launch(project, "-r", "forge", "--mem", "64M", "--time", "1", command=("sh", "-c", write)))["job_id"]
    w = rsk("wait", str(job), "--target", "lab", "--project", project, "--timeout", "900")
    assert w.rc == 0, w.err
    before = ledger.read_bytes()
    sock = Path(f"/tmp/rsk-atk-{uuid.uuid4().hex[:8]}") / "b.sock"
    try:
        r = rsk("broker", "start", "--socket", str(sock), "--idle", "120")
        assert r.rc == 0, r.err
        for env in ({"RSK_BROKER": str(sock)}, {"RSK_BROKER": "off"}):
            got = rsk("fetch", str(job), "ledger.json", "--to", str(ledger.parent), "--target", "lab",
                      "--project", project, env=env)  # fmt: skip
            assert got.rc == Exit.USAGE and ledger.read_bytes() == before, (env, got.rc, got.out, got.err)
    finally:
        rsk("broker", "stop", "--socket", str(sock))
        subprocess.run(["rm", "-rf", str(sock.parent)], check=False)
