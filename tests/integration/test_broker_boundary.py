"""The broker as a boundary, on the lab: another OS user (`rskagent`), allowed one project, tries every way
past it that argv, a card id, a planted module or a hostile connection gives it. Each attack is one that
worked before the caller's rights were checked where they are used (docs/security.md, "Broker").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from rsk.errors import Exit
from tests.conftest import ROOT, RSK, Lab, rsk
from tests.integration.helpers import grant
from tests.integration.test_broker import AGENT, AGENT_HOME, agent_rsk, agent_sh, as_agent, broker

__all__ = ["broker"]  # a fixture


@pytest.fixture
def other(project: str) -> str:
    """A second project of the human's, with a grant: one the agent may not use."""
    name = project + "b"
    grant(name, "--jobs", "5", "--max-gpus", "0")
    return name


def refused(r: object, project: str) -> None:
    assert getattr(r, "rc") == Exit.USAGE, (getattr(r, "out"), getattr(r, "err"))  # noqa: B009
    assert f"project {project} is not one this user may use" in getattr(r, "err")  # noqa: B009
    assert "Traceback" not in getattr(r, "err")  # noqa: B009


def test_a_double_dash_in_an_option_value_never_reaches_another_project(
    lab: Lab, project: str, other: str, broker: Path
) -> None:
    """Click takes a `--` after an option that wants a value as that value, and parses on: the project is
    whatever Click says, checked where the command resolves it."""
    grant(project, "--jobs", "5", "--max-gpus", "0")
    r = agent_rsk(broker, "launch", "-t", "lab", "-p", project, "--exclude", "--", "-p", other, "--time", "2",
                  "-r", "dd", "--json", "--", "echo", "x")  # fmt: skip
    refused(r, other)
    r = agent_rsk(broker, "plan", "-t", "lab", "--env", "--", "--project", other, "--", "true")
    refused(r, other)
    assert lab.jobs_named(f"rsk:{other}:") == []

    # a card of the other project (the human's own launch, waiting for the human)
    pending = rsk("launch", "-t", "lab", "-p", other, "-r", "big", "--gpus", "1", "--json", "--", "true")
    assert pending.rc == Exit.PENDING, pending.out + pending.err
    card = json.loads(pending.out)["card_id"]
    for argv in (["-p", project, "-p", "--", "-p", ""], ["-p", "--"], []):
        listed = agent_rsk(broker, "approvals", *argv, "--all", "--json")
        assert card not in listed.out, (argv, listed.out)
        assert "Traceback" not in listed.err
    w = agent_rsk(broker, "withdraw", card, "-p", project, "-p", "--", "-p", "")
    assert w.rc == Exit.USAGE and card in w.err, w.out + w.err
    w = agent_rsk(broker, "withdraw", card, "-p", "--", "-p", other)
    refused(w, other)
    cards = json.loads(rsk("approvals", "-p", other, "--json").out)
    assert [c["status"] for c in cards if c["id"] == card] == ["pending"]

    # `rsk wait CARD` finds the card in a project the agent may use, or nowhere: it never submits another's
    assert rsk("approve", card, "-p", other, "--yes").rc == 0
    w = agent_rsk(broker, "wait", card, "--timeout", "5")
    assert w.rc == Exit.USAGE and "no card" in w.err, w.out + w.err
    refused(agent_rsk(broker, "wait", card, "-p", other, "--timeout", "5"), other)
    assert lab.jobs_named(f"rsk:{other}:big") == []

    # an MCP session pinned by the same trick
    mcp = as_agent(broker, "/usr/bin/python3", "-m", "rsk", "mcp", "-t", "lab", "-p", project, "-p", "--", "-p",
                   other, timeout=60)  # fmt: skip
    refused(mcp, other)


