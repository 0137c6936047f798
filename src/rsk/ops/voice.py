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

    def step(self, lease: str) -> str:
        return self._say(f"launch --lease {lease} -- CMD", "launch", {"lease": lease, "command": "CMD"})

    def close(self, lease: str) -> str:
        return self._say(f"lease close {lease}", "lease_close", {"name": lease})


CLI = Voice()
TOOLS = Voice(tools=True)


_TOOL_OF = {"wait": "wait", "status": "status", "logs": "logs", "cancel": "cancel", "info": "info", "gpus": "gpus",
            "events": "events", "journal": "journal", "retry": "retry", "extend": "extend", "plan": "plan",
            "launch": "launch", "targets": "targets", "fetch": "fetch", "withdraw": "withdraw"}  # fmt: skip
# a command's option as the tool's argument (the rest are the option's name with `_`: --request-id is request_id)
_ARG_OF = {"-r": "request_id", "-b": "batch", "-t": "target", "-p": "project", "--tail": "lines", "--task": "tasks",
           "--drain": "drain_min"}  # fmt: skip
_FLAGS = frozenset({"--failed", "--partial", "--active", "--result", "--follow", "--verbose"})  # no value
_FIRST = {"wait": "job", "logs": "job", "cancel": "job", "status": "job", "fetch": "job", "withdraw": "card",
          "lease": "name"}  # fmt: skip


def _arg(option: str) -> str:
    return _ARG_OF.get(option, option.lstrip("-").replace("-", "_"))


def _call(command: str, rest: str) -> str | None:
    """`rsk COMMAND REST` as the tool call that does it (`call logs with job 12, stream stderr`), or None when
    no tool takes it as written."""
    words = rest.split()
    if command == "lease":
        if not words or words[0] not in ("open", "status", "close"):
            return None
        command, words = f"lease_{words[0]}", words[1:]
    args: list[tuple[str, str]] = []
    switches: set[str] = set()
    i = 0
    while i < len(words):
        w = words[i]
        if w == "--json" or w == "--":
            i += 1
            continue
        if not w.startswith("-"):
            if args or (command not in _FIRST and not command.startswith("lease_")):
                return None
            first = "card" if command == "wait" and w.startswith("c-") else _FIRST.get(command, "name")
            args.append((first, w))
        elif w in _FLAGS:
            switches.add(w)
            if w not in ("--result",):
                args.append((_arg(w), "true"))
        elif i + 1 < len(words):
            args.append((_arg(w), words[i + 1]))
            i += 1
        else:
            return None
        i += 1
    tool = _TOOL_OF.get(command, command if command.startswith("lease_") else "")
    given = dict(args)
    if tool == "fetch":
        tool = "fetch_batch" if "batch" in given else "fetch"
        if "--result" in switches:
            tool += "_result"
    elif "--result" in switches:
        return None
    if tool == "logs" and ("request_id" in given or "batch" in given):
        tool = "logs_request"
    if not tool:
        return None
    said = ", ".join(f"{k} {v}" for k, v in args if k not in ("target", "project"))  # the server is pinned
    return f"call {tool} with {said}" if said else f"the {tool} tool"


def for_tools(text: str) -> str:
    """A hint written for the shell, for an MCP agent, who has tools and no shell: each `rsk COMMAND ...` that a
    tool does becomes that call (`call wait with request_id r1`), an option named outside one the tool's
    argument (`--request-id` is `request_id`, `--tail` is `lines`), and `rsk approvals` the approvals tool. A
    human's command (`rsk approve`, `rsk deny`, `rsk ui`, ...) stays as it is, for the human."""
    import re

    def one(m: re.Match[str]) -> str:
        command, rest = m[1], m[2].strip()
        if command == "approvals" and not rest.startswith("show"):
            return "the approvals tool"
        if command not in _TOOL_OF and command != "lease":
            return m[0]
        call = _call(command, rest)
        if call is not None:
            return call
        tool = _TOOL_OF.get(command)
        return f"the {tool} tool" if tool else m[0]

    def outside(part: str) -> str:
        """Words outside backticks: a bare `rsk wait` is the wait tool; an option is the tool's argument."""
        part = re.sub(r"\brsk ([a-z]+)\b", lambda m: f"the {_TOOL_OF[m[1]]} tool" if m[1] in _TOOL_OF else m[0], part)
        return re.sub(r"(?<![\w-])(--[a-z][a-z-]*|-[rb])(?![\w-])", lambda m: f"`{_arg(m[1])}`", part)

    text = re.sub(r"`rsk ([a-z-]+)((?: [^`]*)?)`", one, text)
    pieces = re.split(r"(`[^`]*`)", text)  # what stays in backticks (a human's command) is left as it is
    return "".join(p if p.startswith("`") else outside(p) for p in pieces)
