"""rsk mcp, driven over stdio by the MCP SDK's own client and by the MCP Inspector's CLI, against the lab."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult

from tests.conftest import ROOT, Lab, rsk
from tests.integration.helpers import grant, grant_view

Call = Callable[..., Awaitable[CallToolResult]]


def server_params(project: str, *extra: str, cwd: Path | None = None) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("RSK_", "XDG_", "NO_COLOR"))}
    env["PYTHONPATH"] = str(ROOT / "src")
    return StdioServerParameters(command=sys.executable, args=["-m", "rsk", "mcp", "--target", "lab", "--project",
                                 project, *extra], env=env, cwd=cwd)  # fmt: skip


@asynccontextmanager
async def session(project: str, *extra: str, cwd: Path | None = None) -> AsyncIterator[Client]:
    async with Client(server_params(project, *extra, cwd=cwd), read_timeout_seconds=180) as client:
        yield client


def body(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


def error(result: CallToolResult) -> dict[str, Any]:
    """A tool error: the CLI's JSON error as structured content, its text the same JSON, flagged is_error."""
    assert result.is_error and result.structured_content is not None
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text) == result.structured_content
    return dict(result.structured_content)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


def test_the_agents_loop_through_tools(lab: Lab, project: str, tmp_path: Path) -> None:
    grant(project, "--jobs", "3", "--max-time", "10")

    async def go() -> None:
        async with session(project, cwd=tmp_path) as c:
            first = body(await c.call_tool("events", {}))
            assert first["events"] == [] and first["summary"] == {}
            # inside the grant: submitted at once, and the same request id replays
            args = {"command": ["sh", "-c", "echo out-$((6*7)); echo err >&2"], "request_id": "m1", "time": "5"}
            done = body(await c.call_tool("launch", args))
            assert done["status"] == "submitted" and done["launch"]["allowed_by"]["kind"] == "grant"
            job = done["job_id"]
            assert job == done["launch"]["job_id"]  # at the top level, as `rsk launch --json` has it
            again = body(await c.call_tool("launch", args))
            assert again["status"] == "replayed" and again["launch"]["job_id"] == job
            waited = body(await c.call_tool("wait", {"job": job, "timeout": 45}))
            while waited["status"] == "running":
                waited = body(await c.call_tool("wait", {"job": job, "timeout": 45}))
            assert waited["status"] == "done" and waited["jobs"][0]["state"] == "succeeded"
            # events from the cursor: the request's journal lines and the job's changes
            ev = body(await c.call_tool("events", {"after": first["cursor"], "wait": 5}))
            assert {e["request_id"] for e in ev["events"]} == {"m1"}
            assert {e["journal"]["event"] for e in ev["events"] if e["kind"] == "journal"} >= {"intent", "accepted"}
            # logs: a tail, then only what is new after it (nothing: the job ended)
            tail = body(await c.call_tool("logs", {"job": job}))
            assert tail["text"] == "out-42\n" and tail["end"]["exit_code"] == 0 and tail["state"] == "succeeded"
            assert body(await c.call_tool("logs", {"job": job, "stream": "stderr"}))["text"] == "err\n"
            newer = body(await c.call_tool("logs", {"job": job, "after": tail["size"]}))
            assert newer["text"] == "" and newer["start"] == tail["size"] and not newer["gap"]
            part = body(await c.call_tool("logs", {"job": job, "after": 4}))
            assert part["text"] == "42\n" and part["start"] == 4
            # a request's logs, each job labelled, as `rsk logs -r` has them
            each = body(await c.call_tool("logs_request", {"request_id": "m1", "stream": "stderr"}))
            assert [(t["job_id"], t["text"], t["state"]) for t in each["logs"]] == [(job, "err\n", "succeeded")]
            st = body(await c.call_tool("status", {"request_id": "m1"}))
            assert [j["job_id"] for j in st["jobs"]] == [job] and st["counts"] == {"succeeded": 1}
            jr = body(await c.call_tool("journal", {}))
            assert jr["chain_ok"] and [e["event"] for e in jr["events"]][:2] == ["intent", "accepted"]
            # an expired cursor starts afresh instead of failing
            stale = first["cursor"].split(".")[0] + ".0123456789ab"
            fresh = body(await c.call_tool("events", {"after": stale}))
            assert fresh["reset"] is True and fresh["summary"] == {"succeeded": 1} and fresh["events"] == []
            # fetch brings a job's file into the working directory by default
            wrote = body(await c.call_tool("launch", {"command": ["sh", "-c", 'echo hi > "$RSK_RUN_DIR/r.txt"'],
                                                      "request_id": "m2", "time": "5"}))  # fmt: skip
            job2 = wrote["launch"]["job_id"]
            while body(await c.call_tool("wait", {"job": job2, "timeout": 45}))["status"] != "done":
                pass
            got = body(await c.call_tool("fetch", {"job": job2, "paths": ["r.txt"]}))
            assert got["bytes"] == 3 and (tmp_path / "rsk-results" / job2 / "r.txt").read_text() == "hi\n"

    run(go)
    view = grant_view(project)
    assert view["jobs_spent"] + view["jobs_reserved"] == 2  # two launches, one replay: two jobs charged


