"""The broker's own parts: who may ask for what before anything runs, the rights a command checks where it
uses a project or a path, the socket directory's checks, and what a client cannot do to the broker."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from rsk.broker.server import Config, Request, parse_allow, prepare_directory, refusal, rights_of
from rsk.errors import RskError, StateError
from rsk.local.caller import Caller, Rights

ME = os.getuid()
OTHER = ME + 4242
OWNER = Rights(uid=ME, user="me")


def req(*argv: str, op: str = "run", **kw: object) -> Request:
    return Request.model_validate({"v": 4, "op": op, "argv": list(argv), **kw})


def other(projects: frozenset[str] | None = frozenset({"p1"})) -> Rights:
    return Rights(uid=OTHER, user="agent", owner=False, projects=projects)


def as_caller(cwd: Path, rights: Rights, **kw: object) -> Caller:
    return Caller(env={}, cwd=cwd, rights=rights, ppid=1, **kw)  # type: ignore[arg-type]


def test_the_owner_runs_agent_commands_and_no_human_act() -> None:
    assert refusal(req("launch", "--", "true"), OWNER) is None
    assert refusal(req("status", "--json"), OWNER) is None
    for act in ("approve", "deny", "grant", "deny-rule", "ui"):
        why = refusal(req(act, "c-1", "--yes"), OWNER)
        assert why is not None and "human" in why
    assert refusal(req("init"), OWNER) is not None  # runs in the client, never in the broker
    assert refusal(req(op="stop"), OWNER) is None


def test_other_users_need_an_allowance_and_the_early_refusal_reads_only_the_command() -> None:
    cfg = Config(socket=Path("/tmp/x.sock"), allowed={OTHER: frozenset({"p1"})})
    assert rights_of(OTHER + 1, cfg) is None
    assert "not allowed" in str(refusal(req("status"), None))
    got = rights_of(OTHER, cfg)
    assert got is not None and not got.owner and got.projects == {"p1"} and got.uid == OTHER
    mine = rights_of(ME, cfg)
    assert mine is not None and mine.owner and mine.projects is None
    assert refusal(req("launch", "-p", "p1", "--", "true"), other()) is None
    assert "own user" in str(refusal(req("fetch", "-p", "p1", "1", "x"), other()))
    assert "own user" in str(refusal(req("doctor"), other()))
    assert "only the broker's own user" in str(refusal(req(op="stop"), other()))
    assert "human" in str(refusal(req("approve", "c-1"), other()))
    assert "absolute" in str(refusal(req("status", cwd="relative"), other()))


def test_one_table_says_who_may_run_each_command() -> None:
    """The CLI, the broker, its client and the MCP server read the same audience of every command."""
    from rsk.commands import BROKERED, COMMANDS, HUMAN_ACTS
    from rsk.mcp.server import HUMAN_ONLY

    assert set(COMMANDS) >= BROKERED | HUMAN_ACTS
    assert {"approve", "deny", "grant", "deny-rule", "ui"} == HUMAN_ACTS
    assert set(HUMAN_ONLY) == HUMAN_ACTS
    assert "withdraw" in BROKERED and "withdraw" not in HUMAN_ACTS  # an agent withdraws its own card
    assert {c for c in COMMANDS if COMMANDS[c].audience == "owner"} == {"fetch", "doctor"}


def test_a_project_is_checked_where_it_is_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """resolve_project and every project's state (project_dir) refuse a project the caller may not use,
    whatever spelling chose it: an option, RSK_PROJECT, a project file (found from the real directory)."""
    from rsk.errors import UsageError
    from rsk.local.caller import acting_for
    from rsk.local.project import project_dir, resolve_project

    monkeypatch.setenv("RSK_HOME", str(tmp_path / "home"))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / ".rsk.toml").write_text('schema_version = 1\nproject = "p2"\n')
    if os.geteuid() == 0:  # another user's command takes only a project file of its own
        os.chown(tmp_path / "b" / ".rsk.toml", OTHER, -1)
    (tmp_path / "link").symlink_to(tmp_path / "b")
    with acting_for(as_caller(tmp_path, other())):
        assert resolve_project("p1") == "p1"
        for bad in ("p2", "default"):
            with pytest.raises(UsageError, match="not one this user may use"):
                resolve_project(bad)
        with pytest.raises(UsageError, match="not one this user may use"):
            project_dir("p2")
    if os.geteuid() == 0:  # (only root can give the file to another user)
        with acting_for(as_caller(tmp_path / "link", other())), pytest.raises(UsageError, match="p2"):
            resolve_project(None)  # the project file of the directory the link points to
    with acting_for(as_caller(tmp_path, other(None))):
        assert resolve_project("anything") == "anything"
    with acting_for(as_caller(tmp_path, OWNER)):
        assert resolve_project("p2") == "p2"


def test_a_request_is_validated_whole() -> None:
    with pytest.raises(ValueError):
        Request.model_validate({"v": 4, "op": "run", "argv": ["approve"], "uid": 0})  # no field claims identity
    with pytest.raises(ValueError):
        Request.model_validate({"v": 1, "op": "run"})


def test_allowances_name_real_users_other_than_the_owner() -> None:
    import pwd

    with pytest.raises(StateError):
        parse_allow(["no-such-user-rsk"])
    with pytest.raises(StateError):
        parse_allow([pwd.getpwuid(ME).pw_name])


def test_the_socket_directory_must_be_our_own_real_directory(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    prepare_directory(mine, shared=False)
    assert (mine.stat().st_mode & 0o777) == 0o700
    prepare_directory(mine, shared=True)
    assert (mine.stat().st_mode & 0o777) == 0o711
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StateError):
        prepare_directory(link, shared=False)
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(StateError):
        prepare_directory(afile, shared=False)


def test_target_files_never_come_from_the_callers_tree(tmp_path: Path) -> None:
    """Not another user's, and not the owner's own either (ADR 0054): whoever writes the tree could name a
    host, a key, or an ssh_config whose ProxyCommand runs as the human."""
    from rsk.local.caller import acting_for
    from rsk.local.paths import search_dirs

    def dirs(owner: bool) -> list[Path]:
        with acting_for(as_caller(tmp_path, OWNER if owner else other())):
            return search_dirs()

    assert tmp_path / "targets" not in dirs(owner=True)
    assert tmp_path / "targets" not in dirs(owner=False)


def test_past_its_caps_the_broker_says_to_retry(tmp_path: Path) -> None:
    import json
    import socket
    import threading

    from rsk.broker.server import Broker

    release = threading.Event()
    started = threading.Semaphore(0)

    def runner(argv: list[str], who: object) -> int:
        started.release()
        release.wait(10)
        return 0

    sock = Path(f"/tmp/rsk-u-{os.getpid()}") / "b.sock"
    broker = Broker(Config(socket=sock, max_running=2), runner)
    broker.bind()
    threading.Thread(target=broker.serve, daemon=True).start()

    def ask() -> socket.socket:
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(sock))
        s.sendall(json.dumps({"v": 4, "op": "run", "project_file": None, "argv": ["status"]}).encode() + b"\n")
        return s

    try:
        held = [ask(), ask()]
        assert started.acquire(timeout=5) and started.acquire(timeout=5)
        third = ask()
        frames = [json.loads(line) for line in third.makefile("rb")]
        assert frames[-1] == {"rc": 75} and "busy" in frames[0]["e"]
        release.set()
        for s in held:
            assert [json.loads(line) for line in s.makefile("rb")][-1] == {"rc": 0}
    finally:
        release.set()
        broker.stopping.set()
        broker.close()
        sock.with_suffix(".lock").unlink(missing_ok=True)
        sock.parent.rmdir()


def test_the_clients_own_json_is_the_json_modules() -> None:
    """The client skips the json module (its import costs more than the rest of a brokered command): what
    it writes must read back as sent, byte for byte what json.dumps writes, and bad frames must fail."""
    import json

    from rsk.broker_client import dumps, loads

    req = {"v": 4, "op": "run", "argv": ["launch", "--", "echo", 'a "b" \\ c', "é€😀", "\udcff", "\x00\n\t"],
           "cwd": "/tmp/x y", "env": {"RSK_PROJECT": "p", "CODEX_X": ""}, "tty": False, "columns": 200,
           "ppid": -1, "none": None, "yes": True, "tuple": (1, 2)}  # fmt: skip
    assert dumps(req) == json.dumps(req)
    assert json.loads(dumps(req)) == {**req, "tuple": [1, 2]}
    for frame in ({"o": "héllo\n"}, {"rc": 75}, {"info": {"a": [1, 2.5, None, True, {"b": "c"}]}}):
        assert loads(json.dumps(frame).encode() + b"\n") == frame
    for bad in (b"", b"{", b'{"o": 1} x', b"nope", b"\xff"):
        with pytest.raises(ValueError):
            loads(bad)
    with pytest.raises(TypeError):
        dumps({"x": 1.5})


def test_the_broker_reads_another_users_files_only_from_what_its_client_sent(tmp_path: Path) -> None:
    """--script and --tasks: the content the client read, as that user. The broker opens no path a caller
    names, not even for its own user (ADR 0064), so an agent cannot have it read the human's key or ledger."""
    from rsk.errors import UsageError
    from rsk.local.caller import Upload, acting_for, local_dir, sent_text

    secret = tmp_path / "key"
    secret.write_text("the human's secret")
    sent = {str(secret): "what the agent sent"}
    with acting_for(as_caller(tmp_path, other(), files=sent)):
        assert sent_text(secret) == "what the agent sent"
        assert sent_text("key") == "what the agent sent"  # relative to the caller's directory
    with acting_for(as_caller(tmp_path, other())), pytest.raises(PermissionError):
        sent_text(secret)
    with acting_for(as_caller(tmp_path, other(), unread={str(secret): 7})), pytest.raises(UnicodeDecodeError):
        sent_text(secret)  # what the client found when it read the file: the command says it as a direct run would
    with acting_for(as_caller(tmp_path, OWNER)), pytest.raises(PermissionError):
        sent_text(secret)  # the broker's own user too: a sandbox of it may not read what the broker may
    upload = Upload(path=str(tmp_path / "code"), local=tmp_path / "copy")
    with acting_for(as_caller(tmp_path, other(), upload=upload)):
        assert local_dir("code") == tmp_path / "copy"
        with pytest.raises(UsageError, match="did not come with the request"):
            local_dir(tmp_path)
    with acting_for(as_caller(tmp_path, OWNER)), pytest.raises(UsageError, match="did not come with the request"):
        local_dir("code")
    assert local_dir("code") == Path.cwd() / "code"  # no broker: this process's own directory
    assert sent_text(secret) is None  # no broker: this process's own file, read by the command


