# shellcheck shell=sh disable=SC2154  # rsk_run, rsk_limit, rsk_plan, rsk_path, rsk_code* are set by the generated header
# rsk job wrapper: the body of every job script, between its header and the plan's environment and command
# (docs/protocol.md, "The job script"). The job's environment is what the plan binds, nothing from the login session
# (ADR 0008). A chain's link exits 75 so that Slurm starts the next one only when it stopped short (ADR 0033).
rsk_arg() { # "=LITERAL" is the value itself; anything else is base64
    case $1 in "="*) rsk_a=${1#=} ;; *) rsk_a=$(printf '%s' "$1" | base64 -d && printf x); rsk_a=${rsk_a%x} ;; esac
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
# shellcheck disable=SC2086  # rsk_sum is a command and its options
rsk_use_code() { # a fresh copy of the approved snapshot, checked against its manifest, becomes the cwd
    [ -n "${rsk_code:-}" ] || return 0
    rm -rf "$rsk_run/work"
    if ! { mkdir -p "$rsk_run/work" && cp -R "$rsk_code/." "$rsk_run/work/" && rm -f "$rsk_run/work/.rsk-manifest" \
        && cd "$rsk_run/work"; }; then
        echo "rsk: cannot copy the code snapshot into $rsk_run/work" >&2
        return 2
    fi
    find . -type f -exec $rsk_sum {} + | awk '{ print $1, substr($2, 3) }' | sort >"$rsk_run/code.sums"
    if [ "$($rsk_sum <"$rsk_code/.rsk-manifest" | cut -c1-64)" != "$rsk_code_digest" ] \
        || ! awk '{ print $1, $3 }' "$rsk_code/.rsk-manifest" | sort | cmp -s - "$rsk_run/code.sums"; then
        echo "rsk: the code differs from the snapshot the plan bound; not running it" >&2
        return 2
    fi
}
rsk_stamp() { awk 'BEGIN { srand(); print srand() }'; } # seconds since the epoch, in POSIX awk
rsk_put() { printf '%s\n' "$2" >"$1.tmp" && mv "$1.tmp" "$1"; } # rsk_put FILE LINE: written whole or not at all
rsk_ended() { # rsk_ended DIR RC SIG START LIMIT [STOP]: the ended marker (the job's own and the lease controller's)
    rsk_t1=$(rsk_stamp) rsk_t=$4
    case $rsk_t in '' | *[!0-9]*) rsk_t=$rsk_t1 ;; esac # a started time a job rewrote is no arithmetic
    rsk_put "$1/ended" "rc=$2 sig=$3 t=$rsk_t1 elapsed=$((rsk_t1 - rsk_t)) limit=$5${6:+ stop=$6}"
}
rsk_on_signal() { rsk_sig=$1; [ -z "${rsk_child:-}" ] || kill -"$1" "$rsk_child" 2>/dev/null; } # passed on to the command
rsk_main() {
    # a job Slurm runs again (it turned requeue back on and requeued itself) runs nothing more: its charge
    # covers one run, and Slurm's run time would count only the last one
    if [ "${SLURM_RESTART_COUNT:-0}" != 0 ]; then
        echo "rsk: this job was requeued (restart ${SLURM_RESTART_COUNT}); rsk runs a command once" >&2
        exit 0
    fi
    rsk_t0=$(rsk_stamp)
    rsk_sum=sha256sum # the code check's and the result manifest's digest
    command -v sha256sum >/dev/null 2>&1 || rsk_sum='shasum -a 256'
    rsk_jobid=${rsk_step:-${SLURM_JOB_ID:-}} # a lease's step: its id; an array task: ARRAY_TASK
    [ -n "${rsk_step:-}" ] || [ -z "${SLURM_ARRAY_JOB_ID:-}" ] || rsk_jobid="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
    mkdir -p "$rsk_run"
    # one shape for a job and a step: its id, node, start, plan, Slurm step and GPUs
    rsk_put "$rsk_run/started" "job=$rsk_jobid node=${SLURMD_NODENAME:-$(uname -n)} t=$rsk_t0 plan=$rsk_plan slurm=${SLURM_JOB_ID:-}.${SLURM_STEP_ID:-} gpus=${SLURM_STEP_GPUS:-${CUDA_VISIBLE_DEVICES:-}}"
    [ -z "${rsk_links:-}" ] || rsk_link_env
    RSK_WORK_DIR=$rsk_work # shared by the request's tasks, a chain's links and a batch's attempts
    mkdir -p "$RSK_WORK_DIR" && export RSK_WORK_DIR
    RSK_OUT=$rsk_run/out.stage # results are written here, published whole by rsk_publish (never a half result)
    rm -rf "$RSK_OUT" && mkdir -p "$RSK_OUT" && export RSK_OUT
    rsk_use_code || { rsk_sig=''; rsk_end 2; } # (a notice that came while it started is no stop: it failed)
    for rsk_s in TERM INT USR1; do trap "rsk_on_signal $rsk_s" "$rsk_s"; done
    "$@" 0<&0 &
    rsk_child=$!
    [ -z "$rsk_sig" ] || kill -"$rsk_sig" "$rsk_child" 2>/dev/null || true # a signal caught while it started
    rsk_rc=0
    wait "$rsk_child" || rsk_rc=$?
    while kill -0 "$rsk_child" 2>/dev/null; do
        wait "$rsk_child" && rsk_rc=0 || rsk_rc=$?
    done
    rsk_end "$rsk_rc"
}
rsk_link_env() { # a chain's link: what the command is told; the run time of the links before it, from their markers
    RSK_LINK=$((rsk_link0 + rsk_ti + 1)) RSK_LINKS=$((rsk_link0 + rsk_links)) RSK_BUDGET=$rsk_budget
    RSK_RUN_TIME=$(cat "$rsk_chain"/t*/ended "$rsk_chain".a*/t*/ended 2>/dev/null \
        | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^elapsed=[0-9]+$/) s += substr($i, 9) } END { print s + 0 }')
    export RSK_LINK RSK_LINKS RSK_BUDGET RSK_RUN_TIME
}
rsk_publish() { # rsk_publish RC: on 0, a manifest (sha256, size, path of every file), then one rename of the
    # stage to result/; on anything else the stage stays, as partial/, never a result. Nor is a stage that
    # `rsk fetch --result` could not bring back whole (its listing: at most 1,000 files, names of A-Z a-z 0-9 . _ + @ : , -)
    [ -d "${RSK_OUT:-}" ] || return 0
    rsk_why=''
    if [ "$1" -eq 0 ] && [ ! -e "$rsk_run/result" ]; then
        if [ -e "$RSK_OUT/.rsk-manifest" ] || [ -e "$RSK_OUT/.rsk-partial" ]; then
            rsk_why='.rsk-manifest and .rsk-partial are names rsk gives'
        elif [ -n "$(cd "$RSK_OUT" && find . -name '*[!A-Za-z0-9._+@:,-]*' | head -n 1)" ]; then
            rsk_why='a file name outside A-Z a-z 0-9 . _ + @ : , -'
        elif [ "$(cd "$RSK_OUT" && find . -type f | head -n 1001 | wc -l)" -gt 1000 ]; then
            rsk_why='more than 1000 files'
        fi
        [ -z "$rsk_why" ] || echo "rsk: the result is not published ($rsk_why): kept as partial" >&2
    fi
    if [ "$1" -ne 0 ] || [ -e "$rsk_run/result" ] || [ -n "$rsk_why" ]; then
        mv "$RSK_OUT" "$rsk_run/partial" 2>/dev/null || true
        return 0
    fi
    # shellcheck disable=SC2016,SC2086  # the inner sh expands its own $1; rsk_sum is a command and its options
    (cd "$RSK_OUT" && find . -type f -exec sh -c 'for f; do printf "%s %s %s\n" "$('"$rsk_sum"' <"$f" | cut -c1-64)" \
        "$(wc -c <"$f" | tr -d " ")" "${f#./}"; done' sh {} +) | sort -k3 >"$rsk_run/manifest.tmp" \
        && mv "$rsk_run/manifest.tmp" "$RSK_OUT/.rsk-manifest" && mv "$RSK_OUT" "$rsk_run/result"
}
rsk_end() { # rsk_end RC: the result published, the ended marker, then exit RC (a chain's link: 75 to go on, else 0)
    rsk_publish "$1"
    rsk_x=$1 rsk_stop=''
    if [ -n "${rsk_links:-}" ] && [ "$1" -ne 0 ]; then
        rsk_x=0
        if [ "$1" -eq 75 ]; then rsk_stop=yielded rsk_x=75; elif [ "$rsk_sig" = USR1 ]; then rsk_stop=time-limit rsk_x=75; fi
        [ -z "$rsk_stop" ] || [ "$((rsk_ti + 1))" -lt "$rsk_links" ] || rsk_stop=budget-spent
    fi
    rsk_ended "$rsk_run" "$1" "${rsk_sig:-none}" "$rsk_t0" "$rsk_limit" "$rsk_stop"
    exit "$rsk_x"
}
