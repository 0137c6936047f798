"""A stopped broker runs no new work: an MCP session it serves takes no tool call once `rsk broker stop` ran.

`rsk broker stop` (or SIGTERM) closes the socket and lets the commands in flight end, up to DRAIN_LIMIT, because each
is bounded (a wait, a follow, a launch). An `rsk mcp` session through the broker is no such command but a stream of
new ones: a human who stopped the broker to cut an agent off (and started it again without `--allow` for that user)
left the agent's open session in the old process, answering every tool call, launches included, for another 15
minutes. Now a stopping broker reads no more of a session (`Broker.end_sessions`). Here: the broker's own user, a
local tool (`targets`), so no cluster is needed."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import BinaryIO

import pytest

from rsk.broker.server import Broker, Config

LAB = 'schema_version = 1\nhost = "127.0.0.1"\nport = 2222\nuser = "u"\nremote_root = "~/.rsk-x"\n'


def _call(f: socket.socket, lines: BinaryIO, msg: dict[str, object]) -> dict[str, object] | None:
    """Send one JSON-RPC message; the answer with its id (None: the stream ended or no answer in 20 s)."""
    try:
        f.sendall((json.dumps(msg) + "\n").encode())
    except OSError:  # the broker ended the session and closed its connection
        return None
    if "id" not in msg:
        return None
    for raw in lines:
        frame = json.loads(raw)
        for line in str(frame.get("o", "")).splitlines():
            if line.strip():
                got = json.loads(line)
                if got.get("id") == msg["id"]:
                    return dict(got)
        if "rc" in frame:
            return None
    return None


def test_a_stopped_brokers_mcp_session_takes_no_new_tool_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rsk.cli.argv import wanted
    from rsk.cli.broker_cmd import cli_runner

    (tmp_path / "targets").mkdir()
    (tmp_path / "targets" / "lab.toml").write_text(LAB)
    monkeypatch.setenv("RSK_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RSK_TARGETS_PATH", str(tmp_path / "targets"))
    sock = Path(f"/tmp/rsk-u-{os.getpid()}-a3mcp") / "b.sock"
    broker = Broker(Config(socket=sock), cli_runner, wanted, sources=[tmp_path])
    broker.bind()
    serving = threading.Thread(target=broker.serve, daemon=True)
    serving.start()
    a = socket.socket(socket.AF_UNIX)
    lines = None
    try:
        a.settimeout(20)
        a.connect(str(sock))
        request = {"v": 4, "op": "run", "argv": ["mcp", "-p", "p1", "-t", "lab"], "cwd": str(tmp_path), "env": {},
                   "project_file": None}  # fmt: skip
        a.sendall((json.dumps(request) + "\n").encode())
        lines = a.makefile("rb")
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        assert _call(a, lines, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}) is not None
        _call(a, lines, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        tool = {"name": "targets", "arguments": {}}
        before = _call(a, lines, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": tool})
        assert before is not None and "result" in before, before  # the session works
        broker.stopping.set()  # `rsk broker stop`
        deadline = time.monotonic() + 10
        while sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not sock.exists()
        after = _call(a, lines, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": tool})
        result = after.get("result") if after is not None else None
        worked = isinstance(result, dict) and not result.get("isError")
        assert not worked, f"the stopped broker answered a new tool call: {json.dumps(after)[:300]}"
    finally:
        if lines is not None:
            lines.close()
        a.close()
        broker.stopping.set()
        serving.join(20)
        broker.close()
        sock.with_suffix(".lock").unlink(missing_ok=True)
        sock.parent.rmdir()
