"""The rsk command: wires the command groups and maps every error to its exit code in one place."""

import sys
from typing import Annotated

import typer

from rsk import __version__
from rsk.cli.commands import COMMANDS, GROUPS

app = typer.Typer(
    name="rsk",
    help=(
        "Run agents' work on remote Slurm clusters while a human keeps a hand on the budget.\n\n"
        "Agents: `rsk launch` (never sbatch), `rsk wait`, `rsk status`, `rsk logs`. "
        "Humans: `rsk approvals`, `rsk approve`, `rsk deny`, `rsk grant`."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"rsk {__version__}\n")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """rsk: plans bound on the cluster, a ledger of approvals and grants, a journal that never submits twice."""


def register(command: str | None) -> None:
    """Register the module that owns `command`. Typer inspects every registered function at start-up
    (about 2 ms each), so the top-level help and unknown commands get stubs with the same one-line help."""
    import importlib

    if command in COMMANDS:
        importlib.import_module(f"rsk.cli.{COMMANDS[command][0]}").register(app)
        return
    for name, (_, line) in COMMANDS.items():
        if name in GROUPS:
            app.add_typer(typer.Typer(help=line), name=name)
        else:
            app.command(name, help=line)(lambda: None)


def optional_wait(args: list[str]) -> list[str]:
    """`--wait` may stand alone (wait without a limit) or take SECONDS; typer options cannot, so a bare
    `--wait` becomes `--wait=0` here. Nothing after `--` (the job's own command) is touched."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if arg == "--wait" and not nxt.replace(".", "", 1).isdigit():
            arg = "--wait=0"
        out.append(arg)
    return out


def main(argv: list[str] | None = None) -> None:
    from rsk.errors import Exit, RskError

    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:  # the fast path scripts use to probe for rsk
        sys.stdout.write(f"rsk {__version__}\n")
        return
    args = optional_wait(args)
    want_json = "--json" in args
    register(args[0] if args else None)
    try:
        app(args=args, prog_name="rsk", standalone_mode=False)
    except RskError as exc:
        if want_json:
            from rsk.cli.common import print_json

            print_json(exc.to_json())
        from rsk.cli.common import err

        console = err()
        console.print(f"error: {exc.message}")
        if exc.hint:
            console.print(f"hint: {exc.hint}")
        raise SystemExit(int(exc.exit_code)) from None
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(int(Exit.INTERRUPTED)) from None
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        sys.stderr.write("aborted\n")
        raise SystemExit(int(Exit.INTERRUPTED)) from None
    except typer.TyperException as exc:  # usage errors: unknown command, bad option or value (exit 2)
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(int(getattr(exc, "exit_code", Exit.USAGE))) from None
