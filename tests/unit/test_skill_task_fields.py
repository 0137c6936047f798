"""The skill names every field a --tasks line takes, and no other."""

from __future__ import annotations

import re

from rsk.request.tasks import TaskLine
from tests.conftest import ROOT


def test_the_skill_lists_exactly_the_fields_of_a_task_line() -> None:
    text = " ".join((ROOT / "skills/rsk/SKILL.md").read_text().split())
    line = text[text.index("A task line takes only") :].split("; any other field")[0]
    assert set(re.findall(r"`([a-z_]+)`", line)) == set(TaskLine.model_fields)


def test_launch_help_lists_exactly_the_fields_of_a_task_line() -> None:
    import typer.main

    from rsk.cli.app import app, register_all

    register_all()
    launch = typer.main.get_command(app).get_command(None, "launch")  # type: ignore[attr-defined]
    text = next(p.help for p in launch.params if p.name == "tasks")
    listed = re.split(r"[ ,]+(?:or )?", text.split("Task fields: ")[1].split(".")[0].strip())
    chain = {"budget", "signal_before", "max_links"}  # a chain's line, named in the sentence after
    assert set(listed) == set(TaskLine.model_fields) - chain, listed
