"""The MCP server's tool list is an interface agents are configured against: names and schemas change
only on purpose (RSK_UPDATE_SNAPSHOTS=1 rewrites the snapshot, and the diff is reviewed)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from mcp import Client

from rsk.mcp.server import HUMAN_ONLY, Pin, build

SNAPSHOT = Path(__file__).parent / "snapshots" / "mcp_tools.json"


def listing() -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async with Client(build(Pin(project="p", target="lab"))) as client:
            tools = (await client.list_tools()).tools
            prompts = (await client.list_prompts()).prompts
            return {
                "tools": {t.name: {"input": t.input_schema, "output": t.output_schema} for t in tools},
                "prompts": sorted(p.name for p in prompts),
            }

    return asyncio.run(run())


def test_tool_names_and_schemas_match_the_snapshot() -> None:
    now = listing()
    if os.environ.get("RSK_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    assert now == json.loads(SNAPSHOT.read_text()), "tool schemas changed: review, then RSK_UPDATE_SNAPSHOTS=1"


def test_no_tool_does_a_humans_act() -> None:
    names = set(listing()["tools"])
    assert names >= {"plan", "launch", "wait", "status", "events", "logs", "cancel", "journal", "approvals", "fetch"}
    assert not names & {n.replace("-", "_") for n in HUMAN_ONLY} and not names & set(HUMAN_ONLY)
    assert not [n for n in names if any(w in n for w in ("approve", "grant", "deny", "rule"))]


def test_every_tool_returns_structured_output() -> None:
    tools = listing()["tools"]
    assert all(t["output"] for t in tools.values()), [n for n, t in tools.items() if not t["output"]]
    # a launch's answer names its card and what to tell the human
    assert {"status", "card_id", "tell_human", "launch"} <= set(tools["launch"]["output"]["properties"])


def test_an_argument_a_tool_does_not_take_is_refused_never_dropped() -> None:
    async def run() -> tuple[bool, str]:
        async with Client(build(Pin(project="p", target="lab"))) as client:
            got = await client.call_tool("status", {"batc": "wf-2"})  # a misspelt `batch`: not "every job"
            return bool(got.is_error), " ".join(getattr(c, "text", "") for c in got.content)

    failed, text = asyncio.run(run())
    assert failed and "batc" in text and "xtra" in text, text  # pydantic: "Extra inputs are not permitted"
    doc = json.loads(text)  # the CLI's JSON error, as every other refusal of a tool
    assert doc["error"] == "bad-arguments" and doc["exit_code"] == 2 and doc["message"].startswith("status: batc: ")
    assert "tools/list" in doc["hint"] and "wf-2" not in text  # the field, never the value sent
    schema = listing()["tools"]["status"]["input"]
    assert schema.get("additionalProperties") is False


def test_a_pending_wait_answers_as_a_pending_launch_does_naming_tools_not_shell_commands(rsk_env: Path) -> None:
    """One shape for "a human must answer": status pending, card_id, request_id, tell_human and next, whether
    from launch or from wait; the next step is a tool call (an MCP agent has no shell)."""
    from tests.ui_cards import file_card

    card = file_card("p")

    async def run() -> dict[str, Any]:
        async with Client(build(Pin(project="p", target="lab"))) as client:
            got = await client.call_tool("wait", {"card": card.id, "timeout": 1})
            assert not got.is_error, got
            return dict(got.structured_content or {})

    w = asyncio.run(run())
    assert w["status"] == "pending" and w["card_id"] == card.id and w["request_id"] == card.request_id
    assert w["target"] == "lab" and f"rsk approve {card.id}" in w["tell_human"]  # addressed to the human
    assert w["next"] == f"call wait with card {card.id}" and "rsk " not in w["next"] + w["hint"]
    launch = set(listing()["tools"]["launch"]["output"]["properties"])
    assert {"status", "card_id", "request_id", "tell_human", "next", "message"} <= launch & set(w)


def test_hints_name_the_tool_for_mcp_and_the_command_for_the_shell() -> None:
    from rsk.ops.voice import CLI, TOOLS

    assert CLI.logs("12", "stderr") == "`rsk logs 12 --stream stderr`"
    assert TOOLS.logs("12", "stderr") == "call logs with job 12, stream stderr"
    assert TOOLS.wait(card="c-1") == "call wait with card c-1" and CLI.wait(card="c-1") == "`rsk wait c-1`"
    assert TOOLS.extend("run-7").startswith("call extend with request_id run-7")


def test_an_errors_hint_over_mcp_names_the_tool_not_the_shell_command(rsk_env: Path) -> None:
    from tests.ui_cards import file_card

    file_card("p")

    async def run() -> dict[str, Any]:
        async with Client(build(Pin(project="p", target="lab"))) as client:
            got = await client.call_tool("wait", {"card": "c-000000000000"})
            assert got.is_error
            return dict(got.structured_content or {})

    err = asyncio.run(run())
    assert err["error"] == "not-found" and "approvals tool" in str(err["hint"]) and "`rsk " not in str(err["hint"]), err


def test_shell_hints_become_tool_hints_but_a_humans_commands_stay() -> None:
    from rsk.ops.voice import for_tools

    assert for_tools("`rsk status` lists them") == "the status tool lists them"
    assert for_tools("then `rsk wait c-1`") == "then call wait with card c-1"
    assert for_tools("`rsk fetch -r r7 --result --to d`") == "call fetch_result with request_id r7, to d"
    assert for_tools("ask for `rsk approve c-1`") == "ask for `rsk approve c-1`"  # the human's act, for the human
    assert for_tools("`rsk approve c-1 --yes`") == "`rsk approve c-1 --yes`"  # its options too
    # a command's options are the tool's arguments; the command a tool does is that tool's call
    assert for_tools("`rsk logs 12 --stream stderr --tail 5`") == "call logs with job 12, stream stderr, lines 5"
    assert for_tools("`rsk logs -r run-7`") == "call logs_request with request_id run-7"
    assert for_tools("`rsk fetch --batch s1 --result`") == "call fetch_batch_result with batch s1"
    assert for_tools("`rsk fetch 12 --result --partial --to d`") == "call fetch_result with job 12, partial true, to d"
    assert for_tools("`rsk withdraw c-2` first") == "call withdraw with card c-2 first"
    assert for_tools("`rsk lease status` shows it") == "the lease_status tool shows it"
    assert for_tools("`rsk extend --request-id r --budget D`") == "call extend with request_id r, budget D"
    assert for_tools("`rsk status -p other`") == "the status tool"  # the server is pinned to its project
    # an option named in a sentence is the tool's argument; a bare command its tool
    assert for_tools("launch again with --request-id r1") == "launch again with `request_id` r1"
    assert for_tools("give --to a new directory; rsk status shows it") == (
        "give `to` a new directory; the status tool shows it"
    )
    assert "--" not in for_tools("ask for GPUs with --gpus N, --tail 5")


def test_every_tool_a_hint_names_is_a_tool() -> None:
    """A hint over MCP never names a tool the server does not have."""
    import re

    from rsk.ops.voice import _FIRST, _TOOL_OF, for_tools

    tools = {t.name for t in build(Pin(project="p", target="lab"))._tool_manager.list_tools()}
    named = set(_TOOL_OF.values()) | {"fetch_result", "fetch_batch", "fetch_batch_result", "logs_request"}
    named |= {f"lease_{x}" for x in ("open", "status", "close")}
    assert named <= tools, named - tools
    assert set(_FIRST) - {"lease"} <= tools
    for text in ("`rsk fetch --batch b x`", "`rsk logs -b b`", "`rsk lease open dev`", "`rsk lease close dev`"):
        tool = re.match(r"(?:call|the) (\w+)", for_tools(text))
        assert tool and tool[1] in tools, text


def test_an_answers_hints_and_warnings_name_tools_and_the_records_it_carries_stay_as_kept() -> None:
    from rsk.ledger.grants import GrantView
    from rsk.ledger.models import Grant
    from rsk.mcp.server import _voiced
    from rsk.ops.info import TargetInfo
    from rsk.ops.leases import LeaseList
    from rsk.ops.logs import LogSet, LogTail

    said = _voiced(LeaseList(target="lab", project="p", leases=[], warnings=["see `rsk status --json`; give --mem"]))
    assert isinstance(said, LeaseList) and said.warnings == ["see the status tool; give `mem`"]
    tail = LogTail(job_id="1", request_id="r", stream="stdout", started=True, ended=None, size=0, text="--x",
                   note="stdout is empty: `rsk logs 1 --stream stderr`")  # fmt: skip
    nested = _voiced(LogSet(target="lab", project="p", request_id="r", stream="stdout", logs=[tail]))
    assert isinstance(nested, LogSet) and nested.logs[0].note == "stdout is empty: call logs with job 1, stream stderr"
    assert nested.logs[0].text == "--x"  # what a job wrote is its own
    view = GrantView(grant=Grant(note="for `rsk status` --fast"), status="active", jobs_spent=0, jobs_reserved=0,
                     jobs_left=None, gpu_hours_spent=0, gpu_hours_reserved=0, gpu_hours_left=None,
                     cpu_hours_spent=0, cpu_hours_reserved=0, cpu_hours_left=None)  # fmt: skip
    kept = _voiced(TargetInfo(target="lab", project="p", partitions=[], policy=_policy(), grants=[view]))
    assert isinstance(kept, TargetInfo) and kept.grants[0].grant.note == "for `rsk status` --fast"  # the human's


def _policy() -> Any:
    from rsk.wire.answers import Policy

    return Policy.model_validate(dict.fromkeys(Policy.model_fields))


def test_mcp_help_shows_how_a_host_registers_the_server_and_what_fixes_the_project() -> None:
    import typer.main

    from rsk.cli.app import app, register_all

    register_all()
    text = typer.main.get_command(app).get_command(None, "mcp").help  # type: ignore[attr-defined]
    assert '{"mcpServers": {"rsk": {"command": "/path/to/rsk", "args": ["mcp"]}}}' in text
    assert "working directory the host starts it in" in text and '"--project", "P"' in text
    assert '"mcpServers"' in (SNAPSHOT.parents[3] / "docs" / "mcp.md").read_text()


def test_an_unknown_tool_is_the_clis_json_error_and_a_time_may_be_a_number(rsk_env: Path) -> None:
    """A tool that does not exist (a human's act, say) is refused as every refusal is: the CLI's JSON error. A time
    limit given as a JSON number is minutes, as `--time 30` is (it was refused as no string)."""

    async def run() -> tuple[str, str]:
        async with Client(build(Pin(project="p", target="nowhere"))) as client:
            forged = await client.call_tool("approve", {"card": "c-1"})
            timed = await client.call_tool("plan", {"command": ["true"], "time": 2})
            return (" ".join(getattr(c, "text", "") for c in forged.content),
                    " ".join(getattr(c, "text", "") for c in timed.content))  # fmt: skip

    forged, timed = asyncio.run(run())
    doc = json.loads(forged)
    assert doc["error"] == "unknown-tool" and doc["message"] == "Unknown tool: approve" and "human" in doc["hint"]
    assert "bad-arguments" not in timed and "time" not in json.loads(timed).get("message", "").split(":")[0], timed
