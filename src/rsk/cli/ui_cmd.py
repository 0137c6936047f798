"""rsk ui: the human's page in a browser (rsk.ui)."""

from typing import Annotated

import typer

from rsk.cli.common import JsonOpt, YesOpt, err, out, print_json
from rsk.commands import help_for


def register(app: typer.Typer) -> None:
    app.command(
        "ui",
        help=help_for(
            "ui",
            "Serves the page on 127.0.0.1 only and prints its link, which works once: it signs this browser in "
            "(a session cookie) and is then spent; run `rsk ui` again for a new one. The browser is opened on a "
            "file only you can read, never on the link itself. Cards (pending first, with Approve and Deny), "
            "Budgets, Board and GPUs; Ctrl-C stops it. Every project with a ledger here is shown. "
            "docs/ui.md of rsk's source says what guards it.",
        ),
    )(ui)


def ui(
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1; 0 picks a free one.")] = 0,
    no_open: Annotated[bool, typer.Option("--no-open", help="Print the link; do not start a browser.")] = False,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Show everything, offer no acts (a wall screen).")
    ] = False,
    target: Annotated[
        list[str] | None, typer.Option("--target", "-t", help="Target for Board and GPUs (repeatable); default: all.")
    ] = None,
    yes: YesOpt = False,
    json_out: JsonOpt = False,
) -> None:

    from rsk.cluster.targets import list_targets
    from rsk.errors import NeedsHuman
    from rsk.local import caller
    from rsk.ui.guard import Guard
    from rsk.ui.server import Config, Ui, bind, serve, write_launch_file

    if caller.current() is not None:
        raise NeedsHuman("`rsk ui` is a human's page: it never runs through the broker", "run it in your own terminal")
    if not yes and not caller.at_terminal():
        raise NeedsHuman(
            "`rsk ui` serves a page that approves: it needs a human at a terminal",
            "an agent runs as the same user, so rsk asks for a terminal; a human who means it may pass --yes",
        )
    sock = bind(port)
    guard = Guard(port=sock.getsockname()[1])
    path = write_launch_file(guard)
    names = list(target or []) or [t.name for t in list_targets()]
    page = Ui(guard, Config(targets=names, read_only=read_only))
    if json_out:
        print_json({"schema_version": 1, "url": guard.launch_url(), "address": guard.url(), "launch_file": str(path),
                    "read_only": read_only, "targets": names})  # fmt: skip
    else:
        out().print(f"rsk ui on {guard.url()}" + (" (read-only)" if read_only else ""))
        out().print(f"open (works once): {guard.launch_url()}")
        out().print("Ctrl-C stops it")
    caller.stdout().flush()
    if not no_open:
        import webbrowser

        webbrowser.open(path.as_uri())  # the file, not the link: a command line is visible to every user
    import contextlib

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how the page stops: not an interrupted act
        serve(sock, page)
    err().print("rsk ui stopped")