def test_a_hidden_code_script_or_tasks_is_asked_of_the_client(
    lab: Lab, project: str, broker: Path, tmp_path: Path
) -> None:
    """--code, --script and --tasks behind a `--`: the broker asks the agent's client for what Click says
    argv names, and the command takes only what came; a path only the human can read is never opened."""
    grant(project, "--jobs", "5", "--max-gpus", "0")
    secret = Path(f"/tmp/rsk-secret-{uuid.uuid4().hex[:8]}")
    secret.mkdir(mode=0o700)
    try:
        (secret / "secret.txt").write_text("the-humans-secret\n")
        (secret / "run.sh").write_text("#!/bin/sh\ncat secret.txt\n")
        (secret / "t.jsonl").write_text('{"key": "a", "argv": ["cat", "/etc/hostname"]}\n')
        r = agent_rsk(broker, "launch", "-t", "lab", "-p", project, "--exclude", "--", "--code", str(secret),
                      "-r", "code", "--json", "--", "sh", "run.sh")  # fmt: skip
        assert r.rc == Exit.USAGE and "cannot send it" in r.err, r.out + r.err
        for opt, name in (("--script", "run.sh"), ("--tasks", "t.jsonl")):
            r = agent_rsk(broker, "launch", "-t", "lab", "-p", project, "--env", "--", opt, str(secret / name),
                          "-r", opt[2:], "--json")  # fmt: skip
            assert r.rc == Exit.USAGE and f"cannot read {opt}" in r.err, r.out + r.err
        assert lab.jobs_named(f"rsk:{project}:") == []
        # the agent's own files behind the same trick travel, and are what runs
        agent_sh(broker, "rm -rf hid && mkdir hid && printf '#!/bin/sh\\necho hidden-ok\\n' > hid/run.sh")
        r = as_agent(broker, "sh", "-c", f"cd hid && /usr/bin/python3 -m rsk launch -t lab -p {project} "
                     "--exclude -- --code . -r own --json -- sh run.sh")  # fmt: skip
        assert r.rc == 0, r.out + r.err
        job = json.loads(r.out)["job_id"]
        assert agent_rsk(broker, "wait", job, "-t", "lab", "-p", project, "--json").rc == 0
        assert "hidden-ok" in agent_rsk(broker, "logs", job, "-t", "lab", "-p", project).out
    finally:
        subprocess.run(["rm", "-rf", str(secret)], check=False)


def test_a_bad_project_file_is_exit_6_and_a_symlinked_tree_is_read_where_it_points(
    lab: Lab, project: str, other: str, broker: Path
) -> None:
    agent_sh(broker, (
        f"rm -rf bad mine b && mkdir -p bad mine b/deep && printf 'project = [\\n' > bad/.rsk.toml && "
        f"printf 'project = \"{project}\"\\n' > mine/.rsk.toml && printf 'project = \"{other}\"\\n' > b/.rsk.toml"
        " && ln -s ../b/deep mine/ln"
    ))  # fmt: skip
    r = as_agent(broker, "sh", "-c", "cd bad && /usr/bin/python3 -m rsk status -t lab")
    assert r.rc == Exit.STATE and "project file" in r.err and "Traceback" not in r.err, r.out + r.err
    r = as_agent(broker, "sh", "-c", "cd mine && /usr/bin/python3 -m rsk status -t lab --json")
    assert r.rc == 0, r.out + r.err
    # a hand-made request whose working directory goes through the link: the tree it points into decides
    forged = as_agent(broker, "/usr/bin/python3", "-c", (
        "import json, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        "s.sendall(json.dumps({'v': 2, 'op': 'run', 'argv': ['status', '-t', 'lab'], 'cwd': sys.argv[2]}).encode()"
        " + b'\\n')\n"
        "print(s.makefile().read())"
    ), str(broker), str(AGENT_HOME / "mine" / "ln"))  # fmt: skip
    assert f"project {other} is not one this user may use" in forged.out and '{"rc": 2}' in forged.out, forged.out


def _plant(where: Path, marker: Path) -> None:
    """An `rsk/` package and an `rsk.py` that leave a mark when imported."""
    code = f"open({str(marker)!r}, 'a').write('imported\\n')\n"
    (where / "rsk").mkdir(parents=True)
    for name in ("__init__.py", "__main__.py", "notify.py"):
        (where / "rsk" / name).write_text(code)
    (where / "rsk.py").write_text(code)


def test_nothing_is_imported_from_the_working_directory(lab: Lab, project: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """`rsk broker start` and the URL notification hook start Python children of rsk's own: an `rsk/` left
    in the working directory (an agent's tree) never runs as the human."""
    tree = tmp_path / "tree"
    marker = tmp_path / "imported"
    _plant(tree, marker)
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "rsk"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('[notify]\nurl = "http://127.0.0.1:9/hook"\n')
    sock = Path(f"/tmp/rsk-p-{uuid.uuid4().hex[:8]}") / "b.sock"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "RSK_BROKER": str(sock)}

    def here(*args: str, **more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*RSK, *args], cwd=tree, env={**env, **more}, capture_output=True, text=True,
                              timeout=120, check=False)  # fmt: skip

    try:
        started = here("broker", "start", "--idle", "120")
        assert started.returncode == 0, started.stderr
        # a card filed in the broker, and one filed directly, each fire the URL hook
        r = here("launch", "-t", "lab", "-p", project, "-r", "via-broker", "--gpus", "1", "--json", "--", "true")
        assert r.returncode == Exit.PENDING, r.stdout + r.stderr
        r = here("launch", "-t", "lab", "-p", project, "-r", "direct", "--gpus", "1", "--json", "--", "true",
                 RSK_NO_BROKER="1")  # fmt: skip
        assert r.returncode == Exit.PENDING, r.stdout + r.stderr
        time.sleep(2)  # the hooks run detached
        assert not marker.exists(), marker.read_text()
        assert here("broker", "status").returncode == 0
    finally:
        here("broker", "stop")
        subprocess.run(["rm", "-rf", str(sock.parent)], check=False)


