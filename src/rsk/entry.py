"""The `rsk` command's entry: an agent command goes to a reachable broker before anything heavy loads."""

import sys


def main() -> None:
    from rsk.broker_client import try_broker

    rc = try_broker(sys.argv[1:])
    if rc is not None:
        raise SystemExit(rc)
    from rsk.cli.app import main as cli_main

    cli_main()
