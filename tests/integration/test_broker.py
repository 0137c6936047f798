"""The broker on the lab: an agent that runs as another OS user, with no access to the human's RSK_HOME
or SSH key, gets its launches decided by the human's ledger and nothing more; and the faults a resident
process meets (killed mid-launch, its connection cut, a stale socket).

The agent runs Debian's python3 with only the standard library: enough for rsk's broker client, not
for rsk itself, so everything it does reaches the cluster through the broker or not at all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsk.errors import Exit
from tests.conftest import LAB_DIR, LAB_PORT, ROOT, Lab, Ran, rsk
from tests.integration.helpers import CUT_AFTER_S, grant, launch

AGENT = "rskagent"
AGENT_HOME = Path("/home") / AGENT


@pytest.fixture
def broker(lab: Lab, project: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The human's broker, serving the agent's account for this test's project only."""
    if subprocess.run(["id", AGENT], capture_output=True, check=False).returncode != 0:
        pytest.fail(f"no user {AGENT}: run tests/setup.sh")
    sock = Path(f"/tmp/rsk-b-{uuid.uuid4().hex[:8]}") / "b.sock"
    monkeypatch.setenv("RSK_BROKER", str(sock))
    scratch = broker_tmp(sock)  # this broker's temporary files, apart from other brokers'
    scratch.mkdir(mode=0o700)
    r = rsk("broker", "start", "--allow", f"{AGENT}:{project}", "--idle", "600", env={"TMPDIR": str(scratch)})
    assert r.rc == 0, r.err
    yield sock
    rsk("broker", "stop")
    subprocess.run(["rm", "-rf", str(sock.parent), str(scratch)], check=False)


def broker_tmp(sock: Path) -> Path:
    return Path(f"{sock.parent}-tmp")


def as_agent(sock: Path, *args: str, timeout: float = 120) -> Ran:
    cmd = ["runuser", "-u", AGENT, "--", "env", "-i", "PATH=/usr/bin:/bin", f"HOME={AGENT_HOME}",
           f"RSK_BROKER={sock}", f"PYTHONPATH={ROOT / 'src'}", "CLAUDECODE=1", *args]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=AGENT_HOME, timeout=timeout, check=False)
    return Ran(p.returncode, p.stdout, p.stderr)


def agent_sh(sock: Path, script: str) -> None:
    """Run a shell script as the agent, in its home (to make its files)."""
    r = as_agent(sock, "sh", "-c", script)
    assert r.rc == 0, r.err


def agent_rsk(sock: Path, *args: str) -> Ran:
    return as_agent(sock, "/usr/bin/python3", "-m", "rsk", *args)


