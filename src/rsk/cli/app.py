"""The rsk command: wires the command groups and maps every error to its exit code in one place."""

import sys
from typing import Annotated, Any

import typer
import typer.main

from rsk import __version__
from rsk.commands import COMMANDS

app = typer.Typer(
    name="rsk",
    help=(
        "Run agents' work on remote Slurm clusters while a human keeps a hand on the budget.\n\n"
        "Agents: `rsk init`, `rsk plan`, `rsk launch` (never sbatch), `rsk wait`, `rsk status`, `rsk logs`. "
        "Humans: `rsk approvals`, `rsk approve`, `rsk deny`, `rsk grant`, `rsk ui` (the page)."
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(ctx: typer.Context, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from rsk.local import caller

        caller.stdout().write(f"rsk {__version__}\n")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """rsk: plans bound on the cluster, a ledger of approvals and grants, a journal that never submits twice."""
    if ctx.invoked_subcommand is not None:
        check_audience(ctx.invoked_subcommand)


def check_audience(name: str) -> None:
    """In the broker, the command Click chose must be one its caller may run (rsk.commands)."""
    from rsk.commands import audience
    from rsk.errors import NeedsHuman, UsageError
    from rsk.local import caller

    rights = caller.rights()
    if rights is None:
        return  # this process's own user, in its own process
    who = audience(name)
    if who == "human":
        raise NeedsHuman(f"`rsk {name}` is a human's act: it never runs through the broker",
                         "run it in your own terminal")  # fmt: skip
    if who not in ("agent", "owner"):
        raise UsageError(f"`rsk {name}` does not run through the broker", "run it in your own process")
    if who == "owner" and not rights.owner:
        raise UsageError(f"`rsk {name}` runs only for the broker's own user",
                         "through another user's broker only the agent's commands run (launch, status, wait, logs, "
                         "fetch, ...); ask that user to run it")  # fmt: skip


_registered = False


def register_all() -> None:
    """Every command, registered the ordinary Typer way (completion and Click's errors come with it); once
    per process (the broker runs main for every request)."""
    import importlib

    global _registered
    if _registered:
        return
    for module in dict.fromkeys(c.module for c in COMMANDS.values()):
        importlib.import_module(f"rsk.cli.{module}").register(app)
    _registered = True


_command: Any = None


def command() -> Any:
    """The Click command Typer builds from `app`: built once per process. Typer rebuilds it on every call
    of `app(...)` (~20 ms with every rsk command registered), and the broker runs main for every request."""
    global _command
    if _command is None:
        register_all()
        _command = typer.main.get_command(app)
    return _command


def main(argv: list[str] | None = None) -> None:
    from rsk.errors import Exit, RskError

    args = sys.argv[1:] if argv is None else argv
    from rsk.local import caller

    if args == ["--version"]:  # the fast path scripts use to probe for rsk
        caller.stdout().write(f"rsk {__version__}\n")
        return
    head = args[: args.index("--")] if "--" in args else args  # the job's own argv is never rsk's
    want_json = "--json" in head
    if args and args[0] == "--":
        caller.stderr().write("error: a command comes first: rsk COMMAND [OPTIONS] [-- JOB ARGV]\nhint: rsk --help\n")
        raise SystemExit(int(Exit.USAGE))
    try:
        # outside standalone mode, Click returns a command's typer.Exit code instead of raising it
        rc = command()(args=args, prog_name="rsk", standalone_mode=False)
        if isinstance(rc, int) and rc:
            raise SystemExit(rc)
    except RskError as exc:
        if want_json:
            from rsk.cli.common import print_json

            print_json(exc.to_json())
        from rsk.cli.common import err

        console = err()
        said = exc.details.get("warnings")
        for line in said if isinstance(said, list) else []:  # a pending launch's (what its plan said)
            console.print(f"rsk: warning: {line}")
        console.print(f"error: {exc.message}")
        if exc.hint:
            console.print(f"hint: {exc.hint}")
        raise SystemExit(int(exc.exit_code)) from None
    except KeyboardInterrupt:
        caller.stderr().write("interrupted\n")
        raise SystemExit(int(Exit.INTERRUPTED)) from None
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        caller.stderr().write("aborted\n")
        raise SystemExit(int(Exit.INTERRUPTED)) from None
    except typer.TyperException as exc:  # usage errors: unknown command, bad option or value (exit 2)
        if want_json:  # an agent that guessed an option reads the refusal where it reads every answer
            from rsk.cli.common import print_json

            print_json(_usage_json(exc))
        show = getattr(exc, "show", None)
        if callable(show):
            show(file=caller.stderr())
        else:
            caller.stderr().write(f"error: {exc}\n")
        raise SystemExit(int(getattr(exc, "exit_code", Exit.USAGE))) from None


def _usage_json(exc: Exception) -> dict[str, object]:
    """Click's refusal of an argv as rsk's error document: the same keys every other error has."""
    from rsk.errors import UsageError

    fmt = getattr(exc, "format_message", None)
    message = str(fmt() if callable(fmt) else exc)
    ctx = getattr(exc, "ctx", None)
    path = getattr(ctx, "command_path", "") or "rsk"
    return UsageError(message, f"{path} --help shows its options").to_json()
