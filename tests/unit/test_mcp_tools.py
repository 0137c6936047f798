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
            got = await client.call_tool("status", {"batch": "wf-2"})  # status has no `batch`: not "every job"
            return bool(got.is_error), " ".join(getattr(c, "text", "") for c in got.content)

    failed, text = asyncio.run(run())
    assert failed and "batch" in text and "xtra" in text, text  # pydantic: "Extra inputs are not permitted"
    schema = listing()["tools"]["status"]["input"]
    assert schema.get("additionalProperties") is False