def test_the_broker_asks_for_what_clicks_reading_of_argv_names(tmp_path: Path) -> None:
    """A `--` in the place of an option's value is that value to Click: the files asked for are the ones
    the command will use, however argv is spelled, and never the job's own argv."""
    from rsk.cli.argv import wanted

    def ask(*argv: str) -> tuple[list[str], str | None, list[str]]:
        w = wanted(list(argv), lambda name: tmp_path / name)
        return w.files, w.code, w.exclude

    assert ask("launch", "--exclude", "--", "--code", "/tmp", "--", "true") == ([], "/tmp", ["--"])
    assert ask("launch", "--env", "--", "--script", "s", "--tasks=t", "--", "x", "--code", "y") == (
        [str(tmp_path / "s"), str(tmp_path / "t")],
        None,
        [],
    )
    assert ask("plan", "--code", ".", "--exclude", "*.log") == ([], str(tmp_path), ["*.log"])
    assert ask("launch", "--", "tool", "--script", "x") == ([], None, [])
    assert ask("status", "-p", "--", "--script", "x") == ([], None, [])  # no such option there: nothing
    assert ask("nosuch") == ([], None, []) and ask() == ([], None, [])


def test_code_from_a_client_is_taken_only_as_the_regular_files_it_listed(tmp_path: Path) -> None:
    """--code arrives as [name, size, executable] records and their bytes, never an archive (ADR 0064): each file
    made new in the broker's private directory; an upload with a name rsk would not send, a name twice, or a
    file that is also a directory is refused whole, before a byte is read."""
    import shutil
    import socket

    from rsk.broker.server import CodeUpload, receive_code

    def send(files: list[tuple[str, bytes, bool]], cut: int = 0) -> Path:
        code = CodeUpload(path="/x", files=[(n, len(d), x) for n, d, x in files])
        a, b = socket.socketpair()
        with a, b:
            a.sendall(b"".join(d for _, d, _ in files)[: -cut or None])
            a.shutdown(socket.SHUT_WR)
            return receive_code(b, code)

    got = send([("run.sh", b"echo hi\n", True), ("sub/d.txt", b"42", False), ("sub/deeper/e", b"", False)])
    try:
        assert (got / "run.sh").read_bytes() == b"echo hi\n" and (got / "sub" / "d.txt").read_text() == "42"
        assert (got / "run.sh").stat().st_mode & 0o7777 == 0o700 and (got / "sub/d.txt").stat().st_mode & 0o777 == 0o600
        assert (got / "sub" / "deeper" / "e").read_bytes() == b""
        assert got.stat().st_mode & 0o777 == 0o700
    finally:
        shutil.rmtree(got)
    for bad in (["../escape"], ["/tmp/abs"], ["a//b"], ["a/./b"], ["a/../../b"], [""], ["-x"], ["a", "a"],
                ["a", "a/b"], ["a b"]):  # fmt: skip
        with pytest.raises(ValueError):
            send([(n, b"x", False) for n in bad])
    with pytest.raises(ValueError, match="fewer bytes"):
        send([("a", b"abc", False)], cut=1)
    assert not Path("/tmp/abs").exists() and not (tmp_path.parent / "escape").exists()


