#!/bin/sh
# The whole test suite: static checks, pytest (unit, CLI, lab integration) and bats (remote
# scripts under dash, install.sh), against the lab cluster. Sets up what is missing first.
set -eu
cd "$(dirname "$0")/.."
sh tests/setup.sh
PY=${RSK_PYTHON:-python3}
echo "== ruff, mypy, shellcheck" >&2
"$PY" -m ruff check src tests
"$PY" -m ruff format --check src tests
"$PY" -m mypy
# the remote files are parts of programs: check the programs each call ships, as they run
programs=$(mktemp -d)
"$PY" -c 'import sys; from rsk.wire.bundle import write_all; write_all(sys.argv[1])' "$programs"
shellcheck "$programs"/*.sh tests/lab/*.sh tests/*.sh bin/rsk .ci/run install.sh
rm -rf "$programs"
echo "== bats (remote scripts under dash, against the lab)" >&2
bats tests/shell tests/install
echo "== pytest" >&2
"$PY" -m pytest -q "$@"
if [ $# -eq 0 ]; then
    # the same suites again with every rsk call through a broker: outputs and exit codes must not change
    echo "== pytest through a broker (RSK_TEST_BROKER=1)" >&2
    # (the CLI suite and the agent's loop on the lab: with the rest, CI would pass 20 minutes; any other
    # suite runs the same way: RSK_TEST_BROKER=1 pytest tests/integration/test_guard.py)
    RSK_TEST_BROKER=1 "$PY" -m pytest -q tests/cli tests/integration/test_agent_loop.py
fi
