"""Generated argv against the broker's own request handling: commands and options taken from the CLI's
real Click tree, values drawn from a pool that names another project and a secret path, and a `--` put
at every position. Sent as another user allowed one project, none may touch another project's state,
reach the cluster for it, or open a path the client did not send.

The broker here is a real `Broker` with the CLI's runner; only the accept loop (whose peer would be this
very user) and the cluster (a connection that records what it is asked, then fails) are left out.
"""

from __future__ import annotations

import json
import random
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rsk.cli.argv import wanted
from rsk.commands import BROKERED

OTHER_UID = 4242 + 1000  # a uid the broker serves as another user (never this process's own)


Option = tuple[list[str], bool]  # its names, is a flag


def _tree() -> list[tuple[list[str], list[Option]]]:
    """(command path, its options) for every command the broker runs, from the CLI's Click command."""
    from rsk.cli.app import command

    out: list[tuple[list[str], list[Option]]] = []

    def walk(cmd: Any, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in sorted(subs.items()):
                # (mcp is a session that answers only what the client asks: it waits for input, not one answer)
                if not path and (name not in BROKERED or name == "mcp"):
                    continue
                walk(sub, [*path, name])
            return
        options = [p for p in cmd.params if getattr(p, "param_type_name", "") == "option" and "--help" not in p.opts]
        out.append((path, [([*p.opts, *p.secondary_opts], bool(getattr(p, "is_flag", False))) for p in options]))

    walk(command(), [])
    return out


def examples(seed: int, count: int, project: str, other: str, secret: str) -> Iterator[list[str]]:
    """`count` argv of a random command with random options, each with `--` inserted at every position.
    Each starts as a command that would run (-t lab -p PROJECT), then takes options whose values may name
    the other project, the secret path, or `--` itself."""
    rng = random.Random(seed)
    tree = _tree()
    values = [project, other, "--", "", "-p", "--project", f"--project={other}", f"-p{other}", secret,
              f"{secret}/secret.txt", "x", "c-0123456789ab", "--code", "--script", "--tasks", "-t"]  # fmt: skip
    for _ in range(count):
        path, opts = rng.choice(tree)
        names = {n for o in opts for n in o[0]}
        words = [*(["-t", "lab"] if "-t" in names else []), *(["-p", project] if "-p" in names else [])]
        for _ in range(rng.randint(1, 4)):
            if not opts or rng.random() < 0.1:
                words.append(rng.choice(values))
                continue
            option_names, flag = rng.choice(opts)
            name = rng.choice(option_names)  # a value that most options take, or one from the pool
            words += [name] if flag else [name, "1" if rng.random() < 0.4 else rng.choice(values)]
        for at in range(len(words) + 1):
            yield [*path, *words[:at], "--", *words[at:]]


def _unreachable(target: Any) -> Any:
    from rsk.errors import ConnectError

    raise ConnectError("the test's cluster is unreachable")


_opened: list[str] = []
_recording = threading.Event()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _recording.is_set() and event == "open" and isinstance(args[0], str | Path):
        _opened.append(str(args[0]))


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from rsk.ledger.cards import projects  # noqa: F401  (imported before recording starts)

    home = tmp_path / "home"
    monkeypatch.setenv("RSK_HOME", str(home))
    (tmp_path / "config" / "rsk" / "targets").mkdir(parents=True)
    (tmp_path / "config" / "rsk" / "targets" / "lab.toml").write_text('host = "127.0.0.1"\nport = 1\n')
    from rsk.cli.app import main

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for p in ("pa", "pb"):
        main(["grant", "add", "--project", p, "--jobs", "5", "--yes"])
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "secret.txt").write_text("the human's secret")
    cwd = tmp_path / "agent"
    cwd.mkdir()
    from rsk.local import project as paths

    seen: list[str] = []  # every project a command went on with (to the cluster, or into its ledger)
    resolve = paths.resolve_project

    def recorded(option: str | None) -> str:
        seen.append(resolve(option))
        return seen[-1]

    monkeypatch.setattr("rsk.local.project.resolve_project", recorded)
    monkeypatch.setattr("rsk.cluster.transport.connect", _unreachable)
    monkeypatch.setattr("rsk.cluster.remote.connect", _unreachable)
    return {"home": home, "secret": secret, "cwd": cwd, "seen": seen}


def _ask(broker: Any, argv: list[str], cwd: Path) -> tuple[int | None, str]:
    """One request through the broker's handling, as another user whose client sends nothing it is asked."""
    a, b = socket.socketpair()
    done = threading.Thread(target=broker._serve_one, args=(b, OTHER_UID))
    with broker.lock:
        broker.serving[OTHER_UID] = broker.serving.get(OTHER_UID, 0) + 1
    req = {"v": 4, "op": "run", "project_file": None, "argv": argv, "cwd": str(cwd), "env": {}}
    a.sendall(json.dumps(req).encode() + b"\n")
    done.start()
    text, rc = "", None
    with a, a.makefile("rb") as frames:
        for line in frames:
            frame = json.loads(line)
            if "want" in frame:
                a.sendall(b'{"files": {}}\n')  # the client sends none of it
            if "put" in frame:  # a step asked of the client (a look, rsk.local.unsent): it answers, with nothing
                frames.read(int(frame["put"].get("size", 0)))  # (its bytes, if any)
                a.sendall(b'{"ok": null}\n')
            text += str(frame.get("e", "")) + str(frame.get("o", ""))
            if "rc" in frame:
                rc = int(frame["rc"])
                break
        a.shutdown(socket.SHUT_WR)
    done.join(30)
    assert not done.is_alive(), argv
    return rc, text


def test_generated_argv_of_another_user_never_leaves_its_project(world: dict[str, Any]) -> None:
    from rsk.cli.broker_cmd import cli_runner, install_router

    sys.addaudithook(_audit)
    saved = sys.stdout, sys.stderr
    install_router()
    try:
        _generated(cli_runner, world)
    finally:
        sys.stdout, sys.stderr = saved


def _generated(cli_runner: Any, world: dict[str, Any]) -> None:
    from rsk.broker.server import Broker, Config

    broker = Broker(
        Config(socket=Path("/nonexistent/b.sock"), allowed={OTHER_UID: frozenset({"pa"})}), cli_runner, wanted
    )
    home, secret, cwd, seen = world["home"], world["secret"], world["cwd"], world["seen"]
    state_b = {f.name: f.read_bytes() for f in (home / "projects" / "pb").iterdir()}
    ran, codes = 0, dict[int | None, int]()
    for argv in examples(seed=7, count=80, project="pa", other="pb", secret=str(secret)):
        _opened.clear()
        _recording.set()
        try:
            rc, text = _ask(broker, argv, cwd)
        finally:
            _recording.clear()
        if "-v" in sys.argv:
            print(rc, argv, text.strip().splitlines()[:1])
        ran += 1
        codes[rc] = codes.get(rc, 0) + 1
        assert rc is not None, argv
        assert "Traceback" not in text and "the human's secret" not in text, (argv, text)
        bad = [p for p in _opened if p.startswith(str(secret)) or "/projects/pb" in p or
               (p.startswith(str(cwd)) and not p.endswith(".rsk.toml"))]  # fmt: skip
        assert not bad, (argv, bad)
        assert "pb" not in seen, (argv, seen)
    assert ran > 300 and len(codes) > 2 and "pa" in seen, codes  # not one refusal for everything
    assert {f.name: f.read_bytes() for f in (home / "projects" / "pb").iterdir()} == state_b