def test_what_a_client_sends_is_bounded_in_size_nesting_and_time() -> None:
    import socket
    import threading

    from rsk.broker.server import _read_json, _read_line, _stdio

    kept: list[socket.socket] = []  # the client ends, open until the test ends

    def pair(data: bytes, close: bool = True) -> socket.socket:
        a, b = socket.socketpair()
        kept.append(a)
        threading.Thread(target=lambda: (a.sendall(data), close and a.shutdown(socket.SHUT_WR)), daemon=True).start()
        return b

    assert _read_json(pair(b'{"v": 2, "argv": ["a", "[[["]}\n{"next": 1}\n'), 1000, 5) == {"v": 2, "argv": ["a", "[[["]}
    with pytest.raises(ValueError, match="nests deeper"):
        _read_json(pair(b"[" * 200_000 + b"\n"), 1 << 20, 5)
    with pytest.raises(ValueError, match="longer than"):
        _read_line(pair(b"x" * 5000), 1000, 5)
    with pytest.raises(ValueError, match="ended inside"):
        _read_line(pair(b"no newline"), 1000, 5)
    with pytest.raises(ValueError, match=r"within 0\.5 s"):
        _read_line(pair(b"drip", close=False), 1000, 0.5)
    reader, _ = _stdio(pair(b"short\n" + b"y" * 100 + b"\n"), lambda frame: None)
    assert reader.readline() == "short\n"
    import rsk.broker.server

    reader._limit = 50  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="MCP message longer"):
        reader.readline()
    assert rsk.broker.server.MAX_UPLOAD >= 16 << 20


