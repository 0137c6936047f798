"""Shared CLI pieces: options, output on the right stream, the human check."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rsk.errors import NeedsHuman, UsageError

if TYPE_CHECKING:
    from pydantic import BaseModel
    from rich.console import Console

ProjectOpt = Annotated[
    str | None,
    typer.Option(
        "--project",
        "-p",
        help="Project (ledger and journal); default: $RSK_PROJECT, else the project file (rsk init), else the shared "
        "'default' (to read; work that asks for resources must name it).",
    ),
]
TargetOpt = Annotated[
    str | None,
    typer.Option(
        "--target",
        "-t",
        help="Target name (~/.config/rsk/targets/NAME.toml); default: $RSK_TARGET, else the project file, else the "
        "only one.",
    ),
]
StateOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--state",
        metavar="STATE",
        help="List only jobs in this state (repeatable): failed, timed-out, cancelled, skipped, "
        "blocked, pending, running, succeeded, ... `counts` still count every job selected.",
    ),
]
SummaryOpt = Annotated[
    bool | None,
    typer.Option(
        "--summary/--all",
        help="--summary: list only the jobs that need attention (not succeeded, running "
        "or pending; at most 50), with `counts` of every one; --all: list every job. Default with --json: a "
        "summary when more than 50 jobs are selected.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout (for agents).")]
AllTasksOpt = Annotated[
    bool,
    typer.Option(
        "--all",
        help="With --json, list every task of a batch; without it a batch of more than 50 lists its first 50 and "
        "says how many more (tasks_omitted; `rsk status --batch ID --all --json` lists every job).",
    ),
]
YesOpt = Annotated[
    bool,
    typer.Option("--yes", help="Confirm without a terminal. A deliberate act: agents must not pass it."),
]


class Plain:
    """Plain lines on stdout or stderr: most output needs no Rich, and Rich costs ~60 ms to import."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def print(self, text: object = "") -> None:
        self.stream.write(f"{text}\n")


def out() -> Plain:
    """The caller's standard output (in the broker, its client's)."""
    from rsk.local import caller

    return Plain(caller.stdout())


def err() -> Plain:
    from rsk.local import caller

    return Plain(caller.stderr())


def to_terminal() -> bool:
    """Whether the caller's standard output is a terminal (in the broker, its client's)."""
    from rsk.local import caller

    c = caller.current()
    return c.tty if c is not None else caller.stdout().isatty()


def rich_out() -> Console:
    """A Rich console for tables and live views."""
    from rich.console import Console

    from rsk.local import caller

    # a pipe or file gets wide lines instead of Rich's default of 80 columns; in the broker, the client's
    c = caller.current()
    stream = caller.stdout()
    tty = to_terminal()
    width: int | None = 200
    if tty:
        width = c.columns if c is not None else None
    return Console(file=stream, no_color=bool(caller.getenv("NO_COLOR")), highlight=False, soft_wrap=True,
                   width=width)  # fmt: skip


def print_json(data: BaseModel | dict[str, Any]) -> None:
    """One JSON document: always an object with its schema_version (a list goes in a named field)."""
    from pydantic import BaseModel

    if isinstance(data, BaseModel):
        text = data.model_dump_json(indent=2)
        keys = set(type(data).model_fields)
    else:
        text = json.dumps(data, indent=2, default=str)
        keys = set(data)
    if "schema_version" not in keys:
        raise AssertionError(f"a --json answer without schema_version: {type(data).__name__}")
    out().stream.write(text + "\n")


def require_human(action: str, yes: bool) -> None:
    """Approving, granting and denying need a human: a terminal, or an explicit --yes; never through the broker
    (whose --yes would be anyone's)."""
    from rsk.local import caller

    if caller.current() is not None:
        raise NeedsHuman(f"{action} is a human's act: it never runs through the broker", "run it in your own terminal")
    if yes:
        return
    if not caller.at_terminal():
        raise NeedsHuman(
            f"{action} needs a human at a terminal",
            "an agent runs as the same user, so rsk asks for a terminal; a human who means it may pass --yes",
        )
    if not typer.confirm(f"{action}?", default=False, err=True):
        raise UsageError(f"{action}: not confirmed")


def resolve_target(option: str | None) -> str:
    from rsk.cluster.targets import list_targets
    from rsk.local.project import env_or_file

    if option:
        return option
    if chosen := env_or_file("RSK_TARGET", "target"):
        return chosen
    found = list_targets()
    if len(found) == 1:
        return found[0].name
    names = ", ".join(t.name for t in found) or "none found"
    raise UsageError("which target? pass --target", f"known targets: {names}; or set RSK_TARGET")
