# shellcheck shell=sh disable=SC2154  # rsk_run, rsk_limit, rsk_plan, rsk_path, rsk_code* are set by the generated header
# rsk job wrapper body. The job script that sbatch receives on stdin (Slurm keeps its own copy, so no
# file under the remote root is run) is: a header that sets rsk_run, rsk_limit and rsk_path, this
# file, then the plan's environment and command as wire words, then `rsk_main "$@"`. The header also
# sets rsk_plan, which the started marker records, so the job itself says which plan it runs.
# The job's environment is what the plan binds: Slurm's own variables, HOME USER LOGNAME TMPDIR,
# PATH from the plan, and the plan's --env values; nothing from the login session (docs/adr/0008).
# Markers in $rsk_run: "started" (job, node, time; for a lease's step also its Slurm step and GPUs) and
# "ended" (rc, signal, time).
rsk_arg() { # "=LITERAL" is the value itself; anything else is base64
    case $1 in
        "="*) rsk_a=${1#=} ;;
        *) rsk_a=$(printf '%s' "$1" | base64 -d && printf x); rsk_a=${rsk_a%x} ;;
    esac
}
rsk_clean_env() {
    for rsk_n in $(env | sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p'); do
        case $rsk_n in
            # what Slurm sets, the GPUs it gave included (unset, a job would see every GPU of the node)
            SLURM_* | SLURMD_* | CUDA_VISIBLE_DEVICES | ROCR_VISIBLE_DEVICES | GPU_DEVICE_ORDINAL | ZE_AFFINITY_MASK \
                | HOME | USER | LOGNAME | TMPDIR | HOSTNAME) ;;
            *) unset "$rsk_n" 2>/dev/null || true ;;
        esac
    done
    PATH=$rsk_path
    RSK_RUN_DIR=$rsk_run # where rsk fetch finds results (with --code the job runs in $RSK_RUN_DIR/work)
    export PATH RSK_RUN_DIR
}
rsk_script() { # rsk_script TEXT: writes the user's batch script; it runs with its own #! line
    mkdir -p "$rsk_run"
    printf '%s' "$1" >"$rsk_run/user.sbatch" && chmod 0700 "$rsk_run/user.sbatch"
}
rsk_use_code() { # a fresh copy of the approved snapshot, checked against its manifest, becomes the cwd
    [ -n "${rsk_code:-}" ] || return 0
    rsk_sum=sha256sum
    command -v sha256sum >/dev/null 2>&1 || rsk_sum='shasum -a 256'
    rm -rf "$rsk_run/work"
    if ! { mkdir -p "$rsk_run/work" && cp -R "$rsk_code/." "$rsk_run/work/" && rm -f "$rsk_run/work/.rsk-manifest" \
        && cd "$rsk_run/work"; }; then
        echo "rsk: cannot copy the code snapshot into $rsk_run/work" >&2
        return 2
    fi
    # shellcheck disable=SC2086  # rsk_sum is a command and its options
    find . -type f -exec $rsk_sum {} + | awk '{ print $1, substr($2, 3) }' | sort >"$rsk_run/code.sums"
    # shellcheck disable=SC2086
    if [ "$($rsk_sum <"$rsk_code/.rsk-manifest" | cut -c1-64)" != "$rsk_code_digest" ] \
        || ! awk '{ print $1, $3 }' "$rsk_code/.rsk-manifest" | sort | cmp -s - "$rsk_run/code.sums"; then
        echo "rsk: the code differs from the snapshot the plan bound; not running it" >&2
        return 2
    fi
}
rsk_stamp() { awk 'BEGIN { srand(); print srand() }'; } # seconds since the epoch, in POSIX awk
rsk_on_signal() {
    rsk_sig=$1
    [ -z "${rsk_child:-}" ] || kill -"$1" "$rsk_child" 2>/dev/null
}
rsk_main() {
    # a job Slurm runs again (it turned requeue back on and requeued itself) runs nothing more: its charge
    # covers one run, and Slurm's run time would count only the last one
    if [ "${SLURM_RESTART_COUNT:-0}" != 0 ]; then
        echo "rsk: this job was requeued (restart ${SLURM_RESTART_COUNT}); rsk runs a command once" >&2
        exit 0
    fi
    rsk_t0=$(rsk_stamp)
    rsk_jobid=${SLURM_JOB_ID:-}
    [ -z "${SLURM_ARRAY_JOB_ID:-}" ] || rsk_jobid="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
    mkdir -p "$rsk_run"
    if [ -n "${rsk_step:-}" ]; then # a lease's step: its id, its Slurm step, its node and GPUs
        printf 'job=%s node=%s t=%s plan=%s slurm=%s.%s gpus=%s\n' "$rsk_step" "${SLURMD_NODENAME:-$(uname -n)}" \
            "$rsk_t0" "$rsk_plan" "${SLURM_JOB_ID:-}" "${SLURM_STEP_ID:-}" "${SLURM_STEP_GPUS:-${CUDA_VISIBLE_DEVICES:-}}"
    else
        printf 'job=%s node=%s t=%s plan=%s\n' "$rsk_jobid" "$(uname -n)" "$rsk_t0" "$rsk_plan"
    fi >"$rsk_run/started.tmp" && mv "$rsk_run/started.tmp" "$rsk_run/started"
    rsk_sig=''
    rsk_use_code || rsk_end 2
    trap 'rsk_on_signal TERM' TERM
    trap 'rsk_on_signal INT' INT
    trap 'rsk_on_signal USR1' USR1
    "$@" 0<&0 &
    rsk_child=$!
    rsk_rc=0
    wait "$rsk_child" || rsk_rc=$?
    while kill -0 "$rsk_child" 2>/dev/null; do
        wait "$rsk_child" && rsk_rc=0 || rsk_rc=$?
    done
    rsk_end "$rsk_rc"
}
rsk_end() { # rsk_end RC: the ended marker, then exit RC
    rsk_t1=$(rsk_stamp)
    printf 'rc=%s sig=%s t=%s elapsed=%s limit=%s\n' "$1" "${rsk_sig:-none}" "$rsk_t1" \
        "$((rsk_t1 - rsk_t0))" "$rsk_limit" >"$rsk_run/ended.tmp" && mv "$rsk_run/ended.tmp" "$rsk_run/ended"
    exit "$1"
}