def test_the_owners_commands_have_slots_no_other_user_takes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import socket
    import threading

    import rsk.broker.server
    from rsk.broker.server import Broker

    release = threading.Event()
    started = threading.Semaphore(0)
    peers: list[int] = []  # the uid the kernel would report, connection by connection

    def runner(argv: list[str], who: object) -> int:
        started.release()
        release.wait(10)
        return 0

    monkeypatch.setattr(rsk.broker.server, "peer_uid", lambda conn: peers.pop(0))
    sock = Path(f"/tmp/rsk-u-{os.getpid()}-o") / "b.sock"
    config = Config(socket=sock, allowed={OTHER: None}, max_running=2, max_running_other=2, max_running_others=2)
    broker = Broker(config, runner)
    broker.bind()
    threading.Thread(target=broker.serve, daemon=True).start()

    def ask(uid: int) -> socket.socket:
        peers.append(uid)
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(sock))
        s.sendall(json.dumps({"v": 4, "op": "run", "project_file": None, "argv": ["status"]}).encode() + b"\n")
        return s

    try:
        held = [ask(OTHER), ask(OTHER)]
        assert started.acquire(timeout=5) and started.acquire(timeout=5)
        frames = [json.loads(line) for line in ask(OTHER).makefile("rb")]
        assert frames[-1] == {"rc": 75}  # the other user's slots are full
        mine = ask(ME)
        assert started.acquire(timeout=5)  # and the owner's command runs
        release.set()
        assert [json.loads(line) for line in mine.makefile("rb")][-1] == {"rc": 0}
        for s in held:
            assert [json.loads(line) for line in s.makefile("rb")][-1] == {"rc": 0}
    finally:
        release.set()
        broker.stopping.set()
        broker.close()
        sock.with_suffix(".lock").unlink(missing_ok=True)
        sock.parent.rmdir()


