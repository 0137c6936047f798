"""How an answer names the agent's next step: a shell command for the CLI, a tool call for the MCP server.

The same hint reads `rsk logs 123 --stream stderr` in a shell and `call logs with job 123, stream stderr` over
MCP, where an agent has tools and no shell. Core code that writes hints takes a Voice; CLI is the default.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Voice:
    tools: bool = False  # True: MCP tool calls

    def _say(self, command: str, tool: str, args: dict[str, str]) -> str:
        if self.tools:
            given = ", ".join(f"{k} {v}" for k, v in args.items())
            return f"call {tool}" + (f" with {given}" if given else "")
        return f"`rsk {command}`"

    def wait(self, card: str = "", job: str = "", request_id: str = "", batch: str = "", scope: str = "") -> str:
        if card:
            return self._say(f"wait {card}{scope}", "wait", {"card": card})
        if job:
            return self._say(f"wait {job}{scope}", "wait", {"job": job})
        if batch:
            return self._say(f"wait --batch {batch}{scope}", "wait", {"batch": batch})
        return self._say(f"wait --request-id {request_id}{scope}", "wait", {"request_id": request_id})

    def again(self) -> str:
        return (
            "call wait again with the same arguments" if self.tools else "call `rsk wait` again with the same arguments"
        )

    def logs(self, job: str, stream: str = "") -> str:
        extra = {"stream": stream} if stream else {}
        return self._say(f"logs {job}" + (f" --stream {stream}" if stream else ""), "logs", {"job": job, **extra})

    def cancel(self, job: str) -> str:
        return self._say(f"cancel {job}", "cancel", {"job": job})

    def retry(self, batch: str) -> str:
        return self._say(f"retry --batch {batch} --failed", "retry", {"batch": batch, "failed": "true"})

    def code_option(self) -> str:
        return "the code argument" if self.tools else "--code DIR"

    def extend(self, request_id: str) -> str:
        return self._say(f"extend --request-id {request_id} --budget D", "extend",
                         {"request_id": request_id, "budget": "D"})  # fmt: skip

    def status(self) -> str:
        return self._say("status --json", "status", {})

    def info(self) -> str:
        return self._say("info", "info", {})


CLI = Voice()
TOOLS = Voice(tools=True)


_TOOL_OF = {"wait": "wait", "status": "status", "logs": "logs", "cancel": "cancel", "info": "info", "gpus": "gpus",
            "events": "events", "journal": "journal", "retry": "retry", "extend": "extend", "plan": "plan",
            "launch": "launch", "targets": "targets", "fetch": "fetch"}  # fmt: skip


def for_tools(text: str) -> str:
    """A hint written for the shell, for an MCP agent: each `rsk COMMAND ...` that is also a tool names the tool
    (the command stays beside it, for its arguments); `rsk approvals` is the approvals tool; a human's command
    (`rsk approve`, `rsk deny`, `rsk ui`, ...) stays as it is, for the human."""
    import re

    def one(m: re.Match[str]) -> str:
        command, rest = m[1], m[2].strip()
        if command == "approvals" and not rest.startswith("show"):
            return "the approvals tool"
        if command == "lease" and rest.split(" ")[:1] in (["open"], ["status"], ["close"]):
            return f"the lease_{rest.split(' ')[0]} tool"
        if command == "fetch" and "--result" in rest:
            return "the fetch_result tool"
        tool = _TOOL_OF.get(command)
        if tool is None:
            return m[0]
        return f"the {tool} tool" + (f" ({m[0]})" if rest and not rest.startswith("--json") else "")

    return re.sub(r"`rsk ([a-z-]+)((?: [^`]*)?)`", one, text)
