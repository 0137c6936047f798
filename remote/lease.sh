# shellcheck shell=sh
# rsk lease: a project's leases, as their directories and controllers say (docs/leases.md).
#   lease status PROJECT [NAME]    one @@lease line per lease
#   lease drain PROJECT NAME       the controller starts no new step until resume (running ones go on)
#   lease resume PROJECT NAME
#   lease close PROJECT NAME       queued steps are cancelled, the allocation ends (@@closed)
#   lease gpus PROJECT NAME        the lease's GPUs and the steps holding them, as @@node and @@held
#                                  lines in the form of the gpus program
# A lease's Slurm job is touched only while it still carries the lease's identity (rsk:PROJECT:RID).

lease_read() { # lease_read NAME: LDIR and L (the lease file's line); fails when the lease does not exist
    LDIR=$(rsk_lease_dir "$project" "$1")
    [ -f "$LDIR/lease" ] || rsk_fail "$RSK_E_USAGE" no-lease "project $project has no lease $1 on this cluster"
    L=$(cat "$LDIR/lease")
    LJOB=$(rsk_field "$L" job)
    LRID=$(rsk_field "$L" rid)
}

lease_sq() { # lease_sq: the Slurm state of the lease's job ("" when Slurm no longer runs it)
    squeue -h -j "$LJOB" -t PD,R,CG,S,CF -o '%T|%j' 2>/dev/null | awk -F'|' -v n="rsk:$project:$LRID" '$2 == n { print $1; exit }'
}

count() { # count GLOB...: how many of the files exist
    rsk_k=0
    for rsk_f in "$@"; do [ ! -f "$rsk_f" ] || rsk_k=$((rsk_k + 1)); done
    printf '%s' "$rsk_k"
}

