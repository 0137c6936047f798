"""The broker's pure parts: who may ask for what, how a project is read from a command line, the socket
directory's checks, and the client's path rewriting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rsk.broker import Config, Request, parse_allow, prepare_directory, project_of, refusal
from rsk.broker_client import _absolute
from rsk.errors import StateError

ME = os.getuid()
OTHER = ME + 4242


def req(*argv: str, op: str = "run", **kw: object) -> Request:
    return Request.model_validate({"v": 1, "op": op, "argv": list(argv), **kw})


def test_the_owner_runs_agent_commands_and_no_human_act() -> None:
    cfg = Config(socket=Path("/tmp/x.sock"))
    assert refusal(req("launch", "--", "true"), ME, cfg) is None
    assert refusal(req("status", "--json"), ME, cfg) is None
    for act in ("approve", "deny", "grant", "deny-rule"):
        why = refusal(req(act, "c-1", "--yes"), ME, cfg)
        assert why is not None and "human" in why
    assert refusal(req("init"), ME, cfg) is not None  # runs in the client, never in the broker
    assert refusal(req(op="stop"), ME, cfg) is None


def test_other_users_need_an_allowance_and_stay_in_their_projects() -> None:
    cfg = Config(socket=Path("/tmp/x.sock"), allowed={OTHER: frozenset({"p1"})})
    assert "not allowed" in str(refusal(req("status"), OTHER + 1, cfg))
    assert refusal(req("launch", "-p", "p1", "--", "true"), OTHER, cfg) is None
    assert refusal(req("status", env={"RSK_PROJECT": "p1"}), OTHER, cfg) is None
    assert "not one this user may use" in str(refusal(req("status", "--project", "p2"), OTHER, cfg))
    assert "not one this user may use" in str(refusal(req("status", "--project=p2"), OTHER, cfg))
    assert "not one this user may use" in str(refusal(req("status", "-pp2"), OTHER, cfg))
    # two projects named (which would the CLI take?) is refused outright
    assert refusal(req("status", "-p", "p1", "--project", "p2"), OTHER, cfg) == "name the project once"
    # the job's own argv after -- is not rsk's
    assert refusal(req("launch", "-p", "p1", "--", "tool", "--project", "p2"), OTHER, cfg) is None
    assert "--yes" in str(refusal(req("cancel", "-p", "p1", "--yes"), OTHER, cfg))
    assert "own user" in str(refusal(req("fetch", "-p", "p1", "1", "x"), OTHER, cfg))
    # files the broker would read as the human and send to the cluster (the human's key, say)
    for opt in (["--code", "/root/.ssh"], ["--code=/root/.ssh"], ["--to", "/root/.ssh"]):
        assert "only that user may name it" in str(refusal(req("launch", "-p", "p1", *opt, "--", "x"), OTHER, cfg))
    # --script and --tasks travel as the content the client read: the request is taken, the path never opened
    for opt in (["--script", "/etc/shadow"], ["--tasks=t"]):
        assert refusal(req("launch", "-p", "p1", *opt, "--", "x"), OTHER, cfg) is None
    assert refusal(req("launch", "-p", "p1", "--code", "."), ME, cfg) is None
    # without --project, approvals and withdraw look in every project's ledger
    assert "needs --project" in str(refusal(req("approvals", env={"RSK_PROJECT": "p1"}), OTHER, cfg))
    assert "needs --project" in str(refusal(req("withdraw", "c-1"), OTHER, cfg))
    assert refusal(req("approvals", "--project", "p1"), OTHER, cfg) is None
    assert "not one this user may use" in str(refusal(req("withdraw", "c-1", "-p", "p2"), OTHER, cfg))
    assert "only the broker's own user" in str(refusal(req(op="stop"), OTHER, cfg))
    assert "human" in str(refusal(req("approve", "c-1"), OTHER, cfg))


def test_any_project_when_the_allowance_names_none(tmp_path: Path) -> None:
    cfg = Config(socket=Path("/tmp/x.sock"), allowed={OTHER: None})
    assert refusal(req("status", "-p", "anything"), OTHER, cfg) is None


def test_the_project_comes_from_the_callers_tree(tmp_path: Path) -> None:
    (tmp_path / ".rsk.toml").write_text('schema_version = 1\nproject = "fromfile"\n')
    (tmp_path / "sub").mkdir()
    assert project_of(["status"], {}, tmp_path / "sub") == "fromfile"
    assert project_of(["status"], {"RSK_PROJECT": "env"}, tmp_path / "sub") == "env"
    assert project_of(["status", "-p", "opt"], {"RSK_PROJECT": "env"}, tmp_path) == "opt"
    assert project_of(["status"], {}, Path("/")) == "default"


def test_a_request_is_validated_whole() -> None:
    with pytest.raises(ValueError):
        Request.model_validate({"v": 1, "op": "run", "argv": ["approve"], "uid": 0})  # no field claims identity
    with pytest.raises(ValueError):
        Request.model_validate({"v": 2, "op": "run"})


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


def test_the_client_makes_path_options_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """... but never the job's own argv after --."""
    monkeypatch.chdir(tmp_path)
    got = _absolute(["launch", "--tasks", "t.jsonl", "--code=.", "-r", "x", "--", "python", "--tasks", "y"])
    assert got == ["launch", "--tasks", str(tmp_path / "t.jsonl"), f"--code={tmp_path}", "-r", "x", "--", "python",
                   "--tasks", "y"]  # fmt: skip


