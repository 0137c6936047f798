"""A plan whose command names a file here that no --code sends says so (rsk.local.unsent): the words that are
relative paths of regular files in the caller's working directory, the command itself only with a `/`; nothing
for another OS user's request through the broker, whose paths the broker never looks at (ADR 0064)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rsk.local.caller import Caller, Rights, acting_for
from rsk.local.unsent import MOST_NAMED, local_files, warning
from rsk.ops.launch import unsent_warnings
from rsk.wire.protocol import Request, TaskSpec


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "a.yaml").write_text("a: 1\n")
    (tmp_path / "run.sh").write_text("true\n")
    (tmp_path / "python").write_text("")  # a file named as the command: the command is not a path
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_files_a_command_names_here_are_found(here: Path) -> None:
    assert local_files([["python", "train.py", "--config", "conf/a.yaml", "--lr=3"]]) == ["train.py", "conf/a.yaml"]
    assert local_files([["./run.sh"], ["run.sh"]]) == ["./run.sh"]  # a command with a / is a path; a bare one not
    assert local_files([["python", "conf", "-c", "train.py", "/etc/passwd", "~/x"]]) == ["train.py"]  # no dir, no abs
    assert local_files([["python", "missing.py"], ["sh", "-c", "python train.py"]]) == []
    named = local_files([["cat", "train.py", "run.sh", "conf/a.yaml", "python"]])  # a few, not every one
    assert named == ["train.py", "run.sh", "conf/a.yaml", "python"][:MOST_NAMED]
    assert local_files([["x", "bad\0word"]]) == []  # a word no path can be


def test_the_warning_names_where_the_job_runs_and_what_to_pass(here: Path) -> None:
    said = warning([["python", "train.py"]], "")
    assert said is not None and said.startswith("train.py is a file here") and "--code ." in said
    assert "in your home directory" in said
    said = warning([["python", "train.py"], ["python", "conf/a.yaml"]], "~/proj")
    assert said is not None and "train.py, conf/a.yaml are files here" in said and "in ~/proj" in said
    assert warning([["python", "-c", "print(1)"]], "") is None


def test_a_request_with_code_a_script_or_a_lease_to_open_has_nothing_to_say(here: Path) -> None:
    bare = Request(project="p", argv=["python", "train.py"])
    assert len(unsent_warnings(bare, None)) == 1
    assert unsent_warnings(bare.model_copy(update={"code": "ab" * 32}), None) == []
    assert unsent_warnings(bare.model_copy(update={"script": "#!/bin/sh\npython train.py\n"}), None) == []
    assert unsent_warnings(bare.model_copy(update={"lease_open": "dev"}), None) == []
    batch = Request(project="p", tasks=[TaskSpec(key=f"k{i}", argv=["python", "train.py", str(i)]) for i in range(50)])
    assert len(unsent_warnings(batch, None)) == 1


class _Client:
    """The caller's client as the broker reaches it: each step done by rsk.local.handover.serve, as the client
    does it (here in this process; `sees` stands in for what the caller's own process can see)."""

    def __init__(self, sees: bool = True) -> None:
        self.sees, self.asked = sees, 0

    def ask(self, put: dict[str, object], data: bytes = b"") -> object:
        from rsk.local.handover import answer, serve

        self.asked += 1
        if not self.sees:
            return {"ok": []}
        return answer(serve(put, data, {}))


def test_in_the_broker_the_callers_client_looks_never_the_broker(here: Path) -> None:
    """Through the broker the look is the caller's own (its client's), so no caller learns through the broker which
    files exist where it cannot see; an MCP session in the broker (no client) is told nothing."""
    other = Rights(uid=os.getuid() + 4242, user="agent", owner=False)
    mine = Rights(uid=os.getuid(), user="me")
    for rights in (other, mine):
        blind = _Client(sees=False)  # the file is there, but not for the caller: the broker does not say it is
        with acting_for(Caller(env={}, cwd=here, rights=rights, ppid=1, client=blind)):  # type: ignore[arg-type]
            assert local_files([["python", "train.py"]]) == [] and blind.asked == 1
        seeing = _Client()
        with (
            acting_for(Caller(env={}, cwd=here, rights=rights, ppid=1, client=seeing)),
            pytest.MonkeyPatch.context() as m,
        ):  # type: ignore[arg-type]
            m.chdir("/")  # the broker's own cwd is not the caller's
            assert local_files([["python", "train.py", "-c", "conf/a.yaml"]]) == ["train.py", "conf/a.yaml"]
        with acting_for(Caller(env={}, cwd=here, rights=rights, ppid=1)):  # an MCP session: no client
            assert local_files([["python", "train.py"]]) == []


def test_a_file_name_reaches_the_warning_inert(here: Path) -> None:
    (here / "x\x1b[2J\x1b]52;c;aGk\x07.py").write_text("")
    said = warning([["python", "x\x1b[2J\x1b]52;c;aGk\x07.py"]], "")
    assert said is not None and "\x1b" not in said and "\x07" not in said