def test_the_command_click_chose_is_checked_against_the_callers_audience(tmp_path: Path) -> None:
    """The CLI's root callback reads the audience table with the name Click resolved: whatever a request
    looks like, a human act is exit 77 and an owner-only or local command exit 2 for another user."""
    from rsk.cli.broker_cmd import cli_runner

    said = io.StringIO()
    for argv, rc in ((["approve", "c-1", "--yes"], 77), (["doctor"], 2), (["init"], 2), (["fetch", "1", "x"], 2),
                     (["broker", "stop"], 2), (["grant", "release", "r-1", "--yes"], 77)):  # fmt: skip
        assert cli_runner(argv, as_caller(tmp_path, other(), out=said, err=said)) == rc, said.getvalue()
    assert cli_runner(["approve", "c-1", "--yes"], as_caller(tmp_path, OWNER, out=said, err=said)) == 77
    assert "never runs through the broker" in said.getvalue()  # said on the caller's own stream


def test_a_broker_whose_code_changed_on_disk_stops_and_the_command_runs_here(tmp_path: Path) -> None:
    import threading

    from rsk import broker_client
    from rsk.broker.server import Broker

    ran: list[list[str]] = []

    def runner(argv: list[str], who: object) -> int:
        ran.append(argv)
        return 0

    code = tmp_path / "pkg"
    code.mkdir()
    (code / "mod.py").write_text("A = 1\n")
    sock = Path(f"/tmp/rsk-u-{os.getpid()}-stale") / "b.sock"
    broker = Broker(Config(socket=sock), runner, sources=[code])
    broker.bind()
    threading.Thread(target=broker.serve, daemon=True).start()
    try:
        assert broker_client._through(str(sock), ["status"]) == 0 and ran == [["status"]]
        (code / "mod.py").write_text("A = 2\n")  # an upgrade, a checkout: the files the broker loaded changed
        os.utime(code / "mod.py", ns=(1, 1))
        broker.checked = 0.0  # the next request looks (at most once a second)
        assert broker_client._through(str(sock), ["status"]) is None  # not run there: the client runs it
        assert ran == [["status"]] and broker.stopping.wait(5)
    finally:
        broker.stopping.set()
        broker.close()
        sock.with_suffix(".lock").unlink(missing_ok=True)
        sock.parent.rmdir()


