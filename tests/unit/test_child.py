"""rsk's own Python children import this rsk, never an `rsk/` or `rsk.py` in the working directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rsk import __version__
from rsk.local.child import python


def test_a_child_imports_this_rsk_even_from_a_planted_directory(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    code = f"open({str(marker)!r}, 'a').write('x')\n"
    (tmp_path / "rsk").mkdir()
    for name in ("__init__.py", "__main__.py"):
        (tmp_path / "rsk" / name).write_text(code)
    (tmp_path / "rsk.py").write_text(code)
    argv, env = python("rsk", "--version")
    ran = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert ran.returncode == 0 and ran.stdout.strip() == f"rsk {__version__}", ran.stderr
    assert not marker.exists()


def test_relative_settings_keep_their_meaning_in_the_childs_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child runs in `/`: a relative PYTHONPATH entry (`.` names the working directory again) is made
    absolute first. A relative RSK_HOME passes as it is: the child refuses it as rsk does here (ADR 0054), so
    it never becomes a ledger in whatever directory the parent ran in (an agent's tree)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RSK_HOME", "home")
    monkeypatch.setenv("PYTHONPATH", "lib:.")
    _, env = python("rsk")
    assert env["RSK_HOME"] == "home"
    assert str(tmp_path / "lib") in env["PYTHONPATH"].split(":")
