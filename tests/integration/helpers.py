"""Helpers for lab tests: grants, launches and waiting for jobs, all through the rsk command."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Ran, rsk

SHIM = "/usr/local/bin/sbatch"
FAULT_DIR = Path("/tmp/rsk-fault")

# An sbatch on the cluster's PATH ahead of the real one. With no flag file it is the real sbatch.
# With FAULT_DIR/kill-before it kills the submitting session before sbatch runs (an intent with no
# job); with FAULT_DIR/kill-after it runs sbatch and then kills the session before the outcome is
# journaled (a job whose outcome the journal never heard). Either way the SSH channel dies mid-call.
# With FAULT_DIR/fill-after (holding a journal's path) it runs sbatch, then makes that journal refuse
# writes, as a full disk would, before the outcome is journaled.
SHIM_TEXT = f"""#!/bin/sh
case " $* " in *" --test-only "*) exec /usr/bin/sbatch "$@" ;; esac
if [ -e {FAULT_DIR}/kill-before ]; then rm -f {FAULT_DIR}/kill-before; kill -9 -$(ps -o pgid= $$ | tr -d ' '); fi
if [ -e {FAULT_DIR}/kill-after ]; then
    rm -f {FAULT_DIR}/kill-after
    /usr/bin/sbatch "$@"
    kill -9 -$(ps -o pgid= $$ | tr -d ' ')
fi
if [ -e {FAULT_DIR}/fill-after ]; then
    f=$(cat {FAULT_DIR}/fill-after)
    rm -f {FAULT_DIR}/fill-after
    /usr/bin/sbatch "$@"
    rc=$?
    chmod a-w "$f"
    exit $rc
fi
exec /usr/bin/sbatch "$@"
"""


@pytest.fixture
def sbatch_shim() -> Iterator[Path]:
    FAULT_DIR.mkdir(exist_ok=True)
    FAULT_DIR.chmod(0o777)
    Path(SHIM).write_text(SHIM_TEXT)
    Path(SHIM).chmod(0o755)
    try:
        yield FAULT_DIR
    finally:
        Path(SHIM).unlink(missing_ok=True)
        for f in FAULT_DIR.iterdir():
            f.unlink()


FLOCK_SHIM = Path("/usr/local/bin/flock")


@pytest.fixture
def slow_lock() -> Iterator[Path]:
    """flock on the cluster's PATH that waits 3 s first: a window in which a test cuts the connection or
    kills the broker while a submit waits for its lock. Unlink the path it yields to end the window."""
    FLOCK_SHIM.write_text('#!/bin/sh\nsleep 3\nexec /usr/bin/flock "$@"\n')
    FLOCK_SHIM.chmod(0o755)
    try:
        yield FLOCK_SHIM
    finally:
        FLOCK_SHIM.unlink(missing_ok=True)


def arm(flag: str, text: str = "") -> None:
    (FAULT_DIR / flag).write_text(text)
    (FAULT_DIR / flag).chmod(0o666)


def grant_view(project: str) -> dict[str, Any]:
    return dict(json.loads(rsk("grant", "list", "--project", project, "--json").out)[0])


def grant(project: str, *options: str) -> dict[str, Any]:
    r = rsk("grant", "add", "--project", project, "--yes", "--json", *options)
    assert r.rc == 0, r.err
    return dict(json.loads(r.out))


def launch(project: str, *options: str, command: tuple[str, ...] = ("true",), env: dict[str, str] | None = None) -> Ran:
    return rsk("launch", "--target", "lab", "--project", project, "--json", *options, "--", *command, env=env)


def launched(r: Ran) -> dict[str, Any]:
    assert r.rc == 0, f"rc={r.rc}\n{r.out}\n{r.err}"
    return dict(json.loads(r.out))


def finished_output(project: str, job_id: str, stream: str = "stdout") -> dict[str, Any]:
    r = rsk("logs", job_id, "--target", "lab", "--project", project, "--stream", stream, "--follow",
            "--timeout", "120", "--json")  # fmt: skip
    assert r.rc == 0, r.err
    tail = dict(json.loads(r.out))
    assert tail["ended"], f"job {job_id} did not end in time: {tail}"
    return tail


def jfield(line: str, key: str) -> str | None:
    """The value of key=value in a journal line."""
    for word in line.split(" "):
        k, sep, v = word.partition("=")
        if sep and k == key:
            return v
    return None


def in_tree(tree: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Ran:
    """rsk run from a working tree (its project file is found by walking up from the working directory)."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    proc = subprocess.run(
        [sys.executable, "-m", "rsk", *args], capture_output=True, text=True, cwd=tree, timeout=timeout,
        check=False, env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})},
    )  # fmt: skip
    return Ran(proc.returncode, proc.stdout, proc.stderr)
