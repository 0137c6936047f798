"""Through a broker, a command's project is its caller's: the client finds the project file from its own working
directory and sends it; the broker never walks a caller's directory, its own directory never counts, and work
with no project chosen is refused rather than sent to the shared `default` (ADR 0049)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rsk.errors import Exit
from tests.conftest import ROOT, RSK, Lab, Ran


def _env(sock: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "RSK_BROKER": str(sock)}


def _start(sock: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """A broker started by hand, in the foreground, from `cwd` (whose project file must not count)."""
    proc = subprocess.Popen([*RSK, "broker", "start", "--foreground", "--socket", str(sock), "--idle", "300"],
                            cwd=cwd, env=_env(sock), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 30
    while not sock.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the broker did not start"
        time.sleep(0.1)
    return proc


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    place = tmp_path / "elsewhere"
    place.mkdir()
    (place / ".rsk.toml").write_text('project = "elsewhere"\n')
    return place


@pytest.fixture
def broker(lab: Lab, elsewhere: Path) -> Iterator[Path]:
    sock = Path(f"/tmp/rsk-bp-{uuid.uuid4().hex[:8]}") / "b.sock"
    proc = _start(sock, elsewhere)
    yield sock
    subprocess.run([*RSK, "broker", "stop", "--socket", str(sock)], env=_env(sock), capture_output=True, check=False)
    proc.wait(timeout=60)
    subprocess.run(["rm", "-rf", str(sock.parent)], check=False)


def _run(sock: Path, cwd: Path, *args: str) -> Ran:
    p = subprocess.run([*RSK, *args], cwd=cwd, env=_env(sock), capture_output=True, text=True, timeout=300,
                       check=False)  # fmt: skip
    return Ran(p.returncode, p.stdout, p.stderr)


def _requests(sock: Path) -> int:
    from rsk.broker_client import request

    info = request("ping", sock)
    assert info is not None
    return int(str(info["requests"]))


def _forged(sock: Path, cwd: Path, project_file: dict[str, Any] | None, *argv: str) -> Ran:
    """A hand-made request: what a client says, the broker takes (its answer, from the frames)."""
    import socket

    s = socket.socket(socket.AF_UNIX)
    s.connect(str(sock))
    req = {"v": 4, "op": "run", "argv": list(argv), "cwd": str(cwd), "env": {}, "project_file": project_file}
    s.sendall(json.dumps(req).encode() + b"\n")
    with s, s.makefile() as f:
        frames = [json.loads(line) for line in f]
    text = {k: "".join(str(fr[k]) for fr in frames if k in fr) for k in ("o", "e")}
    return Ran(int(frames[-1]["rc"]), text["o"], text["e"])


def test_the_project_is_the_callers_wherever_the_broker_started(
    lab: Lab, project: str, broker: Path, tmp_path: Path
) -> None:
    deep = tmp_path / "tree" / "a" / "b"
    deep.mkdir(parents=True)
    (tmp_path / "tree" / ".rsk.toml").write_text(f'project = "{project}"\n')
    bare = tmp_path / "bare"
    bare.mkdir()
    before = _requests(broker)
    plan = _run(broker, deep, "plan", "-t", "lab", "-r", "p1", "--time", "1", "--json", "--", "true")
    assert plan.rc == 0 and json.loads(plan.out)["project"] == project, plan.out + plan.err
    status = _run(broker, deep, "status", "-t", "lab", "--json")
    assert json.loads(status.out)["project"] == project
    # no project file here or above: refused, not the shared default, and never the broker's own directory's
    for verb in ("plan", "launch"):
        r = _run(broker, bare, verb, "-t", "lab", "-r", "p2", "--time", "1", "--json", "--", "true")
        assert r.rc == Exit.USAGE and json.loads(r.out)["error"] == "no-project", r.out + r.err
    assert json.loads(_run(broker, bare, "status", "-t", "lab", "--json").out)["project"] == "default"
    assert _requests(broker) >= before + 5  # all of them went through the broker
    # the broker takes the project file its client found, never the one at the directory the client names
    said = _forged(broker, deep, None, "plan", "-t", "lab", "-r", "p3", "--time", "1", "--json", "--", "true")
    assert said.rc == Exit.USAGE and json.loads(said.out)["error"] == "no-project", said
    found = {"path": str(bare / ".rsk.toml"), "text": f'project = "{project}"\n', "error": ""}
    said = _forged(broker, bare, found, "status", "-t", "lab", "--json")
    assert said.rc == 0 and json.loads(said.out)["project"] == project, said
    unread = {"path": str(deep / ".rsk.toml"), "text": None, "error": "Permission denied"}
    said = _forged(broker, deep, unread, "plan", "-t", "lab", "--time", "1", "--json", "--", "true")
    assert said.rc == Exit.STATE and "cannot be read: Permission denied" in said.err, said


def test_commands_around_a_broker_restart_keep_their_project(
    lab: Lab, project: str, broker: Path, elsewhere: Path, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / ".rsk.toml").write_text(f'project = "{project}"\n')
    answers: list[Ran] = []

    def one(i: int) -> None:
        answers.append(_run(broker, tree, "plan", "-t", "lab", "-r", f"r{i}", "--time", "1", "--json", "--", "true"))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads[:4]:
        t.start()
    subprocess.run([*RSK, "broker", "stop", "--socket", str(broker)], env=_env(broker), capture_output=True,
                   check=False, timeout=120)  # fmt: skip
    for t in threads[4:6]:
        t.start()  # no broker: they run in their own process
    proc = _start(broker, elsewhere)
    for t in threads[6:]:
        t.start()
    for t in threads:
        t.join(timeout=300)
    try:
        assert len(answers) == 8
        for r in answers:
            assert r.rc == 0 and json.loads(r.out)["project"] == project, r.out + r.err
    finally:
        subprocess.run([*RSK, "broker", "stop", "--socket", str(broker)], env=_env(broker), capture_output=True,
                       check=False, timeout=120)  # fmt: skip
        proc.wait(timeout=60)


def test_an_mcp_call_through_the_broker_answers_within_its_bound_when_the_work_hangs(
    lab: Lab, project: str, broker: Path, tmp_path: Path, rsk_env: Path
) -> None:
    """A launch that cannot get on (the project's ledger held elsewhere) answers a retryable call-timeout
    within the server's bound instead of hanging; once free, the same request_id runs it exactly once."""
    import asyncio
    import sys

    from filelock import FileLock
    from mcp import Client, StdioServerParameters

    from tests.integration.helpers import grant

    grant(project, "--jobs", "3", "--max-time", "10")
    env = {k: v for k, v in _env(broker).items() if k.startswith(("RSK_", "XDG_", "NO_COLOR", "PYTHON"))}
    params = StdioServerParameters(command=sys.executable, args=["-m", "rsk", "mcp", "-t", "lab", "-p", project,
                                   "--max-wait", "2"], env=env, cwd=tmp_path)  # fmt: skip
    held = FileLock(str(rsk_env / "projects" / project / "ledger.lock"))
    args = {"command": ["true"], "request_id": "bound-1", "time": "2"}

    async def go() -> None:
        async with Client(params, read_timeout_seconds=120) as c:
            with held:
                started = time.monotonic()
                late = await c.call_tool("launch", args)
                took = time.monotonic() - started
            assert late.is_error and late.structured_content is not None, late.content
            doc = late.structured_content
            assert doc["error"] == "call-timeout" and doc["retryable"] and doc["exit_code"] == Exit.CONNECT, doc
            assert 2 + 8 <= took < 40, took  # the bound (max-wait 2 + 8), far below the ledger lock's 60 s
            again = await c.call_tool("launch", args)
            assert not again.is_error and again.structured_content is not None, again.content
            assert again.structured_content["status"] in ("submitted", "replayed"), again.structured_content

    (rsk_env / "projects" / project).mkdir(parents=True, exist_ok=True)
    asyncio.run(go())
    before = _requests(broker)
    assert before >= 1  # the session ran in the broker
    st = json.loads(_run(broker, tmp_path, "status", "-t", "lab", "-p", project, "-r", "bound-1", "--json").out)
    assert len(st["jobs"]) == 1, st  # one job for the request id, though launched twice


def test_an_mcp_session_whose_broker_dies_mid_call_ends_at_once_with_an_error(
    lab: Lab, project: str, broker: Path, tmp_path: Path, rsk_env: Path
) -> None:
    """The broker killed while a tool call waits in it: the agent's server process says so and exits 75 at
    once, so its MCP client sees the server end instead of waiting for an answer that cannot come."""
    import signal
    import sys

    from filelock import FileLock

    from rsk.broker_client import request

    info = request("ping", broker)
    assert info is not None
    (rsk_env / "projects" / project).mkdir(parents=True, exist_ok=True)
    held = FileLock(str(rsk_env / "projects" / project / "ledger.lock"))
    server = subprocess.Popen([sys.executable, "-m", "rsk", "mcp", "-t", "lab", "-p", project], cwd=tmp_path,
                              env=_env(broker), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert server.stdin is not None and server.stdout is not None

    def say(message: dict[str, Any]) -> None:
        assert server.stdin is not None
        server.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        server.stdin.flush()

    try:
        say({"id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                                         "clientInfo": {"name": "t", "version": "1"}}})  # fmt: skip
        assert json.loads(server.stdout.readline())["id"] == 1
        say({"method": "notifications/initialized"})
        with held:
            call = {"name": "launch", "arguments": {"command": ["true"], "request_id": "g1"}}
            say({"id": 2, "method": "tools/call", "params": call})
            time.sleep(3)  # the launch waits for the ledger in the broker
            os.kill(int(str(info["pid"])), signal.SIGKILL)
            started = time.monotonic()
            rc = server.wait(timeout=30)  # not the 60 s the ledger's lock would take, nor forever
            took = time.monotonic() - started
        assert rc == Exit.CONNECT and took < 10, (rc, took)
        assert "the broker went away during the command" in server.stderr.read()  # type: ignore[union-attr]
    finally:
        if server.poll() is None:
            server.kill()
