#!/bin/sh
# The main job, end to end: set up (packages, rsk, lab cluster), give the demo project a
# grant, launch a GPU job through plan, ledger, expect and journal, and print its output.
set -eu
cd "$(dirname "$0")/../.."
sh tests/setup.sh
# (rsk's state: RSK_HOME if set, else the user's own, so every command works afterwards from any directory)
rsk() { "${RSK_PYTHON:-python3}" -m rsk "$@"; }
# the lab target where rsk finds it from any directory: the user's own config (rsk targets lists it)
config=${XDG_CONFIG_HOME:-$HOME/.config}/rsk/targets
mkdir -p "$config"
cp targets/lab.toml "$config/lab.toml"
# shellcheck disable=SC2016  # expanded by the job on the cluster, not here
job_cmd='echo "hello from $(whoami) on $(hostname): job $SLURM_JOB_ID, GPUs $CUDA_VISIBLE_DEVICES"'
rid="demo-$(date +%s)"
rsk grant add --project demo --target lab --jobs 5 --gpu-hours 4 --yes >/dev/null
rsk launch --target lab --project demo --request-id "$rid" --partition gpu --gpus 1 --time 5:00 -- sh -c "$job_cmd"
# the same request id again: nothing new is submitted, the same job id comes back
job=$(rsk launch --target lab --project demo --request-id "$rid" --partition gpu --gpus 1 --time 5:00 --json \
    -- sh -c "$job_cmd" | sed -n 's/^  "job_id": "\([0-9]*\)".*/\1/p')
echo "--- journal on the cluster (last events)"
rsk journal --target lab --project demo | tail -n 3
echo "--- job $job output"
rsk logs "$job" --target lab --project demo --follow --timeout 120
