"""The automatic broker's choices, as pure logic: which socket an environment gets, the idle setting, the
modes, and a directory it must not start a broker in (the lab tests run the real thing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsk import broker_client as bc


def test_each_environment_gets_its_own_automatic_socket(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("RSK_HOME", "/a")
    a = bc.auto_socket()
    assert a == bc.auto_socket()
    assert Path(a).parent == tmp_path / "rsk" and Path(a).name.startswith("auto-")
    for name, value in (("RSK_HOME", "/b"), ("RSK_TARGETS_PATH", "/t"), ("SSH_AUTH_SOCK", "/s"), ("HOME", "/h")):
        with monkeypatch.context() as m:
            m.setenv(name, value)
            assert bc.auto_socket() != a, name
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RSK_HOME", "rel")
    rel = bc.auto_socket()
    monkeypatch.chdir("/")
    assert bc.auto_socket() != rel  # a relative RSK_HOME means the directory it was set in


@pytest.mark.parametrize(("raw", "want"), [("", 600.0), ("2", 2.0), ("0.5", 0.5), ("0", 0.0)])
def test_the_idle_time(monkeypatch: pytest.MonkeyPatch, raw: str, want: float) -> None:
    monkeypatch.setenv("RSK_BROKER_IDLE", raw)
    assert bc.auto_idle() == want


@pytest.mark.parametrize("raw", ["soon", "-1", "inf", "nan"])
def test_a_bad_idle_time_is_refused(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("RSK_BROKER_IDLE", raw)
    with pytest.raises(ValueError, match="RSK_BROKER_IDLE"):
        bc.auto_idle()


def test_the_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RSK_NO_BROKER", raising=False)
    monkeypatch.setenv("RSK_BROKER", "off")
    assert bc.off() and not bc.explicit()
    monkeypatch.setenv("RSK_BROKER", "/x/b.sock")
    assert bc.explicit() and not bc.off() and bc.socket_path() == "/x/b.sock"
    monkeypatch.delenv("RSK_BROKER")
    assert not bc.explicit() and not bc.off()
    monkeypatch.setenv("RSK_NO_BROKER", "1")
    assert bc.off()


def test_no_broker_is_started_in_a_directory_others_can_read(tmp_path: Path) -> None:
    shared = tmp_path / "rsk"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    assert bc.start_auto(str(shared / "auto-x.sock"), 1.0) is False
    assert list(shared.iterdir()) == []


def test_no_broker_is_started_through_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "rsk").symlink_to(real)
    assert bc.start_auto(str(tmp_path / "rsk" / "auto-x.sock"), 1.0) is False
    assert list(real.iterdir()) == []


def test_an_mcp_session_of_the_users_own_runs_in_its_own_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """`rsk mcp` without RSK_BROKER neither uses nor starts the automatic broker: its code and fetch tools open the
    paths they name as the user (a broker opens none, ADR 0064); with RSK_BROKER it goes through that broker."""
    monkeypatch.delenv("RSK_BROKER", raising=False)
    asked: list[str] = []
    monkeypatch.setattr(bc, "_through", lambda path, argv: asked.append(path) or 0)
    monkeypatch.setattr(bc, "start_auto", lambda path, idle: asked.append("start") or True)
    assert bc.try_broker(["mcp"]) is None and asked == []
    assert bc.try_broker(["status"]) == 0 and asked
    monkeypatch.setenv("RSK_BROKER", "/tmp/somewhere/b.sock")
    asked.clear()
    assert bc.try_broker(["mcp"]) == 0 and asked == ["/tmp/somewhere/b.sock"]
