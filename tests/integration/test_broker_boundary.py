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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def test_a_double_dash_in_an_option_value_never_launches_into_another_project(
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


def _card_of(other: str) -> str:
    """A card of the other project: the human's own launch, waiting for the human."""
    pending = rsk("launch", "-t", "lab", "-p", other, "-r", "big", "--gpus", "1", "--json", "--", "true")
    assert pending.rc == Exit.PENDING, pending.out + pending.err
    return str(json.loads(pending.out)["card_id"])


def test_a_double_dash_lists_and_withdraws_no_card_of_another_project(
    lab: Lab, project: str, other: str, broker: Path
) -> None:
    card = _card_of(other)
    for argv in (["-p", project, "-p", "--", "-p", ""], ["-p", "--"], []):
        listed = agent_rsk(broker, "approvals", *argv, "--all", "--json")
        assert card not in listed.out, (argv, listed.out)
        assert "Traceback" not in listed.err
    w = agent_rsk(broker, "withdraw", card, "-p", project, "-p", "--", "-p", "")
    assert w.rc == Exit.USAGE and "Traceback" not in w.err, w.out + w.err  # no project of its own is this card's
    refused(agent_rsk(broker, "withdraw", card, "-p", "--", "-p", other), other)
    cards = json.loads(rsk("approvals", "-p", other, "--json").out)["cards"]
    assert [c["status"] for c in cards if c["id"] == card] == ["pending"]


def test_wait_for_a_card_of_another_project_never_submits_it(lab: Lab, project: str, other: str, broker: Path) -> None:
    """A card found by its id belongs to its own project, which the caller must be allowed."""
    card = _card_of(other)
    assert rsk("approve", card, "-p", other, "--yes").rc == 0
    w = agent_rsk(broker, "wait", card, "--timeout", "5")
    assert w.rc == Exit.USAGE and "no card" in w.err, w.out + w.err
    refused(agent_rsk(broker, "wait", card, "-p", other, "--timeout", "5"), other)
    assert lab.jobs_named(f"rsk:{other}:big") == []


def test_a_double_dash_never_pins_an_mcp_session_to_another_project(
    lab: Lab, project: str, other: str, broker: Path
) -> None:
    mcp = as_agent(broker, "/usr/bin/python3", "-m", "rsk", "mcp", "-t", "lab", "-p", project, "-p", "--", "-p",
                   other, timeout=60)  # fmt: skip
    refused(mcp, other)


@pytest.fixture
def secret() -> Iterator[Path]:
    """A directory only the human can read, with a secret in it."""
    where = Path(f"/tmp/rsk-secret-{uuid.uuid4().hex[:8]}")
    where.mkdir(mode=0o700)
    (where / "secret.txt").write_text("the-humans-secret\n")
    (where / "run.sh").write_text("#!/bin/sh\ncat /tmp/rsk-secret-*/secret.txt secret.txt\n")
    (where / "t.jsonl").write_text('{"key": "a", "argv": ["echo", "the-humans-tasks"]}\n')
    yield where
    subprocess.run(["rm", "-rf", str(where)], check=False)


@pytest.mark.parametrize(("option", "name", "message"), [
    ("--code", "", "cannot send it"), ("--script", "run.sh", "cannot read --script"),
    ("--tasks", "t.jsonl", "cannot read --tasks"),
])  # fmt: skip
def test_a_path_hidden_behind_a_double_dash_is_never_opened_as_the_human(
    lab: Lab, project: str, broker: Path, secret: Path, option: str, name: str, message: str
) -> None:
    """--code, --script and --tasks behind a `--`: the broker asks the agent's client for what Click says
    argv names, and the command takes only what came; a path only the human can read is never opened."""
    grant(project, "--jobs", "5", "--max-gpus", "0")
    path = str(secret / name) if name else str(secret)
    job = ["--", "sh", "run.sh"] if option == "--code" else []
    r = agent_rsk(broker, "launch", "-t", "lab", "-p", project, "--exclude", "--", option, path, "-r", "hid",
                  "--json", *job)  # fmt: skip
    assert r.rc == Exit.USAGE and message in r.err, r.out + r.err
    assert "the-humans" not in r.out + r.err
    assert lab.jobs_named(f"rsk:{project}:") == []


@pytest.mark.parametrize("option", ["--code", "--script", "--tasks"])
def test_the_agents_own_files_behind_a_double_dash_travel_and_run(
    lab: Lab, project: str, broker: Path, option: str
) -> None:
    """The same spelling with the agent's own files: the client sends what Click says argv names, so the
    job runs those (and not whatever the broker's own directory holds)."""
    grant(project, "--jobs", "5", "--max-gpus", "0")
    agent_sh(broker, "rm -rf hid && mkdir hid && printf '#!/bin/sh\\necho hidden-ok\\n' > hid/run.sh && "
             "printf '%s\\n' '{\"key\": \"a\", \"argv\": [\"echo\", \"hidden-ok\"]}' > hid/t.jsonl")  # fmt: skip
    value, job = {"--code": (".", "-- sh run.sh"), "--script": ("run.sh", ""), "--tasks": ("t.jsonl", "")}[option]
    r = as_agent(broker, "sh", "-c", f"cd hid && /usr/bin/python3 -m rsk launch -t lab -p {project} "
                 f"--exclude -- {option} {value} -r own --json {job}")  # fmt: skip
    assert r.rc == 0, r.out + r.err
    body = json.loads(r.out)
    jobs = [t["job_id"] for t in body["tasks"]] or [body["job_id"]]
    assert agent_rsk(broker, "wait", jobs[0], "-t", "lab", "-p", project, "--json").rc == 0
    assert "hidden-ok" in agent_rsk(broker, "logs", jobs[0], "-t", "lab", "-p", project).out


def forged_status(broker: Path, cwd: Path) -> Any:
    """`rsk status` sent by a hand-made client of the agent's that claims `cwd` as its working directory."""
    return as_agent(broker, "/usr/bin/python3", "-c", (
        "import json, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        "s.sendall(json.dumps({'v': 4, 'op': 'run', 'project_file': None, "
        "'argv': ['status', '-t', 'lab'], 'cwd': sys.argv[2]}).encode()"
        " + b'\\n')\n"
        "print(s.makefile().read())"
    ), str(broker), str(cwd))  # fmt: skip


def test_a_bad_project_file_is_exit_6_for_the_caller(lab: Lab, project: str, broker: Path) -> None:
    agent_sh(broker, "rm -rf bad && mkdir bad && printf 'project = [\\n' > bad/.rsk.toml")
    r = as_agent(broker, "sh", "-c", "cd bad && /usr/bin/python3 -m rsk status -t lab")
    assert r.rc == Exit.STATE and "project file" in r.err and "Traceback" not in r.err, r.out + r.err
    # nested 30,000 deep (under the 64 KiB a project file may hold): the TOML reader's recursion ends in the file's
    # fault, not in an internal error of the broker
    agent_sh(broker, '/usr/bin/python3 -c \'print("x = " + "[" * 30000 + "]" * 30000)\' > bad/.rsk.toml')
    r = as_agent(broker, "sh", "-c", "cd bad && /usr/bin/python3 -m rsk status -t lab")
    assert r.rc == Exit.STATE and "nest too deep" in r.err and "internal error" not in r.err, r.out + r.err


def test_a_symlinked_working_directory_is_read_where_it_points(
    lab: Lab, project: str, other: str, broker: Path
) -> None:
    agent_sh(broker, (
        f"rm -rf mine b && mkdir -p mine b/deep && printf 'project = \"{project}\"\\n' > mine/.rsk.toml && "
        f"printf 'project = \"{other}\"\\n' > b/.rsk.toml && ln -s ../b/deep mine/ln"
    ))  # fmt: skip
    r = as_agent(broker, "sh", "-c", "cd mine && /usr/bin/python3 -m rsk status -t lab --json")
    assert r.rc == 0, r.out + r.err
    # through the link, the client finds the project file of the tree it points into (as the CLI does)
    linked = as_agent(broker, "sh", "-c", "cd mine/ln && /usr/bin/python3 -m rsk status -t lab --json")
    assert linked.rc == Exit.USAGE and f"project {other} is not one this user may use" in linked.err, linked.err
    # a hand-made request that names the tree but sends no project file: the broker never looks there itself
    forged = forged_status(broker, AGENT_HOME / "mine")
    assert "project default is not one this user may use" in forged.out and '{"rc": 2}' in forged.out, forged.out


def test_a_project_file_only_the_human_may_read_tells_the_agent_nothing(lab: Lab, broker: Path) -> None:
    """The broker reads as the human: a project file in a directory only the human may open, named by a
    forged working directory or through the agent's own link to it, is read as if there were none."""
    secret = Path(f"/root/rsk-secret-{uuid.uuid4().hex[:8]}")
    secret.mkdir(mode=0o700)
    name = "hidden" + uuid.uuid4().hex[:6]
    (secret / ".rsk.toml").write_text(f'project = "{name}"\n')
    try:
        agent_sh(broker, f"rm -rf lnk && mkdir lnk && ln -s {secret}/.rsk.toml lnk/.rsk.toml")
        linked = as_agent(broker, "sh", "-c", "cd lnk && /usr/bin/python3 -m rsk status -t lab")
        forged = forged_status(broker, secret)
    finally:
        subprocess.run(["rm", "-rf", str(secret)], check=False)
    for r in (linked, forged):
        assert name not in r.out + r.err and "invalid" not in r.out + r.err, r.out + r.err
        assert "Traceback" not in r.out + r.err


def _plant(where: Path, marker: Path) -> None:
    """An `rsk/` package and an `rsk.py` that leave a mark when imported."""
    code = f"open({str(marker)!r}, 'a').write('imported\\n')\n"
    (where / "rsk").mkdir(parents=True)
    for name in ("__init__.py", "__main__.py", "notify.py"):
        (where / "rsk" / name).write_text(code)
    (where / "rsk.py").write_text(code)


@pytest.fixture
def planted(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A working tree with an `rsk/` package and an `rsk.py` that leave a mark when imported, and the mark."""
    tree, marker = tmp_path / "tree", tmp_path / "imported"
    code = f"open({str(marker)!r}, 'a').write('imported\\n')\n"
    (tree / "rsk").mkdir(parents=True)
    for name in ("__init__.py", "__main__.py", "notify.py"):
        (tree / "rsk" / name).write_text(code)
    (tree / "rsk.py").write_text(code)
    yield tree, marker


def _in(tree: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """rsk as the shim starts it, in `tree`."""
    return subprocess.run([*RSK, *args], cwd=tree, env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **env},
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_broker_start_imports_nothing_from_the_working_directory(lab: Lab, planted: tuple[Path, Path]) -> None:
    """`rsk broker start` starts the broker as a Python child: an `rsk/` left in the working directory (an
    agent's tree) never runs as the human."""
    tree, marker = planted
    sock = Path(f"/tmp/rsk-p-{uuid.uuid4().hex[:8]}") / "b.sock"
    try:
        started = _in(tree, "broker", "start", "--idle", "120", RSK_BROKER=str(sock))
        assert started.returncode == 0, started.stderr
        assert _in(tree, "broker", "status", RSK_BROKER=str(sock)).returncode == 0
        assert not marker.exists()
    finally:
        _in(tree, "broker", "stop", RSK_BROKER=str(sock))
        subprocess.run(["rm", "-rf", str(sock.parent)], check=False)


def test_the_url_hook_imports_nothing_from_the_working_directory(
    lab: Lab, project: str, planted: tuple[Path, Path]
) -> None:
    """A card filed fires the URL hook, a Python child of rsk's own: never the `rsk/` of the working tree."""
    tree, marker = planted
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "rsk"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('[notify]\nurl = "http://127.0.0.1:9/hook"\n')
    r = _in(tree, "launch", "-t", "lab", "-p", project, "-r", "hook", "--gpus", "1", "--json", "--", "true",
            RSK_NO_BROKER="1")  # fmt: skip
    assert r.returncode == Exit.PENDING, r.stdout + r.stderr
    time.sleep(3)  # the hook runs detached
    assert not marker.exists()


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


def test_a_dripping_client_never_stalls_the_owners_commands(lab: Lab, project: str, broker: Path) -> None:
    """Connections that drip their request, three times as many as the agent is allowed: the human's own
    commands are answered while the drip goes on."""
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
    finally:
        dripper.kill()
        dripper.wait()


def test_a_request_nested_deep_or_too_long_is_refused_and_the_broker_stays(
    lab: Lab, project: str, broker: Path
) -> None:
    pid = json.loads(rsk("broker", "status", "--json").out)["pid"]

    def raw(data: str) -> str:
        """What the broker answers the agent's hand-made bytes."""
        for _ in range(20):
            got = as_agent(broker, "/usr/bin/python3", "-c", (
                "import socket, sys\n"
                "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
                f"try:\n    s.sendall({data})\nexcept OSError:\n    pass\n"
                "print(s.makefile().read())"
            ), str(broker))  # fmt: skip
            if got.out.strip() and "busy" not in got.out:
                return got.out
            time.sleep(1)
        raise AssertionError("the broker stayed busy")

    nested = raw("b'[' * 200000 + b'\\n'")
    assert '{"rc": 2}' in nested and "nests deeper" in nested and "Traceback" not in nested, nested
    huge = raw("b'\"' + b'x' * (4 << 20)")
    assert '{"rc": 2}' in huge and "longer than" in huge, huge
    after = rsk("targets", "--json", timeout=30)
    assert after.rc == 0 and json.loads(rsk("broker", "status", "--json").out)["pid"] == pid


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


def test_a_forged_upload_with_a_git_directory_runs_nothing_as_the_human(lab: Lab, project: str, broker: Path) -> None:
    """A hand-made `--code` upload that carries `.git/config` with an fsmonitor command: git would run it
    as the human while listing the files. The broker never runs git on files a client sent."""
    grant(project, "--jobs", "5", "--max-gpus", "0")
    marker = Path(f"/tmp/rsk-fsmonitor-{uuid.uuid4().hex[:8]}")
    forged = as_agent(broker, "/usr/bin/python3", "-c", (
        "import json, socket, sys\n"
        "files = {'.git/HEAD': b'ref: refs/heads/main\\n', 'run.sh': b'echo ran\\n',\n"
        "         '.git/config': ('[core]\\n\\tfsmonitor = \"touch ' + sys.argv[2] + '; false\"\\n').encode()}\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        "argv = ['plan', '-t', 'lab', '-p', sys.argv[3], '--code', '/home/rskagent', '--', 'sh', 'run.sh']\n"
        "s.sendall(json.dumps({'v': 4, 'op': 'run', 'project_file': None, "
        "'argv': argv, 'cwd': '/'}).encode() + b'\\n')\n"
        "f = s.makefile('rb')\n"
        "want = json.loads(f.readline())['want']\n"
        "code = {'path': want['code'], 'files': [[n, len(d), False] for n, d in files.items()]}\n"
        "s.sendall(json.dumps({'code': code}).encode() + b'\\n' + b''.join(files.values()))\n"
        "print(f.read().decode())"
    ), str(broker), str(marker), project)  # fmt: skip
    try:
        assert '{"rc": 0}' in forged.out, forged.out + forged.err
        assert not marker.exists()
    finally:
        marker.unlink(missing_ok=True)


def test_another_user_withdraws_only_its_own_cards_and_its_claim_never_hides_who_filed(
    lab: Lab, project: str, broker: Path
) -> None:
    human = rsk("launch", "-t", "lab", "-p", project, "-r", "mine", "--gpus", "1", "--json", "--", "true")
    assert human.rc == Exit.PENDING, human.err
    theirs = json.loads(human.out)["card_id"]
    w = agent_rsk(broker, "withdraw", theirs, "-p", project)
    assert w.rc == Exit.USAGE and "filed by another user" in w.err, w.out + w.err
    cards = {c["id"]: c for c in json.loads(rsk("approvals", "-p", project, "--json").out)["cards"]}
    assert cards[theirs]["status"] == "pending"  # the human's card still waits for the human
    # the agent claims to be the human's terminal: the card still says which OS user filed it
    own = as_agent(broker, "env", "RSK_REQUESTER=terminal (root, pid 1)", "/usr/bin/python3", "-m", "rsk", "launch",
                   "-t", "lab", "-p", project, "-r", "its", "--gpus", "2", "--json", "--", "true")  # fmt: skip
    assert own.rc == Exit.PENDING, own.out + own.err
    card = json.loads(own.out)["card_id"]
    shown = rsk("approvals", "show", card, "-p", project)
    assert "terminal (root, pid 1)" in shown.out and f"filed by OS user {AGENT}" in shown.out, shown.out
    assert agent_rsk(broker, "withdraw", card, "-p", project).rc == 0  # its own card: it may take it back
