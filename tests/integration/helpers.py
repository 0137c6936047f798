"""Helpers for lab tests: grants, launches and waiting for jobs, all through the rsk command."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Lab, Ran, rsk

# Fault injection: each test that asks for it gets a directory of shims of its own, owned by root and not
# writable by the cluster user (the programs refuse a Slurm command the account can write), put first on
# the cluster's PATH through its own copy of the lab target (`path = [...]`). Nothing outside the test's
# directories changes, so other tests (and other sessions on the same lab) see the real commands.

# An sbatch ahead of the real one. With no flag file it is the real sbatch. With FLAGS/kill-before it kills
# the submitting session before sbatch runs (an intent with no job); with FLAGS/kill-after it runs sbatch
# and then kills the session before the outcome is journaled (a job whose outcome the journal never
# heard). Either way the SSH channel dies mid-call. With FLAGS/fill-after (holding a journal's path) it
# runs sbatch, then makes that journal refuse writes, as a full disk would, before the outcome is journaled.
# With FLAGS/fail-after it submits, then says it failed (as a process of the account that answers for rsk's program
# can); with FLAGS/fail-before it fails without submitting. Every submission (not a --test-only) is logged in
# FLAGS/sbatch.log, its arguments on a line.
SHIM_TEXT = """#!/bin/sh
case " $* " in *" --test-only "*) exec /usr/bin/sbatch "$@" ;; esac
if [ -e {flags}/kill-before ]; then rm -f {flags}/kill-before; kill -9 -$(ps -o pgid= $$ | tr -d ' '); fi
printf '%s\\n' "$*" >>{flags}/sbatch.log 2>/dev/null || true
if [ -e {flags}/kill-after ]; then
    rm -f {flags}/kill-after
    /usr/bin/sbatch "$@"
    kill -9 -$(ps -o pgid= $$ | tr -d ' ')
fi
if [ -e {flags}/fail-after ]; then
    rm -f {flags}/fail-after
    /usr/bin/sbatch "$@" >/dev/null
    echo 'sbatch: error: Batch job submission failed: (an answer the job was not given)' >&2
    exit 1
fi
if [ -e {flags}/fail-before ]; then
    rm -f {flags}/fail-before
    echo 'sbatch: error: Batch job submission failed: Invalid partition name specified' >&2
    exit 1
fi
if [ -e {flags}/fill-after ]; then
    f=$(cat {flags}/fill-after)
    rm -f {flags}/fill-after
    /usr/bin/sbatch "$@"
    rc=$?
    chmod a-w "$f"
    exit $rc
fi
exec /usr/bin/sbatch "$@"
"""


@dataclass
class Shims:
    """A test's own shims: `bin` is first on the cluster's PATH for this test's lab target; `flags` holds
    the flag files the shims read (the cluster user removes a flag when it fires)."""

    bin: Path
    flags: Path

    def arm(self, flag: str, text: str = "") -> None:
        (self.flags / flag).write_text(text)
        (self.flags / flag).chmod(0o666)

    def add(self, name: str, text: str) -> Path:
        path = self.bin / name
        path.write_text(text)
        path.chmod(0o755)
        return path


@pytest.fixture
def shims(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Shims]:
    if os.geteuid() != 0:
        pytest.fail("fault injection needs root: its shims must be files the cluster user cannot write")
    made = Shims(Path(tempfile.mkdtemp(prefix="rsk-shim-")), Path(tempfile.mkdtemp(prefix="rsk-fault-")))
    made.bin.chmod(0o755)
    made.flags.chmod(0o777)
    targets = tmp_path / "shim-targets"
    targets.mkdir()
    text = (lab.targets_dir / f"{lab.target}.toml").read_text()
    (targets / f"{lab.target}.toml").write_text(text + f"path = [{json.dumps(str(made.bin))}]\n")
    monkeypatch.setenv("RSK_TARGETS_PATH", str(targets))
    try:
        yield made
    finally:
        shutil.rmtree(made.bin, ignore_errors=True)
        shutil.rmtree(made.flags, ignore_errors=True)


@pytest.fixture
def sbatch_shim(shims: Shims) -> Shims:
    shims.add("sbatch", SHIM_TEXT.format(flags=shims.flags))
    return shims


LOCK_WAIT_S = 8  # the slow lock's wait: a plan (before the lock) takes well under CUT_AFTER_S
CUT_AFTER_S = 3.5


@pytest.fixture
def slow_lock(shims: Shims) -> Path:
    """flock on this test's cluster PATH that waits LOCK_WAIT_S first: a window in which a test cuts the
    connection or kills the broker while a submit waits for its lock (CUT_AFTER_S after the command starts,
    once its plan is done even on a busy machine). Unlink the path it yields to end the window."""
    return shims.add("flock", f'#!/bin/sh\nsleep {LOCK_WAIT_S}\nexec /usr/bin/flock "$@"\n')


def grant_view(project: str) -> dict[str, Any]:
    return dict(json.loads(rsk("grant", "list", "--project", project, "--json").out)["grants"][0])


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
