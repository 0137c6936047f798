# shellcheck shell=sh
# rsk lease status|drain|resume|close|gpus PROJECT [NAME]: a project's leases, as their directories and
# controllers say (docs/protocol.md, "lease"); a lease's job is touched only while it carries rsk:PROJECT:RID.

lease_read() { # lease_read NAME [JOB RID]: the lease (rsk_lease); fails when it does not exist
    rsk_lease "$project" "$1" "${2:-}" "${3:-}"
    [ -n "$L" ] || rsk_fail "$RSK_E_USAGE" no-lease "project $project has no lease $1 on this cluster"
}
count() { K=0; for rsk_f in "$@"; do [ ! -f "$rsk_f" ] || K=$((K + 1)); done; } # count GLOB...: K, how many files exist
lease_emit() { # lease_emit NAME (held_job, held_rid: the ledger's, when the client named one lease)
    lease_read "$1" "$held_job" "$held_rid"
    set -- "name=$1" "job=$L_job" "rid=$L_rid" "state=$L_state"
    for k in nodes gpus cpus mem time partition drain overrun; do rsk_get "$L" "$k"; set -- "$@" "$k=$RSK_F"; done
    for k in hosts:nodes start end; do rsk_get "$L_ctl" "${k#*:}"; set -- "$@" "${k%:*}=$RSK_F"; done
    count "$LDIR"/run/*.step; running=$K
    count "$LDIR"/end/*.step; ended=$K
    case $L_state in closed | ended) ended=$((ended + running)) running=0 ;; esac # gone with the allocation
    count "$LDIR"/q/*.step; set -- "$@" "queued=$K" "running=$running" "ended=$ended"
    count "$LDIR/drain"
    rsk_emit lease "$@" "drained=$K"
}
do_status() {
    [ -z "$name" ] || { lease_emit "$name"; return 0; }
    rsk_squeue && rsk_sq_leases "$project"
    for f in "$RSK_ROOT/leases/$project"/*/lease; do
        [ ! -f "$f" ] || { f=${f%/lease}; lease_emit "${f##*/}"; }
    done
}
do_close() {
    rsk_lock "$project"
    lease_read "$name" "$held_job" "$held_rid" # under the lock: Slurm's word on the (ledger's) lease job is read now
    rm -rf "$LDIR/closed" && printf 'job=%s\n' "$L_job" >"$LDIR/closed" # a file, never through a link a job made
    rsk_block_start
    n=0
    for f in "$LDIR"/q/*.step; do
        [ -f "$f" ] || continue
        IFS= read -r line <"$f" || true
        seq=${f##*/} seq=${seq%.step}
        rsk_unqueue "$LDIR" "$seq" lease-closed || continue # the controller claimed it first
        set --
        for k in rid plan idx job task; do rsk_get "$line" "$k"; set -- "$@" "$RSK_F"; done
        rsk_jline cancelled "$1" "$2" "$3" "job=$4" "task=$5" code=lease-closed
        n=$((n + 1))
    done
    result=ended
    if [ -n "$L_sq" ]; then
        result=failed
        if scancel "$L_job" 2>/dev/null; then
            rsk_get "$L" plan
            rsk_jline cancelled "$L_rid" "$RSK_F" 0 "job=$L_job" code=lease-closed
            result=cancelled
        fi
    fi
    rsk_journal_write "$project" || true
    rsk_emit closed "name=$name" "job=$L_job" "result=$result" "queued=$n"
    [ "$result" != failed ] || rsk_fail "$RSK_E_SBATCH" scancel-failed "scancel $L_job failed; the queued steps were cancelled"
}
do_flag() { # do_flag drain|resume
    lease_read "$name"
    if [ "$1" = resume ]; then rm -f "$LDIR/drain"
    else printf 'drained\n' >"$LDIR/drain" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write $LDIR/drain"; fi
    lease_emit "$name"
}
# the lease's GPUs from its controller's view: each node of the allocation has the lease's GPU count;
# a running step holds the GPU indices its started marker recorded (SLURM_STEP_GPUS)
do_gpus() {
    lease_read "$name"
    [ -n "$L_sq" ] || rsk_fail "$RSK_E_USAGE" lease-not-running "lease $name holds no allocation any more (rsk lease status $name)"
    [ -n "$L_ctl" ] || return 0 # not started yet: no GPUs to show
    rsk_get "$L" gpus; g=$RSK_F
    rsk_get "$L" partition; p=$RSK_F
    rsk_get "$L_ctl" nodes
    for node in $(printf '%s' "$RSK_F" | tr ',' ' '); do
        rsk_emit node "name=$node" "state=$L_state" "partitions=$p" "gres=$(rsk_b64 "gpu:$g")" "used=$(rsk_b64 "")"
    done
    rsk_lease_steps "$project" | awk -v lease="$name" -v root="$RSK_ROOT/runs/$project" "$RSK_AWK"'
        $1 == "run" && $6 == lease && $12 == "-" {
            m = root "/" $3 "/t" $4 "/started"
            if ((getline s < m) <= 0) next
            close(m)
            if (kv(s, "gpus") != "") print $2, $3, $9, gpu_share(kv(s, "gpus")), kv(s, "t")
        }' | while read -r sid rid node gres start; do
        rsk_emit held "job=$sid" "name=$(rsk_b64 "rsk:$project:$rid")" "node=$node" "gres=$(rsk_b64 "$gres")" "start=$start"
    done
}

main() {
    rsk_start
    case ${1:-} in status | drain | resume | close | gpus) ;; *) set -- ;; esac
    if [ $# -lt 2 ] || [ $# -gt 5 ]; then rsk_fail "$RSK_E_USAGE" usage "usage: lease status|drain|resume|close|gpus PROJECT [NAME [JOB RID]]"; fi
    project=$2 name=${3:-} held_job=${4:-} held_rid=${5:-}
    [ -z "$held_job" ] || rsk_is_uint "$held_job" || rsk_fail "$RSK_E_USAGE" usage "a lease's job is a number"
    [ -z "$held_rid" ] || rsk_need_token request "$held_rid"
    rsk_need_token project "$project"
    [ -z "$name" ] || rsk_need_token lease "$name"
    [ -n "$name" ] || [ "$1" = status ] || rsk_fail "$RSK_E_USAGE" usage "lease $1 needs a lease name"
    case $1 in status) do_status ;; close) do_close ;; gpus) do_gpus ;; *) do_flag "$1" ;; esac
}