def test_a_pending_launch_names_its_card_and_no_tool_decides_it(lab: Lab, project: str) -> None:
    async def go() -> str:
        async with session(project) as c:
            pending = body(await c.call_tool("launch", {"command": ["echo", "needs-a-human"], "request_id": "p1"}))
            assert pending["status"] == "pending" and pending["launch"] is None
            card = pending["card_id"]
            assert card.startswith("c-") and f"rsk approve {card}" in pending["tell_human"]
            # the sentence is addressed to the human; what the agent does next is a field of its own
            assert pending["tell_human"].startswith(f"rsk needs your approval for card {card}")
            assert "wait" not in pending["tell_human"] and card in pending["next"] and "wait" in pending["next"]
            # the agent waits; the card stays pending
            w = body(await c.call_tool("wait", {"card": card, "timeout": 1}))
            assert w["status"] == "pending" and w["card_id"] == card
            listed = body(await c.call_tool("approvals", {}))
            assert [x["id"] for x in listed["cards"]] == [card] and listed["cards"][0]["status"] == "pending"
            # forged calls: tools that do not exist, under every name a human act goes by
            for name, args in [("approve", {"card": card}), ("approve_card", {"card_id": card, "yes": True}),
                               ("grant", {"jobs": 100}), ("deny", {"card": card}),
                               ("deny_rule", {"pattern": "x"})]:  # fmt: skip
                forged = await c.call_tool(name, args)
                assert forged.is_error and "Unknown tool" in forged.content[0].text  # type: ignore[union-attr]
            # an argument that claims a human's consent is refused as an unknown argument, or changes nothing
            smuggled = await c.call_tool("launch", {"command": ["echo", "needs-a-human"], "request_id": "p1",
                                                    "yes": True, "approved": True})  # fmt: skip
            if not smuggled.is_error:
                assert body(smuggled)["status"] == "pending"
            # the same request retried is the same card, not a new one
            again = body(await c.call_tool("launch", {"command": ["echo", "needs-a-human"], "request_id": "p1"}))
            assert again["card_id"] == card
            still = body(await c.call_tool("approvals", {"include_decided": True}))
            assert [(x["id"], x["status"]) for x in still["cards"]] == [(card, "pending")]
            return str(card)

    card = asyncio.run(go())
    assert lab.journal(project) == []  # nothing reached Slurm
    ledger = json.loads(rsk("grant", "list", "--project", project, "--json").out)["grants"]
    assert ledger == []  # no grant appeared
    # the human approves in a terminal; the agent's wait then launches it
    assert rsk("approve", card, "--project", project, "--yes").rc == 0

    async def after() -> None:
        async with session(project) as c:
            w = body(await c.call_tool("wait", {"card": card, "timeout": 45}))
            assert w["launch"]["allowed_by"]["kind"] == "approval" and w["launch"]["allowed_by"]["id"]

    run(after)


def test_cancel_and_errors_are_the_clis(lab: Lab, project: str) -> None:
    grant(project, "--jobs", "2", "--max-time", "10")

    async def go() -> None:
        async with session(project, "--max-wait", "3") as c:
            long = body(await c.call_tool("launch", {"command": ["sleep", "300"], "request_id": "c1", "time": "5"}))
            job = long["launch"]["job_id"]
            # a wait never blocks past the server's bound, whatever the agent asks
            w = body(await c.call_tool("wait", {"job": job, "timeout": 600}))
            assert w["status"] == "running" and w["waited_s"] < 10
            cancelled = body(await c.call_tool("cancel", {"job": job}))
            assert [r["result"] for r in cancelled["results"]] == ["cancelled"]
            # errors carry the CLI's code, exit code and hint
            bad = error(await c.call_tool("launch", {"command": ["true"], "env": ["PATH=/tmp"]}))
            assert bad["error"] == "usage" and bad["exit_code"] == 2 and bad["hint"]
            none = error(await c.call_tool("wait", {"job": "999999999"}))
            assert none["error"] == "not-ours" and "status tool" in none["hint"], none
            both = error(await c.call_tool("launch", {"command": ["true"], "script": "#!/bin/sh\ntrue\n"}))
            assert "exactly one" in both["message"]

    run(go)


