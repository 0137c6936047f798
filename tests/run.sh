#!/bin/sh
# The test suite.
#   sh tests/run.sh --quick   static checks and the tests that need neither root nor the lab (ruff, mypy,
#                             ShellCheck if installed, pytest -m "not lab": unit and CLI); any user, offline
#   sh tests/run.sh           everything, as root, against the lab cluster (sets up what is missing first):
#                             the static checks, then the lab tests with bats (the remote programs under dash,
#                             install.sh) beside them, then the tests that disturb the whole lab with the unit
#                             and CLI suites (also through a broker) beside them, then the agent's loop on the
#                             lab through a broker
#   sh tests/run.sh ARGS...   the static checks and bats, then pytest ARGS (one file, -k, ...)
# RSK_TEST_WORKERS: pytest workers (default 3 for the lab tests, one per core for --quick's); 0 runs them in one
# process.
set -eu
cd "$(dirname "$0")/.."
PY=${RSK_PYTHON:-python3}
quick=0
if [ "${1:-}" = --quick ]; then
    quick=1
    shift
fi
[ "$quick" = 1 ] || sh tests/setup.sh
echo "== ruff, mypy, shellcheck" >&2
"$PY" -m ruff check src tests
"$PY" -m ruff format --check src tests
# the remote files are parts of programs: check the programs each call ships, as they run (beside mypy)
checked=$(mktemp -d)
if command -v shellcheck >/dev/null 2>&1; then
    PYTHONPATH=src "$PY" -c 'import sys; from rsk.wire.bundle import write_all; write_all(sys.argv[1])' "$checked" # (this checkout's, not an installed rsk's)
    shellcheck "$checked"/*.sh tests/lab/*.sh tests/*.sh bin/rsk .ci/run install.sh >"$checked/said" 2>&1 &
    shellchecked=$!
elif [ "$quick" = 1 ]; then
    echo "(no shellcheck here: the shell programs are checked by the full run)" >&2
else
    echo "shellcheck is missing (sh tests/setup.sh installs it)" >&2
    exit 1
fi
"$PY" -m mypy
if [ -n "${shellchecked:-}" ] && ! wait "$shellchecked"; then
    cat "$checked/said"
    exit 1
fi
rm -rf "$checked"
if [ "$quick" = 1 ]; then
    # in pytest-xdist's workers, one per core, when it is installed (RSK_TEST_WORKERS=0: in one process); a
    # file's tests stay in one worker, so a module's fixture (the page's browser and server) starts once
    par=""
    if [ "${RSK_TEST_WORKERS:-}" != 0 ] && "$PY" -c 'import xdist' 2>/dev/null; then
        par="-n ${RSK_TEST_WORKERS:-auto} --dist loadfile -p no:benchmark"
    fi
    echo "== pytest: unit and CLI (not lab)${par:+, in workers}" >&2
    # shellcheck disable=SC2086  # the xdist options split on purpose
    exec "$PY" -m pytest -q -p no:cacheprovider $par -m "not lab" "$@"
fi
if [ $# -gt 0 ]; then
    echo "== bats (remote scripts under dash, against the lab)" >&2
    bats tests/shell tests/install
    echo "== pytest $*" >&2
    exec "$PY" -m pytest -q "$@"
fi

started=$(date +%s)
took() { echo "-- $1: $(($(date +%s) - $2)) s" >&2; }
workers=${RSK_TEST_WORKERS:-3}
xdist=""
[ "$workers" = 0 ] || xdist="-n $workers --dist loadfile -p no:benchmark"  # (pytest-benchmark, when installed, warns per worker)
status=0
beside() { # beside LOG NAME CMD...: a suite in the background, what it says (and its time) into LOG
    beside_log=$1 beside_name=$2
    shift 2
    (
        t=$(date +%s)
        rc=0
        "$@" || rc=$?
        took "$beside_name" "$t"
        exit "$rc"
    ) >"$beside_log" 2>&1 &
}
report() { # report TITLE PID LOG: wait for a suite run beside, then print what it said
    rc=0
    wait "$2" || rc=$?
    echo "== $1" >&2
    cat "$3"
    rm -f "$3"
    [ "$rc" = 0 ] || status=1
}
# bats (as the cluster user, against the lab's Slurm) runs while the lab tests run: each suite has remote roots,
# projects and (for fault injection) shims of its own; what it said follows when both are done
bats_log=$(mktemp)
beside "$bats_log" bats bats tests/shell tests/install
bats_pid=$!
t=$(date +%s)
echo "== pytest: lab (${workers} workers), with bats beside it" >&2
# shellcheck disable=SC2086  # the xdist options split on purpose
"$PY" -m pytest -q $xdist --durations=15 -m "lab and not serial" || status=1
took "pytest lab" "$t"
report "bats (remote scripts under dash, against the lab)" "$bats_pid" "$bats_log"
# the tests that disturb the whole lab run alone on it; the suites that need no cluster run beside them, while they
# mostly wait for slurmctld: the unit and CLI tests, and the CLI suite again with every rsk call through a broker
# (outputs and exit codes must not change; any other suite runs the same way: RSK_TEST_BROKER=1 pytest FILE)
unit_log=$(mktemp) cli_log=$(mktemp)
beside "$unit_log" "pytest unit and CLI" "$PY" -m pytest -q -p no:cacheprovider -m "not lab"
unit_pid=$!
beside "$cli_log" "pytest CLI through a broker" env RSK_TEST_BROKER=1 "$PY" -m pytest -q -p no:cacheprovider tests/cli
cli_pid=$!
echo "== pytest: tests that disturb the whole lab, alone, with the unit and CLI suites beside them" >&2
t=$(date +%s)
"$PY" -m pytest -q -m serial || status=1
took "pytest serial" "$t"
report "pytest: unit and CLI" "$unit_pid" "$unit_log"
report "pytest: the CLI suite through a broker (RSK_TEST_BROKER=1)" "$cli_pid" "$cli_log"
# the agent's loop on the lab through a broker, a test per worker (its tests share no module state)
echo "== pytest: the agent's loop on the lab through a broker (RSK_TEST_BROKER=1)" >&2
t=$(date +%s)
# shellcheck disable=SC2086
RSK_TEST_BROKER=1 "$PY" -m pytest -q ${xdist:+-n $workers --dist load -p no:benchmark} tests/integration/test_agent_loop.py \
    || status=1
took "pytest agent loop through a broker" "$t"
took "after setup, everything" "$started"
exit "$status"
