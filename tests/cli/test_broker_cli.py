"""The broker as a process, without the cluster: same outputs and exit codes in both modes, one broker per
socket, a stale socket, a killed broker, and human acts that never go through it."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Ran, rsk


@pytest.fixture
def sock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # a short path: Unix socket paths are limited to ~108 bytes
    d = Path(f"/tmp/rsk-t-{os.getpid()}-{tmp_path.name[-12:]}")
    path = d / "b.sock"
    monkeypatch.setenv("RSK_BROKER", str(path))
    yield path
    rsk("broker", "stop")
    for f in (path, path.with_suffix(".lock")):
        f.unlink(missing_ok=True)
    d.rmdir()


def info() -> dict[str, object]:
    r = rsk("broker", "status", "--json")
    return dict(json.loads(r.out))


def both(*args: str) -> tuple[Ran, Ran]:
    """The same command through the broker and directly."""
    return rsk(*args), rsk(*args, env={"RSK_NO_BROKER": "1"})


def test_commands_answer_the_same_through_the_broker(sock: Path) -> None:
    assert rsk("broker", "status").rc == 75  # none yet: commands run directly
    r = rsk("broker", "start", "--idle", "60")
    assert r.rc == 0 and "broker running" in r.out, r.err
    assert (sock.parent.stat().st_mode & 0o777) == 0o700 and (sock.stat().st_mode & 0o777) == 0o600
    before = int(str(info()["requests"]))
    for args in (("approvals", "--json"), ("approvals",), ("targets", "--json"), ("logs", "not-a-job"),
                 ("wait",), ("launch", "--bogus-option"), ("lease", "status", "x/y")):  # fmt: skip
        brokered, direct = both(*args)
        assert (brokered.rc, brokered.out, brokered.err) == (direct.rc, direct.out, direct.err), args
    assert int(str(info()["requests"])) == before + 7  # each went through the broker


def test_every_way_to_start_rsk_answers_the_same_in_both_modes(sock: Path) -> None:
    """bin/rsk and the installed shim start Python without site (rsk loads it when a command runs here);
    `python -m rsk` starts it with site. Same outputs and exit codes either way, with a broker or without."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    assert rsk("broker", "start", "--idle", "60").rc == 0
    starts = ([str(ROOT / "bin" / "rsk")], [sys.executable, "-m", "rsk"],
              [sys.executable, "-S", str(ROOT / "src" / "rsk" / "launcher.py")])  # fmt: skip
    for args in (("approvals", "--json"), ("--version",), ("launch", "--bogus-option"), ("targets",)):
        seen = set()
        for start in starts:
            for mode in ({}, {"RSK_NO_BROKER": "1"}):
                env = {**os.environ, "RSK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "src"), **mode}
                p = subprocess.run([*start, *args], capture_output=True, text=True, env=env, check=False)
                seen.add((p.returncode, p.stdout, p.stderr))
        assert len(seen) == 1, (args, seen)
    assert rsk("targets").rc == 0


def test_human_acts_never_go_through_the_broker(sock: Path, tmp_path: Path) -> None:
    assert rsk("broker", "start").rc == 0
    before = int(str(info()["requests"]))
    r = rsk("grant", "add", "--gpu-hours", "1", "--yes", "--json")  # runs in the client, as the human
    assert r.rc == 0, r.err
    assert int(str(info()["requests"])) == before
    # a hand-made message asking the broker for a human act is refused, whatever it says about itself
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(sock))
    s.sendall(json.dumps({"v": 4, "op": "run", "project_file": None, "argv": ["grant", "revoke", "g-1", "--yes"],
                          "env": {"RSK_REQUESTER": "the human"}}).encode() + b"\n")  # fmt: skip
    frames = [json.loads(line) for line in s.makefile("rb")]
    s.close()
    assert frames[-1] == {"rc": 77} and "human's act" in frames[0]["e"]


def test_one_broker_per_socket_and_a_stale_socket_is_cleared(sock: Path) -> None:
    assert rsk("broker", "start").rc == 0
    pid = int(str(info()["pid"]))
    second = rsk("broker", "start", "--foreground")
    assert second.rc == 6 and f"pid {pid}" in second.err
    os.kill(pid, signal.SIGKILL)  # leaves its socket file behind, with no one listening
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    assert sock.exists()
    # a command meanwhile runs directly
    assert rsk("approvals", "--json").rc == 0
    r = rsk("broker", "start")
    assert r.rc == 0, r.err
    assert int(str(info()["pid"])) != pid


def test_the_broker_exits_when_idle(sock: Path) -> None:
    assert rsk("broker", "start", "--idle", "1").rc == 0
    deadline = time.monotonic() + 15
    while sock.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not sock.exists()
    assert rsk("broker", "status").rc == 75


def test_a_broker_that_never_idles_out_starts_and_answers(sock: Path, rsk_env: Path) -> None:
    """`--idle 0` (never): it starts, `rsk broker status` reads it (its answer is JSON: 0, not Infinity), and
    an idle limit that is not a number is refused."""
    r = rsk("broker", "start", "--idle", "0")
    assert r.rc == 0 and "Traceback" not in r.err, r.err
    st = rsk("broker", "status")
    assert st.rc == 0 and "broker pid" in st.out and "Traceback" not in st.err, st.err
    doc = json.loads(rsk("broker", "status", "--json").out)
    assert doc["up"] is True and doc["idle_exit_s"] == 0
    for bad in ("inf", "nan"):
        refused = rsk("broker", "start", "--idle", bad, "--socket", str(sock.parent / "other.sock"))
        assert refused.rc == 2 and "Traceback" not in refused.err and "--idle" in refused.err, refused.err
    # RSK_HOME and what the broker writes there are this user's own
    assert (rsk_env.stat().st_mode & 0o777) == 0o700
    assert ((rsk_env / "broker.log").stat().st_mode & 0o777) == 0o600


def test_a_project_file_nested_too_deep_is_exit_6_directly_and_through_the_broker(sock: Path, tmp_path: Path) -> None:
    """A `.rsk.toml` whose value nests 30,000 arrays deep (well under the 64 KiB a project file may hold) makes
    the TOML reader recurse past Python's limit: the project file's fault (exit 6), never an internal error."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / ".rsk.toml").write_text("x = " + "[" * 30_000 + "]" * 30_000 + "\n")
    assert rsk("broker", "start", "--idle", "60").rc == 0
    for r in (rsk("approvals", cwd=tree), rsk("approvals", cwd=tree, env={"RSK_NO_BROKER": "1"})):
        assert r.rc == 6, (r.rc, r.err)
        assert "project file" in r.err and "nest too deep" in r.err and "Traceback" not in r.err, r.err
        assert "internal error" not in r.err
