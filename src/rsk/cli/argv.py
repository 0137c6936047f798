"""What an argv names, read with the CLI's own Click command: the broker asks another user's client for the
files a request names this way, so no second parser of rsk's options exists beside Click's.

Reading is not deciding: the command itself checks, where it opens a file or a directory, that the content
came from the client (rsk.local.caller.sent_text, rsk.local.caller.local_dir).
"""

from __future__ import annotations

from typing import Any

import typer

from rsk.broker.wanted import Wanted

FILES = ("script", "tasks")  # parameters whose file the client reads and sends as text
DIRECTORY = "code"  # the parameter whose directory the client sends as a tar of its files
EXCLUDE = "exclude"  # the globs the client leaves out of that tar


def parse(argv: list[str]) -> Any:
    """The context of the command argv runs, parsed by Click as the CLI parses it (no callbacks, no
    prompts); None when argv names no command or Click refuses it (the command then fails on its own)."""
    from rsk.cli.app import command

    cmd: Any = command()  # Typer's Click command (its own copy of Click in newer Typers: hence no `click` here)
    try:
        ctx = cmd.make_context("rsk", list(argv), resilient_parsing=True)
        while hasattr(cmd, "resolve_command"):  # a group: its subcommand parses the rest
            args = [*getattr(ctx, "_protected_args", []), *ctx.args]
            if not args:
                return None
            name, sub, rest = cmd.resolve_command(ctx, args)
            if sub is None or name is None:
                return None
            cmd = sub
            ctx = sub.make_context(name, rest, parent=ctx, resilient_parsing=True)
    except (typer.TyperException, typer.Exit, typer.Abort):
        return None
    return ctx


def wanted(argv: list[str], resolve: Any) -> Wanted:
    """The files and directory argv names (each through `resolve`, a caller's path to an absolute one)."""
    ctx = parse(argv)
    if ctx is None:
        return Wanted()
    params = ctx.params
    files = [str(resolve(str(params[n]))) for n in FILES if params.get(n) is not None]
    code = params.get(DIRECTORY)
    return Wanted(
        files=files,
        code=str(resolve(str(code))) if code is not None else None,
        exclude=[str(e) for e in params.get(EXCLUDE) or []] if code is not None else [],
    )