def test_each_caller_gets_the_brokers_connections_and_its_own_streams(tmp_path: Path) -> None:
    """The broker builds every Caller with its one connection pool and frame writers to that caller's client:
    a command's output and its connections come from its context, not from a switch of the process."""
    import json
    import socket
    import sys
    import threading

    from rsk.broker.server import Broker
    from rsk.local import caller

    seen: list[object] = []

    def runner(argv: list[str], who: Caller) -> int:
        from rsk.local.caller import acting_for

        with acting_for(who):
            seen.append(caller.pool())
            caller.stdout().write(f"out {argv[0]}\n")
            caller.stderr().write(f"err {argv[0]}\n")
        return 3

    broker = Broker(Config(socket=tmp_path / "b.sock"), runner)
    frames: list[dict[str, object]] = []
    for word in ("status", "events"):
        a, b = socket.socketpair()
        with broker.lock:
            broker.serving[ME] = broker.serving.get(ME, 0) + 1
        done = threading.Thread(target=broker._serve_one, args=(b, ME))
        a.sendall(
            json.dumps(
                {"v": 4, "op": "run", "project_file": None, "argv": [word], "cwd": str(tmp_path), "env": {}}
            ).encode()
            + b"\n"
        )
        done.start()
        with a, a.makefile("rb") as lines:
            got = [json.loads(line) for line in lines]
        done.join(10)
        frames += got
    assert frames == [{"o": "out status\n"}, {"e": "err status\n"}, {"rc": 3},
                      {"o": "out events\n"}, {"e": "err events\n"}, {"rc": 3}]  # fmt: skip
    assert seen == [broker.pool, broker.pool]  # one pool, the broker's, in each caller's context
    assert broker.own().pool is broker.pool  # its watch of the books too
    assert caller.pool() is None and caller.stdout() is sys.stdout  # no caller here: the process's


def test_a_stopping_broker_lets_the_commands_in_flight_end(tmp_path: Path) -> None:
    import threading
    import time

    from rsk import broker_client
    from rsk.broker.server import Broker

    started, release = threading.Event(), threading.Event()

    def runner(argv: list[str], who: object) -> int:
        started.set()
        release.wait(20)
        return 0

    sock = Path(f"/tmp/rsk-u-{os.getpid()}-drain") / "b.sock"
    broker = Broker(Config(socket=sock), runner, sources=[tmp_path])
    broker.bind()
    serving = threading.Thread(target=broker.serve, daemon=True)
    serving.start()
    got: list[int | None] = []
    asking = threading.Thread(target=lambda: got.append(broker_client._through(str(sock), ["wait", "1"])))
    asking.start()
    try:
        assert started.wait(10)
        broker.stopping.set()  # `rsk broker stop`, SIGTERM, or its code changed on disk
        deadline = time.monotonic() + 10
        while sock.exists() and time.monotonic() < deadline:  # it stops listening first
            time.sleep(0.05)
        assert not sock.exists() and serving.is_alive()  # and lets the command in flight run on
        release.set()
        asking.join(20)
        serving.join(20)
        assert got == [0] and not serving.is_alive()  # the command ended whole, then the broker
    finally:
        release.set()
        broker.stopping.set()
        broker.close()
        sock.with_suffix(".lock").unlink(missing_ok=True)
        sock.parent.rmdir()


def test_the_client_finds_the_nearest_project_file_as_the_cli_does(tmp_path: Path) -> None:
    from rsk.broker_client import project_file

    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    assert project_file(str(deep)) is None
    (tmp_path / ".rsk.toml").write_text('project = "top"\n')
    (tmp_path / "a" / "b" / ".rsk.toml").mkdir()  # a directory of that name is no project file: walk on
    os.mkfifo(tmp_path / "a" / ".rsk.toml")  # nor a FIFO, which must not hold the command
    assert project_file(str(deep)) == {"path": str(tmp_path / ".rsk.toml"), "text": 'project = "top"\n', "error": ""}
    (deep / ".rsk.toml").write_bytes(b"project = \xff\n")
    assert project_file(str(deep)) == {"path": str(deep / ".rsk.toml"), "text": None, "error": "not UTF-8"}