def test_an_agent_of_another_user_gets_only_what_the_ledger_allows(
    lab: Lab, project: str, broker: Path, rsk_env: Path
) -> None:
    grant(project, "--max-gpus", "1", "--gpu-hours", "2", "--jobs", "5")
    inside = agent_rsk(broker, "launch", "-t", "lab", "-p", project, "-r", "inside", "--json", "--", "true")
    assert inside.rc == 0, inside.out + inside.err
    body = json.loads(inside.out)
    assert body["allowed_by"]["kind"] == "grant"
    waited = agent_rsk(broker, "wait", body["job_id"], "-t", "lab", "-p", project, "--json")
    assert waited.rc == 0 and json.loads(waited.out)["jobs"][0]["state"] == "succeeded", waited.out
    outside = agent_rsk(broker, "launch", "-t", "lab", "-p", project, "-r", "outside", "--gpus", "2", "--json",
                        "--", "true")  # fmt: skip
    assert outside.rc == Exit.PENDING, outside.out + outside.err
    card = json.loads(outside.out)["card_id"]
    # the card says which account asked: the broker took it from the socket, not from the agent
    cards = json.loads(rsk("approvals", "--project", project, "--json").out)["cards"]
    assert any(c["id"] == card and f"({AGENT}," in c["requester"] for c in cards), cards
    ledger = rsk_env / "projects" / project / "ledger.json"
    before = ledger.read_bytes()

    # every bypass: approve it itself; a hand-made message that claims to be the human; stop the broker
    assert agent_rsk(broker, "approve", card, "--yes", "-p", project).rc != 0
    forged = as_agent(broker, "/usr/bin/python3", "-c", (
        "import json, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        "s.sendall(json.dumps({'v': 4, 'op': 'run', 'project_file': None, "
        "'argv': sys.argv[2:], 'env': {'RSK_REQUESTER': 'the human'}})"
        ".encode() + b'\\n')\n"
        "print(s.makefile().read())"
    ), str(broker), "approve", card, "--yes", "-p", project)  # fmt: skip
    assert forged.rc == 0 and '{"rc": 77}' in forged.out and "human's act" in forged.out, forged.out + forged.err
    stop = as_agent(broker, "/usr/bin/python3", "-c", (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'{\"v\": 4, \"op\": \"stop\"}\\n')\n"
        "print(s.makefile().read())"
    ), str(broker))  # fmt: skip
    assert "only the broker's own user stops it" in stop.out
    # read or write the ledger, read the key, reach the cluster itself
    assert as_agent(broker, "cat", str(ledger)).rc != 0
    assert as_agent(broker, "touch", str(rsk_env / "projects" / project / "mine")).rc != 0
    assert as_agent(broker, "cat", str(LAB_DIR / "id_ed25519")).rc != 0
    ssh = as_agent(broker, "ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
                   "UserKnownHostsFile=/dev/null", "-p", str(LAB_PORT), "rsklab@127.0.0.1", "true")  # fmt: skip
    assert ssh.rc != 0
    # other projects, and what only the broker's own user may do
    other = agent_rsk(broker, "status", "-t", "lab", "-p", project + "x")
    assert other.rc == Exit.USAGE and "not one this user may use" in other.err
    assert agent_rsk(broker, "status", "-t", "lab", "-p", project, "--project", project + "x").rc == Exit.USAGE
    assert agent_rsk(broker, "fetch", body["job_id"], "x", "-t", "lab", "-p", project).rc == Exit.USAGE

    assert ledger.read_bytes() == before  # nothing the agent did changed the human's ledger
    cards = json.loads(rsk("approvals", "--project", project, "--json").out)["cards"]
    assert [c["status"] for c in cards if c["id"] == card] == ["pending"]
    # the human approves (in their own terminal); the agent's wait then launches it
    assert rsk("approve", card, "--project", project, "--yes").rc == 0
    w = agent_rsk(broker, "wait", card, "-p", project, "--json")
    assert w.rc == 0 and json.loads(w.out)["launch"]["job_id"], w.out + w.err


def test_an_agents_script_and_tasks_travel_as_content_and_the_broker_opens_no_path_it_names(
    lab: Lab, project: str, broker: Path, rsk_env: Path
) -> None:
    """The agent's client reads its own --script and --tasks and sends them; the broker, which runs as the
    human, opens no path another user names: a path to the human's key or ledger is refused."""
    grant(project, "--jobs", "5")
    agent_sh(broker, (
        "printf '#!/bin/sh\\n#SBATCH --time=5\\necho from-the-agents-script\\n' > s.sh && "
        "printf '%s\\n' '{\"key\": \"a\", \"argv\": [\"echo\", \"task-a\"]}' "
        "'{\"key\": \"b\", \"argv\": [\"echo\", \"task-b\"]}' > t.jsonl && chmod 600 s.sh t.jsonl"
    ))  # fmt: skip
    ran = agent_rsk(broker, "launch", "-t", "lab", "-p", project, "-r", "script", "--script", "s.sh", "--json")
    assert ran.rc == 0, ran.out + ran.err
    job = json.loads(ran.out)["job_id"]
    assert agent_rsk(broker, "wait", job, "-t", "lab", "-p", project, "--json").rc == 0
    logs = agent_rsk(broker, "logs", job, "-t", "lab", "-p", project)
    assert "from-the-agents-script" in logs.out, logs.out + logs.err
    batch = agent_rsk(broker, "launch", "-t", "lab", "-p", project, "-r", "tasks", "--tasks", "t.jsonl", "--json")
    assert batch.rc == 0 and len(json.loads(batch.out)["tasks"]) == 2, batch.out + batch.err

    ledger = rsk_env / "projects" / project / "ledger.json"
    before = ledger.read_bytes()
    key = (LAB_DIR / "id_ed25519").read_text()
    for opt, path in (("--script", LAB_DIR / "id_ed25519"), ("--tasks", ledger), ("--script", rsk_env)):
        r = agent_rsk(broker, "launch", "-t", "lab", "-p", project, opt, str(path), "--json")
        assert r.rc == Exit.USAGE and f"cannot read {opt}" in r.err, r.out + r.err
        assert "PRIVATE KEY" not in r.out + r.err and key[40:80] not in r.out + r.err
    # a hand-made request that names the key and sends no content for it when asked: the broker does not open it
    forged = as_agent(broker, "/usr/bin/python3", "-c", (
        "import json, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        "s.sendall(json.dumps({'v': 4, 'op': 'run', 'project_file': None, "
        "'argv': sys.argv[2:]}).encode() + b'\\n' + b'{}\\n')\n"
        "print(s.makefile().read())"
    ), str(broker), "plan", "-t", "lab", "-p", project, "--script", str(LAB_DIR / "id_ed25519"))  # fmt: skip
    assert '{"rc": 2}' in forged.out and "cannot read --script" in forged.out, forged.out + forged.err
    assert "PRIVATE KEY" not in forged.out
    assert ledger.read_bytes() == before


def test_a_tasks_file_that_is_not_utf8_says_so_through_the_broker_as_it_does_directly(
    lab: Lab, project: str, broker: Path, tmp_path: Path
) -> None:
    """The agent's client could not send it as text: the broker says why (the byte that is not UTF-8), as a
    direct run does, instead of calling it a file that never came."""
    agent_sh(broker, 'printf \'{"key": "a", "argv": ["echo", "\\377"]}\\n\' > bad.jsonl')
    brokered = agent_rsk(broker, "plan", "-t", "lab", "-p", project, "--tasks", "bad.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes((AGENT_HOME / "bad.jsonl").read_bytes())
    direct = rsk("plan", "-t", "lab", "-p", project, "--tasks", "bad.jsonl", env={"RSK_BROKER": "off"}, cwd=tmp_path)
    assert brokered.rc == direct.rc == Exit.USAGE, brokered.err + direct.err
    assert "is not UTF-8 text (byte 31)" in brokered.err and brokered.err == direct.err, brokered.err + direct.err
    unreadable = agent_rsk(broker, "plan", "-t", "lab", "-p", project, "--tasks", "/root/none.jsonl")
    assert unreadable.rc == Exit.USAGE and "cannot read --tasks /root/none.jsonl: " in unreadable.err, unreadable.err


def test_another_user_can_neither_read_the_ledger_nor_take_its_lock(project: str) -> None:
    """RSK_HOME, each directory rsk makes in it 0700 and each file 0600 from the moment it is made: another OS
    user cannot list the projects, read a ledger, or hold ledger.lock so the human's `rsk grant add` waits. A
    looser RSK_HOME (made by hand, or by an older rsk) is tightened at the next change of a ledger."""
    home = Path(f"/tmp/rsk-home-{uuid.uuid4().hex[:8]}")  # where another user could reach it, were it open
    env = {"RSK_HOME": str(home)}
    try:
        assert rsk("grant", "add", "-p", project, "--jobs", "1", "--yes", env=env).rc == 0
        made = [home, *home.rglob("*")]
        assert {p.relative_to(home).as_posix(): oct(p.stat().st_mode & 0o777) for p in made if p.stat().st_mode
                & 0o077} == {}  # fmt: skip
        lock = home / "projects" / project / "ledger.lock"
        assert lock.exists()
        take = as_agent(Path("/nonexistent"), "/usr/bin/python3", "-c", (
            "import fcntl, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "print('held')"
        ), str(lock))  # fmt: skip
        assert take.rc != 0 and "held" not in take.out, take.out + take.err
        for path in (home / "projects", home / "projects" / project / "ledger.json"):
            assert as_agent(Path("/nonexistent"), "cat", str(path)).rc != 0
        assert as_agent(Path("/nonexistent"), "ls", str(home / "projects")).rc != 0
        for d in (home, home / "projects", home / "projects" / project):
            d.chmod(0o755)
        assert rsk("grant", "add", "-p", project, "--jobs", "1", "--yes", env=env).rc == 0
        assert all((d.stat().st_mode & 0o777) == 0o700 for d in (home, home / "projects", home / "projects" / project))
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)


def test_an_agents_code_travels_as_its_files_and_a_forged_upload_lands_nowhere_else(
    lab: Lab, project: str, broker: Path, rsk_env: Path
) -> None:
    """--code from another user: its client lists and reads the files as that user and sends them; the
    broker unpacks them in a private directory and snapshots that. The digest is the one the same files
    give without a broker; a directory the agent cannot read, or a tar that climbs out, gets nothing."""
    from rsk.request.code import snapshot

    grant(project, "--jobs", "3")
    agent_sh(broker, (
        "rm -rf proj && mkdir -p proj/sub proj/__pycache__ && cd proj && "
        "printf '#!/bin/sh\\necho code-ran-$(cat sub/data.txt)\\n' > run.sh && chmod 755 run.sh && "
        "printf 'forty-two' > sub/data.txt && printf x > __pycache__/skip.pyc && printf y > skip.log"
    ))  # fmt: skip
    ran = as_agent(broker, "sh", "-c", f"cd proj && /usr/bin/python3 -m rsk launch -t lab -p {project} -r code "
                   "--code . --exclude '*.log' --json -- ./run.sh")  # fmt: skip
    assert ran.rc == 0, ran.out + ran.err
    body = json.loads(ran.out)
    assert body["code"] == snapshot(AGENT_HOME / "proj", ["*.log"]).digest  # the files as the agent has them
    assert agent_rsk(broker, "wait", body["job_id"], "-t", "lab", "-p", project, "--json").rc == 0
    assert "code-ran-forty-two" in agent_rsk(broker, "logs", body["job_id"], "-t", "lab", "-p", project).out
    assert broker_tmp(broker).is_dir() and not list(broker_tmp(broker).glob("rsk-code-*"))  # its copy is gone

    # a directory the agent cannot read is not sent, and not opened by the broker either
    r = agent_rsk(broker, "launch", "-t", "lab", "-p", project, "--code", str(rsk_env), "--json", "--", "true")
    assert r.rc == Exit.USAGE and "cannot send it" in r.err, r.out + r.err
    # hand-made uploads: a tar (as clients before wire version 4 sent), and records whose names climb out of the
    # broker's directory: each refused whole, nothing written anywhere
    forged = as_agent(broker, "/usr/bin/python3", "-c", (
        "import io, json, socket, sys, tarfile\n"
        "buf = io.BytesIO(); t = tarfile.open(fileobj=buf, mode='w')\n"
        "for name in ('../../tmp/rsk-escaped', '/tmp/rsk-escaped-abs'):\n"
        "    i = tarfile.TarInfo(name); i.size = 3; t.addfile(i, io.BytesIO(b'bad'))\n"
        "t.close(); data = buf.getvalue()\n"
        "req = {'v': 4, 'op': 'run', 'project_file': None, 'argv': sys.argv[2:]}\n"
        "for code in ({'path': '/x', 'size': len(data)}, {'path': '/x', 'files': [['../../tmp/rsk-escaped', 3, 0]]},\n"
        "             {'path': '/x', 'files': [['/tmp/rsk-escaped-abs', 3, 0]]}):\n"
        "    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        "    body = data if 'size' in code else b'bad'\n"
        "    s.sendall(json.dumps(req).encode() + b'\\n' + json.dumps({'code': code}).encode() + b'\\n' + body)\n"
        "    print(s.makefile().read())"
    ), str(broker), "launch", "-t", "lab", "-p", project, "--code", "/x", "--", "true")  # fmt: skip
    said = forged.out + forged.err
    assert forged.out.count('{"rc": 2}') == 3 and forged.out.count("is not a name rsk takes") == 2, said
    assert "did not come" in forged.out, forged.out
    assert not Path("/tmp/rsk-escaped").exists() and not Path("/tmp/rsk-escaped-abs").exists()
    assert len(lab.jobs_named(f"rsk:{project}:code")) == 1


def test_an_agents_mcp_server_runs_in_the_broker_and_gets_what_its_cli_gets(
    lab: Lab, project: str, broker: Path, rsk_env: Path
) -> None:
    """`rsk mcp` run by another user, with Debian's python3 and no MCP SDK: the session is served by the
    broker, the launches are decided by the human's ledger, and no tool opens a path as the human."""
    import asyncio

    from mcp import Client, StdioServerParameters

    grant(project, "--jobs", "2", "--max-gpus", "0")
    params = StdioServerParameters(
        command="runuser",
        args=["-u", AGENT, "--", "env", "-i", "PATH=/usr/bin:/bin", f"HOME={AGENT_HOME}", f"RSK_BROKER={broker}",
              f"PYTHONPATH={ROOT / 'src'}", "/usr/bin/python3", "-m", "rsk", "mcp", "-t", "lab", "-p", project],
        cwd=AGENT_HOME,
    )  # fmt: skip
    requests = int(json.loads(rsk("broker", "status", "--json").out)["requests"])

    async def go() -> None:
        async with Client(params, read_timeout_seconds=120) as c:
            inside = await c.call_tool("launch", {"command": ["echo", "via-mcp"], "request_id": "mcp-in"})
            assert not inside.is_error and inside.structured_content, inside.content
            assert inside.structured_content["status"] == "submitted"
            job = inside.structured_content["launch"]["job_id"]
            waited = await c.call_tool("wait", {"job": job, "timeout": 45})
            assert not waited.is_error and waited.structured_content["jobs"][0]["state"] == "succeeded"  # type: ignore[index]
            outside = await c.call_tool("launch", {"command": ["true"], "gpus": 1, "request_id": "mcp-out"})
            assert outside.structured_content and outside.structured_content["status"] == "pending"
            for tool, args in (("launch", {"command": ["true"], "code": str(rsk_env)}),
                               ("fetch", {"job": job, "paths": ["x"], "to": str(rsk_env)})):  # fmt: skip
                refused = await c.call_tool(tool, args)
                assert refused.is_error and "opens no local path a caller names" in str(refused.content)
            names = {t.name for t in (await c.list_tools()).tools}
            assert not names & {"approve", "grant", "deny", "deny_rule"}

    asyncio.run(go())
    # one session, one request: the broker served it; the agent's python3 could not have run it itself
    assert int(json.loads(rsk("broker", "status", "--json").out)["requests"]) == requests + 1
    assert as_agent(broker, "/usr/bin/python3", "-c", "import mcp").rc != 0
    cards = json.loads(rsk("approvals", "--project", project, "--json").out)["cards"]
    assert [c["request_id"] for c in cards if c["status"] == "pending"] == ["mcp-out"], cards


def test_a_socket_path_an_agent_could_redirect_is_refused(lab: Lab, tmp_path: Path) -> None:
    plant = Path(f"/tmp/rsk-plant-{uuid.uuid4().hex[:8]}")
    link = Path(f"/tmp/rsk-link-{uuid.uuid4().hex[:8]}")
    try:
        subprocess.run(["runuser", "-u", AGENT, "--", "mkdir", "-m", "0777", str(plant)], check=True)
        subprocess.run(["runuser", "-u", AGENT, "--", "ln", "-s", str(plant), str(link)], check=True)
        for where in (plant, link):
            r = rsk("broker", "start", "--socket", str(where / "b.sock"))
            assert r.rc == Exit.STATE and "not a directory of this user" in r.err, r.out + r.err
            assert not (where / "b.sock").exists()
    finally:
        link.unlink(missing_ok=True)
        subprocess.run(["rm", "-rf", str(plant)], check=False)


@pytest.fixture
def own_broker(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    sock = Path(f"/tmp/rsk-o-{uuid.uuid4().hex[:8]}") / "b.sock"
    monkeypatch.setenv("RSK_BROKER", str(sock))
    assert rsk("broker", "start", "--idle", "600").rc == 0
    yield sock
    rsk("broker", "stop")
    subprocess.run(["rm", "-rf", str(sock.parent)], check=False)


def broker_pid() -> int:
    return int(json.loads(rsk("broker", "status", "--json").out)["pid"])


def test_a_broker_killed_mid_launch_never_submits_twice(lab: Lab, project: str, slow_lock: Path,
                                                        own_broker: Path) -> None:  # fmt: skip
    grant(project, "--jobs", "3")
    pid = broker_pid()
    threading.Timer(CUT_AFTER_S, lambda: os.kill(pid, signal.SIGKILL)).start()
    cut = launch(project, "-r", "once", command=("sleep", "30"))
    assert cut.rc == Exit.CONNECT and "same --request-id" in cut.err, cut.out + cut.err
    slow_lock.unlink()
    again = launch(project, "-r", "once", command=("sleep", "30"))  # the broker is gone: it runs directly
    assert again.rc == 0, again.err
    assert len(lab.jobs_named(f"rsk:{project}:once")) == 1
    rsk("cancel", "--target", "lab", "--project", project, "-r", "once")


@pytest.mark.serial  # cuts every SSH session of the cluster user
def test_a_cut_connection_fails_the_command_in_flight_and_the_next_one_reconnects(
    lab: Lab, project: str, slow_lock: Path, own_broker: Path
) -> None:
    grant(project, "--jobs", "3")
    assert rsk("status", "--target", "lab", "--project", project).rc == 0  # the connection is warm now
    cutter = threading.Timer(CUT_AFTER_S, lambda: subprocess.run(["pkill", "-KILL", "-f", "sshd: rsklab"], check=False))
    cutter.start()
    cut = launch(project, "-r", "flight", command=("sleep", "30"))
    cutter.join()
    assert cut.rc == Exit.CONNECT and "--request-id flight" in cut.err, cut.out + cut.err
    slow_lock.unlink()
    again = launch(project, "-r", "flight", command=("sleep", "30"))
    assert again.rc == 0, again.err
    assert len(lab.jobs_named(f"rsk:{project}:flight")) == 1
    info = json.loads(rsk("broker", "status", "--json").out)
    assert info["connections"] == {"lab": True} and info["pid"] == broker_pid()  # the same broker, reconnected
    rsk("cancel", "--target", "lab", "--project", project, "-r", "flight")
