"""Slurm's active states are one set on both sides: rsk.wire.states, and what the shipped programs decide in sh
in awk, their one reader there (pure: dash and awk on this machine run the program's own definitions)."""

from __future__ import annotations

import shlex
import subprocess

from rsk.wire import bundle
from rsk.wire.states import ACTIVE, Facts, job_state

# every job state code of squeue(1) (JOB STATE CODES), and what is not one
SLURM_STATES = [
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "CONFIGURING",
    "COMPLETING",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PENDING",
    "PREEMPTED",
    "RUNNING",
    "RESV_DEL_HOLD",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "REQUEUED",
    "RESIZING",
    "REVOKED",
    "SIGNALING",
    "SPECIAL_EXIT",
    "STAGE_OUT",
    "STOPPED",
    "SUSPENDED",
    "TIMEOUT",
]
NOT_STATES = ["", "running", "PENDINGX", "PENDING|RUNNING"]

_PROBE = """
for s in "$@"; do
    printf '%s\\t%s\\n' "$s" "$(printf '%s\\n' "$s" | awk "$RSK_AWK"'{ print active($0) ? 1 : 0 }')"
done
"""


def _decided_on_the_cluster(states: list[str]) -> dict[str, bool]:
    program = bundle.program("status").rsplit('main "$@"', 1)[0]  # every definition, no main
    out = subprocess.run(
        ["dash", "-c", program + _PROBE, "probe", *states], capture_output=True, text=True, check=True
    ).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    return {s: k == "1" for s, k in rows}


def test_the_cluster_and_python_count_the_same_states_as_active() -> None:
    decided = _decided_on_the_cluster(SLURM_STATES + NOT_STATES)
    for state in SLURM_STATES + NOT_STATES:
        python = state in ACTIVE
        assert decided[state] == python, state
        # and rsk status calls exactly these pending or running
        assert (job_state(Facts(squeue=state, rc=0)) in ("pending", "running")) == python, state


def test_the_active_set_is_of_slurm_states_and_part_of_the_scripts_digest() -> None:
    assert set(SLURM_STATES) > ACTIVE
    assert {"REQUEUED", "REQUEUE_HOLD", "STOPPED", "PENDING", "RUNNING"} <= ACTIVE
    assert "function active(s) { return s ~ /^(" + "|".join(sorted(ACTIVE)) + ")$/ }" in bundle.awk_library()
    assert f"RSK_AWK={shlex.quote(bundle.awk_library())}" in bundle.program("submit")


def test_no_remote_file_lists_active_states_of_its_own() -> None:
    for name, text in bundle.files().items():
        for line in text.splitlines():
            named = [s for s in ACTIVE if s in line.replace("|", " ").replace(",", " ").split()]
            assert len(named) < 2, f"{name}: {line.strip()}"
            assert "PD,R" not in line, f"{name}: {line.strip()}"