def test_a_client_of_another_wire_version_is_told_to_run_it_again_and_nothing_runs() -> None:
    import json
    import socket
    import threading

    from rsk.broker.server import Broker
    from rsk.broker_client import OLDER, _Older

    ran: list[list[str]] = []
    sock = Path(f"/tmp/rsk-uv-{os.getpid()}") / "b.sock"
    broker = Broker(Config(socket=sock), lambda argv, who: ran.append(argv) or 0)
    broker.bind()
    threading.Thread(target=broker.serve, daemon=True).start()

    def ask(request: dict[str, object]) -> list[dict[str, object]]:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(sock))
            s.sendall(json.dumps(request).encode() + b"\n")
            return [json.loads(line) for line in s.makefile("rb")]

    try:
        old = ask({"v": 2, "op": "run", "argv": ["status"], "cwd": "/"})
        assert old[-1] == {"rc": 75} and "wire version 4 and the client 2" in str(old[0]["e"]), old
        unsaid = ask({"v": 4, "op": "run", "argv": ["status"], "cwd": "/"})  # which project file: not said
        assert unsaid[-1] == {"rc": 2} and "project_file" in str(unsaid[0]["e"]), unsaid
        assert ran == [] and not broker.stopping.is_set()
    finally:
        broker.stopping.set()
        broker.close()
        sock.with_suffix(".lock").unlink(missing_ok=True)
        sock.parent.rmdir()
    # what a broker of wire version 2 answers this client: it runs the command itself, and knows the version
    said = _Older(OLDER + "4; this broker speaks 2 (one rsk for both)\nhint: use rsk's own client\n")
    assert said.version == 2


def test_in_the_broker_the_client_writes_where_a_fetch_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ADR 0065: a command in the broker never opens the caller's destination; each step goes to the caller's
    client (`put` frames), which writes with the no-link walk, and its errors (a link, rsk's own state) come back
    as the command's."""
    import threading

    from rsk.broker.server import Broker
    from rsk.broker_client import _through
    from rsk.local.caller import acting_for
    from rsk.ops.fetch import _dest

    monkeypatch.setenv("RSK_BROKER", str(tmp_path / "s" / "b.sock"))
    monkeypatch.setenv("RSK_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "s").mkdir(mode=0o700)
    said: list[str] = []

    def runner(argv: list[str], who: Caller) -> int:
        with acting_for(who):
            try:
                with _dest(Path(argv[1])) as to:
                    have = to.resume("d/f.txt")
                    to.append("d/f.txt", have, b"bytes")
                    to.finish("d/f.txt", 5)
                    to.put("whole.txt", b"whole")
                    assert to.digest("whole.txt")[1] == 5 and to.present(["whole.txt", "no"]) == ["whole.txt"]
            except RskError as exc:
                said.append(exc.code)
                return int(exc.exit_code)
        return 0

    broker = Broker(Config(socket=tmp_path / "s" / "b.sock"), runner)  # type: ignore[arg-type]
    broker.bind()
    threading.Thread(target=broker.serve, daemon=True).start()
    try:
        assert _through(str(tmp_path / "s" / "b.sock"), ["status", str(tmp_path / "out")]) == 0
        assert (tmp_path / "out" / "d" / "f.txt").read_bytes() == b"bytes"
        assert (tmp_path / "out" / "whole.txt").read_bytes() == b"whole"
        assert _through(str(tmp_path / "s" / "b.sock"), ["status", str(tmp_path / "home" / "projects")]) == 2
        assert said == ["rsk-own"] and not (tmp_path / "home" / "projects").exists()
    finally:
        broker.stopping.set()
        broker.close()