lease_emit() { # lease_emit NAME
    lease_read "$1"
    sq=$(lease_sq)
    ctl=$(cat "$LDIR/ctl" 2>/dev/null || true)
    [ "$(rsk_field "$ctl" job)" = "$LJOB" ] || ctl=''
    if [ -z "$sq" ]; then
        if [ -f "$LDIR/closed" ]; then state=closed; else state=ended; fi
    elif [ "$sq" = PENDING ]; then
        state=pending
    elif [ -n "$ctl" ]; then
        state=$(rsk_field "$ctl" state)
    else
        state=starting
    fi
    running=$(count "$LDIR"/run/*.step)
    ended=$(count "$LDIR"/end/*.step)
    case $state in closed | ended) ended=$((ended + running)) running=0 ;; esac # gone with the allocation
    rsk_emit lease "name=$1" "job=$LJOB" "rid=$LRID" "state=$state" "nodes=$(rsk_field "$L" nodes)" \
        "gpus=$(rsk_field "$L" gpus)" "cpus=$(rsk_field "$L" cpus)" "mem=$(rsk_field "$L" mem)" \
        "time=$(rsk_field "$L" time)" "partition=$(rsk_field "$L" partition)" "drain=$(rsk_field "$L" drain)" \
        "overrun=$(rsk_field "$L" overrun)" "hosts=$(rsk_field "$ctl" nodes)" "start=$(rsk_field "$ctl" start)" \
        "end=$(rsk_field "$ctl" end)" "queued=$(count "$LDIR"/q/*.step)" "running=$running" \
        "ended=$ended" "drained=$(count "$LDIR/drain")"
}

do_status() {
    if [ -n "$name" ]; then
        lease_emit "$name"
        return 0
    fi
    for f in "$RSK_ROOT/leases/$project"/*/lease; do
        [ -f "$f" ] || continue
        d=${f%/lease}
        lease_emit "${d##*/}"
    done
}

do_close() {
    lease_read "$name"
    rsk_lock "$project"
    printf 'job=%s\n' "$LJOB" >"$LDIR/closed"
    rsk_block_start
    n=0
    for f in "$LDIR"/q/*.step; do
        [ -f "$f" ] || continue
        line=$(cat "$f")
        seq=$(rsk_field "$line" seq)
        mv "$f" "$LDIR/end/$seq.step" 2>/dev/null || continue # the controller claimed it first
        printf 'lease-closed\n' >"$LDIR/end/$seq.why"
        mv "$LDIR/q/$seq.sh" "$LDIR/end/$seq.sh" 2>/dev/null || true
        rsk_jline cancelled "$(rsk_field "$line" rid)" "$(rsk_field "$line" plan)" "$(rsk_field "$line" idx)" \
            "job=$(rsk_field "$line" job)" "task=$(rsk_field "$line" task)" code=lease-closed
        n=$((n + 1))
    done
    result=ended
    if [ -n "$(lease_sq)" ]; then
        if scancel "$LJOB" 2>/dev/null; then
            rsk_jline cancelled "$LRID" "$(rsk_field "$L" plan)" 0 "job=$LJOB" code=lease-closed
            result=cancelled
        else
            result=failed
        fi
    fi
    rsk_journal_write "$project" || true
    rsk_emit closed "name=$name" "job=$LJOB" "result=$result" "queued=$n"
    [ "$result" != failed ] || rsk_fail "$RSK_E_SBATCH" scancel-failed "scancel $LJOB failed; the queued steps were cancelled"
}

do_flag() { # do_flag drain|resume
    lease_read "$name"
    if [ "$1" = drain ]; then
        printf 'drained\n' >"$LDIR/drain" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write $LDIR/drain"
    else
        rm -f "$LDIR/drain"
    fi
    lease_emit "$name"
}

# the lease's GPUs from its controller's view: each node of the allocation has the lease's GPU count;
# a running step holds the GPU indices its started marker recorded (SLURM_STEP_GPUS)
do_gpus() {
    lease_read "$name"
    ctl=$(cat "$LDIR/ctl" 2>/dev/null || true)
    [ -n "$(lease_sq)" ] || rsk_fail "$RSK_E_USAGE" lease-not-running "lease $name holds no allocation any more (rsk lease status $name)"
    [ "$(rsk_field "$ctl" job)" = "$LJOB" ] || return 0 # not started yet: no GPUs to show
    g=$(rsk_field "$L" gpus)
    for node in $(printf '%s' "$(rsk_field "$ctl" nodes)" | tr ',' ' '); do
        rsk_emit node "name=$node" "state=$(rsk_field "$ctl" state)" "partitions=$(rsk_field "$L" partition)" \
            "gres=$(rsk_b64 "gpu:$g")" "used=$(rsk_b64 "")"
    done
    rsk_lease_steps "$project" | awk -v lease="$name" -v root="$RSK_ROOT/runs/$project" -v nonce="$RSK_NONCE" '
        function kv(line, key,    i, n, w) { n = split(line, w, " "); for (i = 1; i <= n; i++) if (index(w[i], key "=") == 1) return substr(w[i], length(key) + 2); return "" }
        $1 == "run" && $6 == lease && $12 == "-" {
            m = root "/" $3 "/t" $4 "/started"
            if ((getline s < m) <= 0) next
            close(m)
            gpus = kv(s, "gpus"); if (gpus == "") next
            print $2, $3, $9, gpus, kv(s, "t")
        }' | while read -r sid rid node gpus start; do
        rsk_emit held "job=$sid" "name=$(rsk_b64 "rsk:$project:$rid")" "node=$node" \
            "gres=$(rsk_b64 "gpu:$(printf '%s' "$gpus" | tr ',' '\n' | grep -c .)(IDX:$gpus)")" "start=$start"
    done
}

main() {
    rsk_start
    if [ $# -lt 2 ] || [ $# -gt 3 ]; then rsk_fail "$RSK_E_USAGE" usage "usage: lease status|drain|resume|close|gpus PROJECT [NAME]"; fi
    cmd=$1
    project=$2
    name=${3:-}
    rsk_need_token project "$project"
    [ -z "$name" ] || rsk_need_token lease "$name"
    case $cmd in
        status) do_status ;;
        drain | resume) [ -n "$name" ] || rsk_fail "$RSK_E_USAGE" usage "lease $cmd needs a lease name"; do_flag "$cmd" ;;
        close) [ -n "$name" ] || rsk_fail "$RSK_E_USAGE" usage "lease close needs a lease name"; do_close ;;
        gpus) [ -n "$name" ] || rsk_fail "$RSK_E_USAGE" usage "lease gpus needs a lease name"; do_gpus ;;
        *) rsk_fail "$RSK_E_USAGE" usage "usage: lease status|drain|resume|close|gpus PROJECT [NAME]" ;;
    esac
}
