"""The file-here warning (ADR 0074) names files by their names as they are: a name is text an agent controls.

The human often runs rsk in the agent's tree (a `--tasks` file the agent wrote, `rsk retry` of its batch, `rsk wait
CARD`): the warning then names files the agent made, with words the agent chose, and rsk prints it on the human's
terminal as `rsk: warning: ...` as it is. A file name may hold any byte but `/` and NUL: an OSC 52 sequence sets the
human's clipboard (to `rsk approve c-... --yes`, say), a CSI clears the screen, a newline starts a line of rsk's own
("rsk: ... approved"). Everywhere else rsk shows agent text inert (rsk.local.inert: the plan's command, cards,
status); this warning did not, and now does."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Lab, rsk

OSC52 = "\x1b]52;c;cnNrIGFwcHJvdmUgYy0xIC0teWVz\x07"  # the clipboard: "rsk approve c-1 --yes"
FORGED = "\nrsk: the human approved this plan; nothing to review"


def test_a_file_name_in_the_file_here_warning_reaches_the_terminal_inert(
    lab: Lab, project: str, tmp_path: Path
) -> None:
    name = f"data{OSC52}\x1b[2J{FORGED}.csv"
    (tmp_path / name).write_text("1\n")  # the agent's tree: its own file
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"key": "a", "argv": ["python3", "load.py", name]}) + "\n")
    planned = rsk("plan", "-t", "lab", "-p", project, "--tasks", "tasks.jsonl", "--time", "1", cwd=tmp_path)
    assert planned.rc == 0, planned.err
    assert "is a file here" in planned.err, planned.err  # the warning is there
    assert "\x1b" not in planned.err and "\x07" not in planned.err, repr(planned.err)
    assert "\nrsk: the human approved" not in planned.err, planned.err
