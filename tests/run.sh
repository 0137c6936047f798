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
shellcheck remote/*.sh tests/lab/*.sh tests/*.sh bin/rsk .ci/run
echo "== bats (remote scripts under dash, against the lab)" >&2
bats tests/shell tests/install
echo "== pytest" >&2
"$PY" -m pytest -q "$@"
