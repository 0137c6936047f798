#!/bin/sh
# rsk benchmarks against raw ssh + Slurm on the lab cluster, each as a ratio to a baseline
# measured in the same run. Prints a table and one "ratio NAME VALUE" line per bench.
#   bench/run.sh [single|batch|dag|status|ledger|ledger-write|startup|step|broker|profile|agents|board|scale]...
#   bench/run.sh scale --sizes 100,1000   (or RSK_BENCH_SIZES): the scale bench at fewer sizes
# Needs the lab cluster (sh tests/lab/up.sh) and rsk's dependencies (sh tests/setup.sh).
set -eu
cd "$(dirname "$0")/.."
PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" exec "${RSK_PYTHON:-python3}" bench/bench.py "$@"
