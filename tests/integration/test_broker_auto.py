"""Warm by default, on the lab: the first agent command that finds no broker starts this environment's
automatic broker in the background and runs itself; the next ones go through it; RSK_BROKER=off starts
none; two commands at once start one; it exits when idle (RSK_BROKER_IDLE, short here).

Each test has a private runtime directory (XDG_RUNTIME_DIR) and RSK_HOME, and stops every broker it
started, by pid, before it ends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsk.broker_client import request
from tests.conftest import ROOT, RSK, Lab, Ran, rsk


def _brokers_in(run_dir: Path) -> list[int]:
    """The pids of the brokers whose socket is in this directory (from their command lines)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"broker" in argv and any(a.startswith(str(run_dir).encode()) for a in argv):
            pids.append(int(entry.name))
    return pids


@pytest.fixture
def run_dir(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private XDG_RUNTIME_DIR (short: a socket's path is limited), the automatic mode on for rsk()."""
    d = Path(f"/tmp/rsk-a-{uuid.uuid4().hex[:8]}")
    d.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(d))
    monkeypatch.delenv("RSK_BROKER")
    monkeypatch.setenv("RSK_BROKER_IDLE", "300")
    yield d
    for pid in _brokers_in(d):  # only the brokers this test started: their sockets are in its directory
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while _brokers_in(d) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _brokers_in(d), "a broker outlived its test"
    subprocess.run(["rm", "-rf", str(d)], check=False)


def _auto_socket(run_dir: Path) -> Path:
    socks = list((run_dir / "rsk").glob("auto-*.sock"))
    return socks[0] if len(socks) == 1 else run_dir / "rsk" / "none.sock"


def _up(run_dir: Path, within: float = 20) -> dict[str, object]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        info = request("ping", _auto_socket(run_dir), timeout=1.0)
        if info is not None and "pid" in info:
            return info
        time.sleep(0.1)
    raise AssertionError(f"no automatic broker answered in {run_dir} within {within} s")


def _status(project: str, **env: str) -> Ran:
    return rsk("status", "-t", "lab", "-p", project, "--json", env=env)


def test_first_command_starts_a_broker_and_the_next_uses_it(run_dir: Path, project: str) -> None:
    first = _status(project)
    assert first.rc == 0, first.err
    info = _up(run_dir)
    assert oct((run_dir / "rsk").stat().st_mode & 0o777) == "0o700"
    assert oct(_auto_socket(run_dir).stat().st_mode & 0o777) == "0o600"
    second = _status(project)
    assert second.rc == 0, second.err
    assert json.loads(second.out)["jobs"] == json.loads(first.out)["jobs"]
    after = request("ping", _auto_socket(run_dir))
    assert after is not None and after["pid"] == info["pid"]
    assert int(str(after["requests"])) > int(str(info["requests"]))  # the second command went through it
    assert _brokers_in(run_dir) == [info["pid"]]
    doctor = rsk("doctor", "lab", "--json")
    checks = {c["name"]: c["message"] for c in json.loads(doctor.out)["checks"]}
    assert checks["broker"] == f"this command ran in a broker (pid {info['pid']})"


def test_off_starts_none(run_dir: Path, project: str) -> None:
    r = _status(project, RSK_BROKER="off")
    assert r.rc == 0, r.err
    time.sleep(1)  # a broker started in the background would have its socket by now
    assert not (run_dir / "rsk").exists() or not list((run_dir / "rsk").glob("auto-*.sock"))
    assert _brokers_in(run_dir) == []
    doctor = rsk("doctor", "lab", "--json", env={"RSK_BROKER": "off"})
    checks = {c["name"]: c["message"] for c in json.loads(doctor.out)["checks"]}
    assert checks["broker"].startswith("off (RSK_BROKER=off)")


def test_an_explicit_socket_starts_none(run_dir: Path, project: str) -> None:
    r = _status(project, RSK_BROKER=str(run_dir / "nobody.sock"))
    assert r.rc == 0, r.err
    time.sleep(1)
    assert _brokers_in(run_dir) == []


def test_two_first_commands_at_once_start_one(run_dir: Path, project: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    procs = [subprocess.Popen([*RSK, "status", "-t", "lab", "-p", project, "--json"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(4)]  # fmt: skip
    assert all(p.wait(timeout=120) == 0 for p in procs)
    info = _up(run_dir)
    time.sleep(1)  # a second broker, had one been started, would be running or have failed by now
    assert _brokers_in(run_dir) == [info["pid"]]
    log = next((run_dir / "rsk").glob("auto-*.log")).read_text()
    assert log.count("listening on") == 1, log


def test_it_exits_when_idle(run_dir: Path, project: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSK_BROKER_IDLE", "1")
    assert _status(project).rc == 0
    info = _up(run_dir)
    assert info["idle_exit_s"] == 1.0
    deadline = time.monotonic() + 15
    while _brokers_in(run_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _brokers_in(run_dir) == []
    assert not _auto_socket(run_dir).exists()
    again = _status(project)  # the next command starts a new one
    assert again.rc == 0, again.err
    assert _up(run_dir)["pid"] != info["pid"]


def test_a_bad_idle_time_is_a_typed_error(run_dir: Path, project: str) -> None:
    r = _status(project, RSK_BROKER_IDLE="soon")
    assert r.rc == 78
    assert "RSK_BROKER_IDLE='soon'" in r.err and "hint:" in r.err
    assert _brokers_in(run_dir) == []
