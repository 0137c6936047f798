"""The `rsk` command's entry: an agent command goes to a reachable broker before anything heavy loads."""

import sys


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
