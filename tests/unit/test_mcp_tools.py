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
    assert for_tools("then `rsk wait c-1`") == "then the wait tool (`rsk wait c-1`)"
    assert for_tools("`rsk fetch -r r7 --result --to d`") == "the fetch_result tool"
    assert for_tools("ask for `rsk approve c-1`") == "ask for `rsk approve c-1`"  # the human's act, for the human
