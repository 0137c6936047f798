"""The agent skill: valid Agent Skills front matter, and its instructions work as written on the lab."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from rsk.errors import Exit
from tests.conftest import ROOT, Lab, rsk

SKILL = ROOT / "skills" / "rsk" / "SKILL.md"


def front_matter() -> tuple[dict[str, str], str]:
    text = SKILL.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    head, _, body = text[4:].partition("\n---\n")
    fields = {}
    for line in head.splitlines():
        key, sep, value = line.partition(":")
        assert sep, f"front matter line is not key: value: {line!r}"
        fields[key.strip()] = value.strip()
    return fields, body


def test_front_matter_follows_the_agent_skills_format() -> None:
    fields, body = front_matter()
    assert set(fields) == {"name", "description"}
    assert fields["name"] == SKILL.parent.name == "rsk"
    assert re.fullmatch(r"[a-z0-9-]{1,64}", fields["name"])
    assert 0 < len(fields["description"]) <= 1024
    assert "Slurm" in fields["description"] and "Use whenever" in fields["description"]
    assert len(body.splitlines()) < 500
    for link in re.findall(r"\]\((references/[^)]+)\)", body):
        assert (SKILL.parent / link).is_file(), link


def skill_commands() -> set[str]:
    """The rsk subcommands the skill tells agents to run (from its code blocks and table)."""
    _, body = front_matter()
    return set(re.findall(r"`?rsk ([a-z-]+)", body))


def test_skill_names_only_agent_commands() -> None:
    named = skill_commands()
    assert {"launch", "wait", "status", "events", "logs", "cancel", "journal", "targets"} <= named
    human_only = {"grant", "deny-rule"}
    _, body = front_matter()
    _, sep, rest = body.partition("## Start")
    assert sep, "the skill's agent sections start at '## Start'"
    assert not human_only & set(re.findall(r"`?rsk ([a-z-]+)", rest)), "agent sections must not use human commands"


def test_an_agent_following_the_skill(lab: Lab, project: str) -> None:
    """launch -> pending -> a human approves -> wait -> running -> logs -> cancel, as the skill says."""
    used: set[str] = set()

    def agent(command: str, *args: str) -> tuple[int, dict[str, object]]:
        used.add(command)
        r = rsk(command, "--target", "lab", "--project", project, "--json", *args)
        return r.rc, json.loads(r.out) if r.out.strip() else {}

    rc, ev = agent("events")  # a cursor from before the job exists, so its first state is a change
    cursor = ev["cursor"]
    rc, body = agent("launch", "--request-id", "skill-1", "--", "sh", "-c", "echo started; sleep 300")
    assert rc == Exit.PENDING  # the skill: tell the human the card id, then rsk wait CARD
    card = str(body["card_id"])
    waiter = subprocess.Popen(
        ["python3", "-m", "rsk", "wait", card, "--project", project, "--timeout", "20", "--json"],
        stdout=subprocess.PIPE, text=True, env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    used.add("wait")
    # the human, in their own terminal
    assert rsk("approvals", "--project", project).rc == 0
    assert rsk("approve", card, "--project", project, "--yes").rc == 0
    out, _ = waiter.communicate(timeout=120)
    assert waiter.returncode == Exit.RUNNING  # approved and submitted; the job still runs: call again
    job = json.loads(out)["launch"]["job_id"]
    deadline = time.monotonic() + 90
    state = ""
    while state != "running":
        assert time.monotonic() < deadline
        rc, ev = agent("events", "--after", str(cursor), "--wait", "30")
        cursor = ev["cursor"]
        for e in ev["events"]:  # type: ignore[union-attr]
            if e["kind"] == "state" and e["job_id"] == job:
                state = e["new_state"]
    rc, st = agent("status")
    assert [j["state"] for j in st["jobs"] if j["job_id"] == job] == ["running"]  # type: ignore[union-attr]
    deadline = time.monotonic() + 30
    while True:
        rc, logs = agent("logs", job)
        if logs.get("text") == "started\n" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert logs["text"] == "started\n"
    rc, cancelled = agent("cancel", job)
    assert [r["result"] for r in cancelled["results"]] == ["cancelled"]  # type: ignore[index]
    assert used <= skill_commands(), f"the agent used commands the skill does not name: {used - skill_commands()}"


def skill_command_lines() -> list[str]:
    """Every `rsk ...` line of the skill's shell blocks, comments removed."""
    text = (ROOT / "skills" / "rsk" / "SKILL.md").read_text()
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("rsk "):
                lines.append(line)
    return lines


def test_every_command_in_the_skill_runs_as_written(lab: Lab, project: str, tmp_path: Path) -> None:
    """The skill's commands, literally (hpc is the lab, myproj this test's project; JOB, CARD and CURSOR
    are real ones), from a fresh working tree: none is a usage error, none crashes."""
    import shlex

    from tests.integration.helpers import grant, in_tree

    tree = tmp_path / "work"
    tree.mkdir()
    lines = skill_command_lines()
    assert any(line.startswith("rsk init") for line in lines) and len(lines) >= 15
    init = next(line for line in lines if line.startswith("rsk init"))
    words = shlex.split(init.replace("myproj", project).replace("hpc", "lab"))
    assert in_tree(tree, *words[1:]).rc == 0
    grant(project, "--jobs", "20", "--gpu-hours", "50", "--max-gpus", "2")
    tasks = tree / "sweep.jsonl"  # the skill's own batch example
    tasks.write_text(
        "\n".join(re.findall(r"^\{\"key\".*\}$", (ROOT / "skills/rsk/SKILL.md").read_text(), re.MULTILINE))
    )
    assert in_tree(tree, "launch", "--request-id", "sweep-1", "--tasks", str(tasks), "--json").rc == 0
    card = json.loads(in_tree(tree, "launch", "-r", "big", "--gpus", "3", "--json", "--", "true").out)["card_id"]
    job = ""
    cursor = json.loads(in_tree(tree, "events", "--json").out)["cursor"]
    for line in lines:
        if line.startswith("rsk init"):
            continue
        text = line.replace("hpc", "lab").replace("myproj", project).replace("CURSOR", cursor).replace("CARD", card)
        text = text.replace("JOB", job or "0")
        if line.startswith("rsk wait CARD"):  # the human answers first: a card nobody answers waits its 100 s
            assert rsk("approve", card, "--project", project, "--yes").rc == 0
        r = in_tree(tree, *shlex.split(text)[1:], timeout=200)
        assert r.rc not in (1, 2) and "Traceback" not in r.err, (line, r.rc, r.err)
        if line.startswith("rsk launch"):
            job = json.loads(r.out)["job_id"]
