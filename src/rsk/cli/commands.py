"""Every command: the module that registers it and its one-line help (the single source of both)."""

COMMANDS: dict[str, tuple[str, str]] = {
    "launch": ("launch_cmd", "Plan a job on the cluster, check the ledger, and submit it exactly once."),
    "plan": ("launch_cmd", "Plan a launch and say how the ledger would decide now; files no card, submits nothing."),
    "init": ("launch_cmd", "Write the project file (.rsk.toml) here: commands below it use its project and target."),
    "wait": (
        "launch_cmd",
        "Wait for a card (then its launch), a job, a request or a batch: exit 0 done, 10 still running.",
    ),
    "status": ("ops_cmds", "State of the project's rsk jobs (one remote call for all of them)."),
    "events": ("ops_cmds", "What changed since a cursor: journal events and job state changes."),
    "logs": ("cluster_cmds", "Show a bounded tail of a job's stdout or stderr."),
    "fetch": ("cluster_cmds", "Bring files back from a job's directory (bounded, resumable; never outside it)."),
    "cancel": ("ops_cmds", "Cancel a job, a request or a batch this project launched (and only those)."),
    "reconcile": ("ops_cmds", "Resolve every intent without an outcome from Slurm's evidence; never resubmits."),
    "journal": ("cluster_cmds", "Show the project's attempt journal on the cluster (intent, outcome, ...)."),
    "watch": ("watch_cmd", "A live table of the project's batches and jobs."),
    "targets": ("cluster_cmds", "List the targets rsk can find."),
    "info": ("cluster_cmds", "What a target offers: partitions and limits, its policy, this project's grants left."),
    "gpus": ("cluster_cmds", "Every GPU of a target: free or held, and by which job (project, request id, since)."),
    "doctor": ("cluster_cmds", "Check a target end to end; exit 0 when nothing fails, 9 when a check fails."),
    "lease": ("lease_cmd", "Leases: one held allocation whose GPUs steps share, each step started within seconds."),
    "broker": (
        "broker_cmd",
        "A resident rsk holding the keys, the ledger and warm connections; agent commands use it.",
    ),
    "mcp": ("mcp_cmd", "Serve rsk's tools over MCP on stdio, pinned to one project and target (no human acts)."),
    "approvals": ("ledger_cmds", "List approval cards that wait for a human."),
    "approve": ("ledger_cmds", "Approve card CARD: its exact plan may run (once by default)."),
    "deny": ("ledger_cmds", "Deny card CARD; the reason reaches the agent."),
    "withdraw": ("ledger_cmds", "Withdraw your own pending card CARD (an agent that no longer needs the work)."),
    "grant": ("ledger_cmds", "Standing grants: scope, per-job ceilings, budgets, expiry."),
    "deny-rule": ("ledger_cmds", "Deny rules: they win over every approval and grant."),
}
GROUPS = {"grant", "deny-rule", "lease", "broker"}


def help_for(name: str, more: str = "") -> str:
    """A command's help: its one line, then more detail for its own --help."""
    return COMMANDS[name][1] + (f"\n\n{more}" if more else "")
