"""The exit-code tables that humans and agents read agree with the code."""

from __future__ import annotations

import re

from rsk.errors import Exit
from tests.conftest import ROOT


def table_codes(path: str) -> dict[int, str]:
    """code -> name from a markdown table whose rows start with | CODE | NAME |."""
    rows = re.findall(r"^\| (\d+) \| ([a-z ]+) \|", (ROOT / path).read_text(), flags=re.MULTILINE)
    return {int(code): name.strip() for code, name in rows}


def test_readme_and_the_skill_reference_list_every_exit_code_by_its_name() -> None:
    want = {int(e): e.name.lower().replace("_", " ") for e in Exit}
    aliases = {"remote root": "remote root", "human": "needs human"}
    for path in ("README.md", "skills/rsk/references/exit-codes.md"):
        got = table_codes(path)
        assert set(got) == set(want), (path, set(want) ^ set(got))
        for code, name in want.items():
            assert got[code] == aliases.get(name, name), (path, code, got[code], name)


def test_the_skill_tells_what_to_do_for_each_code_an_agent_meets() -> None:
    text = (ROOT / "skills/rsk/SKILL.md").read_text()
    rows = re.findall(r"^\| ([\d, ]+) \|", text, flags=re.MULTILINE)
    seen = {int(c) for row in rows for c in row.split(",") if c.strip().isdigit()}
    agent_codes = {Exit.OK, Exit.USAGE, Exit.DENIED, Exit.PENDING, Exit.CONFLICT, Exit.CAP, Exit.REJECTED,
                   Exit.RUNNING, Exit.UNSUCCESSFUL, Exit.BLOCKED, Exit.UNAVAILABLE, Exit.CONNECT}  # fmt: skip
    assert {int(c) for c in agent_codes} <= seen, {int(c) for c in agent_codes} - seen