DRIP = """
import socket, sys, time
socks = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    socks.append(s)
print("open", flush=True)
end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    for s in socks:
        try:
            s.send(b" ")
        except OSError:
            pass
    time.sleep(1)
"""


def test_a_client_can_neither_stall_nor_stop_the_broker(lab: Lab, project: str, broker: Path) -> None:
    """Connections that drip their request, more of them than the agent is allowed, and a request nested
    200,000 deep: the human's own commands are answered while the drip goes on, and the broker stays."""
    dripper = subprocess.Popen(
        ["runuser", "-u", AGENT, "--", "/usr/bin/python3", "-c", DRIP, str(broker), "24", "40"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert dripper.stdout is not None and dripper.stdout.readline().strip() == "open"
        time.sleep(2)  # every connection is in: the agent's slots are full and more wait beyond them
        mine = rsk("targets", "--json", timeout=30)
        assert mine.rc == 0, mine.err
        assert dripper.poll() is None  # answered while the drip is still open
        info = json.loads(rsk("broker", "status", "--json").out)
        assert info["requests"] >= 1
    finally:
        dripper.kill()
        dripper.wait()
    nested = as_agent(broker, "/usr/bin/python3", "-c", (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        "s.sendall(b'[' * 200000 + b'\\n')\n"
        "print(s.makefile().read())"
    ), str(broker))  # fmt: skip
    assert '{"rc": 2}' in nested.out and "nesting" in nested.out and "Traceback" not in nested.out, nested.out
    huge = as_agent(broker, "/usr/bin/python3", "-c", (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        "try:\n    s.sendall(b'\"' + b'x' * (4 << 20))\nexcept OSError:\n    pass\n"
        "print(s.makefile().read())"
    ), str(broker))  # fmt: skip
    assert '{"rc": 2}' in huge.out and "longer than" in huge.out, huge.out
    after = rsk("targets", "--json", timeout=30)
    assert after.rc == 0 and json.loads(rsk("broker", "status", "--json").out)["pid"] == info["pid"]


def test_the_generated_argv_of_another_user_stays_in_its_project(
    lab: Lab, project: str, other: str, broker: Path
) -> None:
    """A few argv assembled from the CLI's real options with `--` put everywhere (the in-process test walks
    far more): sent by the agent, none reaches the other project or a path the client did not send."""
    from tests.unit.test_broker_generated import examples

    before = sorted(p.name for p in (Path(os.environ["RSK_HOME"]) / "projects").iterdir())
    for argv in examples(seed=22, count=6, project=project, other=other, secret="/root"):
        r = agent_rsk(broker, *argv)
        assert other not in r.out and "Traceback" not in r.err, (argv, r.out, r.err)
    assert lab.jobs_named(f"rsk:{other}:") == []
    after = sorted(p.name for p in (Path(os.environ["RSK_HOME"]) / "projects").iterdir())
    assert after == before or set(after) - set(before) <= {project}
    assert sys.executable  # the agent ran its own python3, standard library only
