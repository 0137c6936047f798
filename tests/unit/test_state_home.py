"""RSK_HOME is its user's own: made 0700, a looser one tightened at the next write of a ledger and reported by
`rsk doctor` until then, another user's refused (docs/security.md)."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_rsk_home_is_made_closed_and_a_looser_one_is_tightened_and_reported(rsk_env: Path) -> None:
    from rsk.ledger.store import Store
    from rsk.ops.doctor import state_home

    assert state_home().result == "pass" and not rsk_env.exists()
    with Store("p").transaction() as ledger:
        ledger.project = "p"
    made = [rsk_env, rsk_env / "projects", rsk_env / "projects" / "p"]
    assert [oct(d.stat().st_mode & 0o777) for d in made] == ["0o700"] * 3
    files = [p for p in rsk_env.rglob("*") if p.is_file()]
    assert files and all((p.stat().st_mode & 0o777) == 0o600 for p in files), files
    for d in made:
        d.chmod(0o755)
    said = state_home()
    assert said.result == "warn" and "0755" in said.message and "chmod 700" in said.hint
    with Store("p").transaction() as ledger:  # no change: the lock is still taken, and the directories tightened
        pass
    assert [oct(d.stat().st_mode & 0o777) for d in made] == ["0o700"] * 3
    assert state_home().result == "pass"


def test_a_relative_rsk_home_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from rsk.errors import ConfigError
    from rsk.local.paths import rsk_home

    monkeypatch.setenv("RSK_HOME", "state")
    with pytest.raises(ConfigError, match="relative"):
        rsk_home()
