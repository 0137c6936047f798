"""The skill names every field a --tasks line takes, and no other."""

from __future__ import annotations

import re

from rsk.request.tasks import TaskLine
from tests.conftest import ROOT


def test_the_skill_lists_exactly_the_fields_of_a_task_line() -> None:
    text = " ".join((ROOT / "skills/rsk/SKILL.md").read_text().split())
    line = text[text.index("A task line takes only") :].split("; any other field")[0]
    assert set(re.findall(r"`([a-z_]+)`", line)) == set(TaskLine.model_fields)