def test_target_files_come_from_the_callers_tree_only_for_the_owner(tmp_path: Path) -> None:
    from rsk.caller import Caller, acting_for
    from rsk.targets import search_dirs

    def dirs(owner: bool) -> list[Path]:
        with acting_for(Caller(env={}, cwd=tmp_path, uid=OTHER, user="agent", ppid=1, owner=owner)):
            return search_dirs()

    assert tmp_path / "targets" in dirs(owner=True)
    assert tmp_path / "targets" not in dirs(owner=False)  # another user's tree never names a host or key


def test_past_its_caps_the_broker_says_to_retry(tmp_path: Path) -> None:
    import json
    import socket
    import threading

    from rsk.broker import Broker

    release = threading.Event()
    started = threading.Semaphore(0)

    def runner(argv: list[str], who: object, out: object) -> int:
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
        s.sendall(json.dumps({"v": 1, "op": "run", "argv": ["status"]}).encode() + b"\n")
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
        (sock.parent / "broker.lock").unlink(missing_ok=True)
        sock.parent.rmdir()


def test_the_clients_own_json_is_the_json_modules() -> None:
    """The client skips the json module (its import costs more than the rest of a brokered command): what
    it writes must read back as sent, byte for byte what json.dumps writes, and bad frames must fail."""
    import json

    from rsk.broker_client import dumps, loads

    req = {"v": 1, "op": "run", "argv": ["launch", "--", "echo", 'a "b" \\ c', "é€😀", "\udcff", "\x00\n\t"],
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
    """--script and --tasks: the content the client read, as that user. The broker opens the path itself
    only for its own user, so an agent cannot have it read the human's key or ledger."""
    from rsk.caller import Caller, acting_for, read_text

    secret = tmp_path / "key"
    secret.write_text("the human's secret")
    sent = {str(secret): "what the agent sent"}
    with acting_for(Caller(env={}, cwd=tmp_path, uid=OTHER, user="agent", ppid=1, owner=False, files=sent)):
        assert read_text(secret) == "what the agent sent"
    with acting_for(Caller(env={}, cwd=tmp_path, uid=OTHER, user="agent", ppid=1, owner=False)), \
            pytest.raises(PermissionError):  # fmt: skip
        read_text(secret)
    with acting_for(Caller(env={}, cwd=tmp_path, uid=ME, user="me", ppid=1, owner=True)):
        assert read_text(secret) == "the human's secret"
    assert read_text(secret) == "the human's secret"  # no broker: this process's own file


def test_the_client_sends_what_it_can_read_of_script_and_tasks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.sh").write_text("#!/bin/sh\ntrue\n")
    (tmp_path / "bad").write_bytes(b"\xff")
    files: dict[str, str] = {}
    got = _absolute(["launch", "--script", "s.sh", "--tasks=missing", "--code", ".", "--", "--script", "x"], files)
    assert got[2] == str(tmp_path / "s.sh") and got[3] == f"--tasks={tmp_path / 'missing'}"
    assert files == {str(tmp_path / "s.sh"): "#!/bin/sh\ntrue\n"}  # not the missing file, nor the code directory
    _absolute(["plan", "--script", "bad"], files)
    assert str(tmp_path / "bad") not in files  # not UTF-8: the command says so, as it does without a broker


def test_another_users_code_is_taken_only_as_the_files_it_sent(tmp_path: Path) -> None:
    import io
    import socket
    import tarfile

    from rsk.broker import code_values, receive_code

    argv = ["launch", "--code", "/a", "--code=/b", "--", "run", "--code", "/c"]
    assert code_values(argv) == ["/a", "/b"]
    assert code_values(argv, replace="/tmp/x") == ["launch", "--code", "/tmp/x", "--code=/tmp/x", "--", "run",
                                                   "--code", "/c"]  # fmt: skip
    cfg = Config(socket=tmp_path / "b.sock", allowed={OTHER: None})
    upload = {"path": "/a", "size": 10}
    assert refusal(req("launch", "-p", "p", "--code", "/a", "--", "x", code=upload), OTHER, cfg) is None
    for argv2 in (["--code", "/b"], ["--code", "/a", "--code", "/b"]):  # a directory other than the one sent
        assert "only that user" in str(refusal(req("launch", "-p", "p", *argv2, code=upload), OTHER, cfg))

    def tar(*members: tuple[str, bytes]) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o4755
                t.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    def send(data: bytes, size: int | None = None) -> Path:
        a, b = socket.socketpair()
        with a, b:
            a.sendall(data)
            a.shutdown(socket.SHUT_WR)
            return receive_code(b, len(data) if size is None else size)

    got = send(tar(("run.sh", b"echo hi\n"), ("sub/d.txt", b"42")))
    assert (got / "run.sh").read_bytes() == b"echo hi\n" and (got / "sub" / "d.txt").read_text() == "42"
    assert (got / "run.sh").stat().st_mode & 0o7777 == 0o755  # no set-id bit survives
    assert got.stat().st_mode & 0o777 == 0o700
    inside = send(tar(("/tmp/abs-escape", b"x")))  # a leading / is dropped: it lands inside
    assert (inside / "tmp" / "abs-escape").exists() and not Path("/tmp/abs-escape").exists()
    for bad in (tar(("../escape", b"x")), tar(("a/../../escape", b"x")), b"not a tar" * 100):
        with pytest.raises(ValueError, match="did not arrive whole"):
            send(bad)
    with pytest.raises(ValueError, match="sent 3 of 10 bytes"):
        send(b"abc", size=10)
    import shutil

    for d in (got, inside):
        shutil.rmtree(d)
