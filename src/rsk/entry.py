"""The `rsk` command's entry: an agent command goes to a reachable broker before anything heavy loads."""

import sys

# Allocations between two collections of young objects (Python's default is 700). A command that reads thousands of
# jobs builds hundreds of thousands of small objects that live until it ends, and at the default the collector walks
# them again and again: up to half a 10,000-task launch or status (docs/adr/0061-linear-in-the-tasks.md).
YOUNG = 20_000


def collect_less() -> None:
    """This process (a command, a broker, the MCP server, the page) collects its young objects every YOUNG
    allocations, its older ones as rarely as before relative to that."""
    import gc

    gc.set_threshold(YOUNG, 20, 20)


def main() -> None:
    from rsk.broker_client import try_broker

    rc = try_broker(sys.argv[1:])
    if rc is not None:
        raise SystemExit(rc)
    if sys.argv[1:] == ["--version"]:  # the probe scripts use: no dependency needed
        from rsk import __version__

        sys.stdout.write(f"rsk {__version__}\n")
        return
    if sys.flags.no_site:  # started by the launcher without `site`: the dependencies live in site-packages
        import site

        site.main()
    collect_less()  # what runs here, not a brokered command's client: it only passes bytes along
    try:
        from rsk.cli.app import main as cli_main
    except ModuleNotFoundError as exc:  # a stdlib-only Python: enough to talk to a broker, not to run rsk
        sys.stderr.write(
            f"error: this Python lacks what rsk needs to run `rsk {' '.join(sys.argv[1:2])}` itself ({exc.name})\n"
            "hint: agent commands go through a broker (set RSK_BROKER to its socket); other commands need rsk "
            "installed with its dependencies\n"
        )
        raise SystemExit(78) from None
    cli_main()