def test_the_mcp_inspector_lists_the_tools(lab: Lab, project: str) -> None:
    npm_root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True, check=False).stdout.strip()
    pkg = Path(npm_root) / "@modelcontextprotocol" / "inspector-cli"
    assert pkg.is_dir() and shutil.which("node"), "install it: npm install -g @modelcontextprotocol/inspector-cli"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    # the inspector looks for its package.json relative to the working directory: run it from its build folder
    r = subprocess.run(
        ["node", str(pkg / "build" / "cli.js"), "--cli", sys.executable, "-m", "rsk", "mcp", "--target", "lab",
         "--project", project, "--method", "tools/list"],
        capture_output=True, text=True, env=env, cwd=pkg / "build", timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    listed = json.loads(r.stdout[r.stdout.index("{") :])
    names = {t["name"] for t in listed["tools"]}
    assert names == set(json.loads((ROOT / "tests/unit/snapshots/mcp_tools.json").read_text())["tools"])


def test_a_missing_target_or_project_file_is_a_clear_error(lab: Lab, tmp_path: Path) -> None:
    r = rsk("mcp", "--target", "nowhere")
    assert r.rc == 2 and "no target named 'nowhere'" in r.err and r.out == ""


def test_the_tools_take_what_the_commands_take_batch_env_and_withdraw(lab: Lab, project: str, tmp_path: Path) -> None:
    grant(project, "--jobs", "3", "--max-time", "10")

    async def go() -> None:
        async with session(project, cwd=tmp_path) as c:
            tasks = [{"key": k, "argv": ["sh", "-c", f'echo "$GREETING {k}" > "$RSK_OUT/m.txt"']} for k in ("a", "b")]
            sub = body(await c.call_tool("launch", {"tasks": tasks, "request_id": "mb", "time": "5",
                                                    "env": {"GREETING": "hi"}}))  # fmt: skip
            assert sub["status"] == "submitted", sub
            while body(await c.call_tool("wait", {"batch": "mb", "timeout": 45}))["status"] != "done":
                pass
            st = body(await c.call_tool("status", {"batch": "mb"}))
            assert sorted(j["task"] for j in st["jobs"]) == ["a", "b"]
            res = body(await c.call_tool("fetch_batch_result", {"batch": "mb"}))
            assert res["fetched"] == 2 and res["without"] == [], res
            assert (tmp_path / "rsk-results" / "mb" / "a" / "m.txt").read_text() == "hi a\n"
            # a card the agent no longer needs, withdrawn by the agent (never approved or denied by a tool)
            pending = body(await c.call_tool("launch", {"command": ["true"], "request_id": "mw", "time": "60"}))
            assert pending["status"] == "pending"
            gone = body(await c.call_tool("withdraw", {"card": pending["card_id"]}))
            assert gone["status"] == "withdrawn" and gone["card_id"] == pending["card_id"]
            assert body(await c.call_tool("approvals", {}))["cards"] == []

    run(go)


def test_extend_takes_max_links_as_rsk_extend_does(lab: Lab, project: str) -> None:
    """A chain that spent its budget goes on through the `extend` tool, which refuses an extension needing more
    links than its max_links, as `rsk extend --max-links` does, and plans one within it."""
    grant(project, "--cpu-hours", "1", "--jobs", "4")

    async def go() -> None:
        async with session(project) as c:
            args = {"command": ["sh", "-c", "exit 75"], "request_id": "ml", "budget": "2", "time": "1",
                    "signal_before": "0:30", "mem": "100M"}  # fmt: skip
            assert body(await c.call_tool("launch", args))["status"] == "submitted"
            waited = body(await c.call_tool("wait", {"request_id": "ml", "timeout": 45}))
            while waited["status"] == "running":
                waited = body(await c.call_tool("wait", {"request_id": "ml", "timeout": 45}))
            assert [j["state"] for j in waited["jobs"]] == ["stopped", "stopped"], waited
            refused = error(await c.call_tool("extend", {"request_id": "ml", "budget": "4", "max_links": 1}))
            assert refused["error"] == "usage" and "at most 1" in refused["message"], refused
            bad = await c.call_tool("extend", {"request_id": "ml", "budget": "4", "max_links": 0})
            assert bad.is_error  # at least one link, as --max-links
            more = body(await c.call_tool("extend", {"request_id": "ml", "budget": "4", "max_links": 2}))
            assert more["status"] == "submitted", more
            assert [t["task"] for t in more["launch"]["tasks"]] == ["link3", "link4"], more
            body(await c.call_tool("cancel", {"request_id": "ml.a2"}))

    run(go)
