"""The package version is the newest CHANGELOG entry's (pure)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import rsk

ROOT = Path(__file__).resolve().parents[2]


def test_the_version_is_the_changelogs_newest() -> None:
    heading = re.search(r"^## (\d+\.\d+\.\d+)", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert heading is not None
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert rsk.__version__ == project["version"] == heading.group(1)
