"""Every command: the module that registers it, who may run it, and its one-line help (the single source of
all three). Standard library only: the broker's client reads it before anything heavy loads.

Who may run it (the audience), read by the CLI (rsk.cli.app), the broker and its client (rsk.broker.server,
rsk.broker_client) and the MCP server (rsk.mcp.server):

- agent: anyone; through the broker, also another user it lets in (--allow), within that user's projects
- owner: through the broker, only for the broker's own user (it opens or writes files as that user)
- human: a human's act: never through the broker, never an MCP tool
- here: always runs in the caller's own process (never sent to a broker)
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing takes ~10 ms to import (rsk.broker_client); mypy reads this as typing's
if TYPE_CHECKING:
    from typing import Literal

    Audience = Literal["agent", "owner", "human", "here"]


# what a client passes on to the broker of the caller's environment (rsk.broker_client, rsk.local.caller)
PASSED_ENV = ("RSK_PROJECT", "RSK_TARGET", "RSK_REQUESTER", "NO_COLOR", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT")
PASSED_PREFIXES = ("CODEX_", "PI_CODING_AGENT")


class Command:
    __slots__ = ("audience", "help", "module")

    def __init__(self, module: str, audience: Audience, help: str) -> None:
        self.module = module
        self.audience: Audience = audience
        self.help = help


_TABLE: dict[str, tuple[str, Audience, str]] = {
    "launch": ("launch_cmd", "agent", "Plan a job on the cluster, check the ledger, and submit it exactly once."),
    "plan": (
        "launch_cmd",
        "agent",
        "Plan a launch and say how the ledger would decide now; files no card, submits nothing.",
    ),
    "init": (
        "launch_cmd",
        "here",
        "Write the project file (.rsk.toml) here: commands below it use its project and target.",
    ),
    "wait": (
        "launch_cmd",
        "agent",
        "Wait for a card (then its launch), a job, a request or a batch: exit 0 all succeeded, 11 ended otherwise, "
        "12 blocked (can never start), 10 still running.",
    ),
    "retry": (
        "launch_cmd",
        "agent",
        "Launch again the tasks of a batch or workflow that did not succeed (and what they skipped).",
    ),
    "extend": (
        "launch_cmd",
        "agent",
        "Add links to a chain that stopped short of success or was cancelled, up to a new total (the extra decided).",
    ),
    "status": ("ops_cmds", "agent", "State of the project's rsk jobs (one remote call for all of them)."),
    "events": ("ops_cmds", "agent", "What changed since a cursor: journal events and job state changes."),
    "logs": ("cluster_cmds", "agent", "Show a bounded tail of a job's stdout or stderr."),
    "fetch": (
        "cluster_cmds",
        "owner",
        "Bring files back from a job's directory, or each task's of a batch (--batch; bounded, resumable).",
    ),
    "cancel": ("ops_cmds", "agent", "Cancel a job, a request or a batch this project launched (and only those)."),
    "reconcile": (
        "ops_cmds",
        "agent",
        "Resolve every intent without an outcome from Slurm's evidence; never resubmits.",
    ),
    "journal": ("cluster_cmds", "agent", "Show the project's attempt journal on the cluster (intent, outcome, ...)."),
    "watch": ("watch_cmd", "here", "A live table of the project's batches and jobs."),
    "targets": ("cluster_cmds", "agent", "List the targets rsk can find."),
    "info": (
        "cluster_cmds",
        "agent",
        "What a target offers: partitions and limits, its policy, this project's grants left.",
    ),
    "gpus": (
        "cluster_cmds",
        "agent",
        "Every GPU of a target: free or held, and by which job (project, request id, since).",
    ),
    "doctor": ("cluster_cmds", "owner", "Check a target end to end; exit 0 when nothing fails, 9 when a check fails."),
    "lease": (
        "lease_cmd",
        "agent",
        "Leases: one held allocation whose GPUs steps share, each step started within seconds.",
    ),
    "broker": (
        "broker_cmd",
        "here",
        "A resident rsk holding the keys, the ledger and warm connections; agent commands use it.",
    ),
    "mcp": (
        "mcp_cmd",
        "agent",
        "Serve rsk's tools over MCP on stdio, pinned to one project and target (no human acts).",
    ),
    "approvals": (
        "ledger_cmds",
        "agent",
        "List the approval cards that wait for a human in this project (--all-projects: every project's).",
    ),
    "approve": (
        "ledger_cmds",
        "human",
        "Approve card CARD: its request may run its exact plan (--uses N: N-1 more launches of it too).",
    ),
    "deny": ("ledger_cmds", "human", "Deny card CARD; the reason reaches the agent."),
    "withdraw": (
        "ledger_cmds",
        "agent",
        "Withdraw your own pending card CARD (an agent that no longer needs the work).",
    ),
    "grant": ("ledger_cmds", "human", "Standing grants: scope, per-job ceilings, budgets, expiry."),
    "deny-rule": ("ledger_cmds", "human", "Deny rules: they win over every approval and grant."),
    "ui": (
        "ui_cmd",
        "human",
        "The human's page on 127.0.0.1: cards with Approve and Deny, budgets, the board and GPUs.",
    ),
}
COMMANDS: dict[str, Command] = {name: Command(*row) for name, row in _TABLE.items()}
GROUPS = {"grant", "deny-rule", "lease", "broker"}
BROKERED = frozenset(n for n, c in COMMANDS.items() if c.audience in ("agent", "owner"))  # what a broker runs
HUMAN_ACTS = frozenset(n for n, c in COMMANDS.items() if c.audience == "human")


def audience(name: str) -> Audience | None:
    """Who may run the command `name`; None: no such command."""
    found = COMMANDS.get(name)
    return found.audience if found is not None else None


def help_for(name: str, more: str = "") -> str:
    """A command's help: its one line, then more detail for its own --help."""
    return COMMANDS[name].help + (f"\n\n{more}" if more else "")
