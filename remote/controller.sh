# shellcheck shell=sh disable=SC2154  # rsk_ldir, rsk_lgpus, ... are set by the generated header
# rsk lease controller (docs/leases.md, "The controller"): the payload of a lease's job, after the job wrapper. A step
# starts at most once: claiming it (q/ -> run/) comes before srun, and an entry in run/ never starts again; its srun,
# in a subshell of its own, writes run/SEQ.rc when it returns, whoever is the controller by then.

rsk_lease_log() { printf 'rsk lease %s: %s %s\n' "$rsk_lease" "$(rsk_now)" "$*"; }
rsk_lease_supervise() { # keeps one controller alive for the allocation; a new one finds everything on disk
    while :; do
        rsk_controller &
        rsk_cpid=$!
        rsk_put "$rsk_ldir/ctl.pid" "$rsk_cpid"
        rsk_crc=0
        wait "$rsk_cpid" || rsk_crc=$?
        [ "$rsk_crc" -ne 0 ] && [ ! -f "$rsk_ldir/closed" ] || return 0
        rsk_lease_log "the controller (pid $rsk_cpid) ended with rc=$rsk_crc; starting a new one"
        sleep 1
    done
}
rsk_ctl_write() { # rsk_ctl_write STATE: what the controller says about the lease, for rsk lease status
    rsk_put "$rsk_ldir/ctl" "job=$rsk_me nodes=$rsk_nodes_csv start=$rsk_t0 end=$rsk_lend drain=$rsk_drain state=$1 t=$(rsk_stamp)"
    rsk_state=$1
}
rsk_step_end() { # rsk_step_end SEQ WHY: the entry leaves run/ (or q/) for end/, its ended marker written if missing
    rsk_sf="$rsk_ldir/run/$1.step"
    [ -f "$rsk_sf" ] || rsk_sf="$rsk_ldir/q/$1.step"
    rsk_step_read "$rsk_sf" || return 0
    if [ -n "$2" ]; then
        printf '%s\n' "$2" >"$rsk_ldir/end/$1.why"
    elif [ ! -f "$rsk_sdir/ended" ] && [ -f "$rsk_sdir/started" ]; then
        # the step's wrapper could not say how it ended (killed hard): srun's status is what is known
        IFS= read -r rsk_s <"$rsk_sdir/started" || true
        rsk_get "$rsk_s" t
        rsk_ended "$rsk_sdir" "$(cat "$rsk_ldir/run/$1.rc" 2>/dev/null || echo 1)" KILL "${RSK_F:-}" "$((${rsk_time:-0} * 60))"
    fi
    for rsk_x in step sh at rc pid; do
        for rsk_d in run q; do
            [ ! -f "$rsk_ldir/$rsk_d/$1.$rsk_x" ] || mv "$rsk_ldir/$rsk_d/$1.$rsk_x" "$rsk_ldir/end/$1.$rsk_x"
        done
    done
}
# rsk_ctl_journal LINE: one sealed block of one line appended to the project's journal under the project's lock
rsk_ctl_journal() {
    (flock -w 60 9 && rsk_append "$rsk_root/journal/$rsk_project.log" "$1
") 9>>"$rsk_root/journal/$rsk_project.lock"
}
rsk_step_read() { # rsk_step_read FILE: a queue entry's line (docs/leases.md) as rsk_rid, rsk_gpus ... and rsk_sdir
    [ -f "$1" ] || return 1
    rsk_line=''
    IFS= read -r rsk_line <"$1" || true
    rsk_get "$rsk_line" rid; rsk_rid=$RSK_F; rsk_get "$rsk_line" idx; rsk_idx=$RSK_F; rsk_get "$rsk_line" task; rsk_task=$RSK_F
    rsk_get "$rsk_line" plan; rsk_plan=$RSK_F; rsk_get "$rsk_line" job; rsk_job=$RSK_F; rsk_get "$rsk_line" time; rsk_time=$RSK_F
    rsk_get "$rsk_line" gpus; rsk_gpus=$RSK_F; rsk_get "$rsk_line" cpus; rsk_cpus=$RSK_F; rsk_get "$rsk_line" mem; rsk_mem=$RSK_F
    rsk_sdir="$rsk_root/runs/$rsk_project/$rsk_rid/t$rsk_idx"
}
# rsk_step_start SEQ NODE MINUTES: claim the entry (q/ -> run/), journal it, then srun it in a subshell that records
# srun's status; explicit node, GPUs, CPUs and memory, so Slurm gives each live step its own GPUs
rsk_step_start() {
    mv "$rsk_ldir/q/$1.step" "$rsk_ldir/run/$1.step" 2>/dev/null || return 0 # cancelled meanwhile
    mv "$rsk_ldir/q/$1.sh" "$rsk_ldir/run/$1.sh"
    rsk_step_read "$rsk_ldir/run/$1.step" || return 0
    rsk_s=$(rsk_stamp)
    printf 'node=%s gpus=%s cpus=%s mem=%s start=%s end=%s job=%s\n' "$2" "$rsk_gpus" "$rsk_cpus" "$rsk_mem" "$rsk_s" \
        "$((rsk_s + $3 * 60))" "$rsk_me" >"$rsk_ldir/run/$1.at"
    # every step it starts is in the journal first, as the entry says (whoever wrote it: rsk status compares it
    # with what the ledger allowed); one it cannot journal does not start
    rsk_jl="v=2 t=$(rsk_now) ev=step-started rid=$rsk_rid plan=$rsk_plan idx=$rsk_idx task=$rsk_task job=$rsk_job lease=$rsk_lease seq=$1 node=$2 res=1,$rsk_cpus,$rsk_mem,$rsk_gpus,$3"
    case $rsk_jl in *[!A-Za-z0-9._:,=\ -]*) rsk_jl='' ;; esac # one line of words, as rsk writes them
    if [ -z "$rsk_jl" ] || ! rsk_ctl_journal "$rsk_jl"; then
        rsk_step_end "$1" journal-unwritable
        rsk_lease_log "step $1 not started: the journal could not take its line"
        return 0
    fi
    mkdir -p "$rsk_sdir"
    if [ "$rsk_gpus" -gt 0 ]; then rsk_gres="gpu:$rsk_gpus"; else rsk_gres=none; fi
    (
        rsk_src=0
        "$rsk_srun" --nodes=1 --ntasks=1 --exact --nodelist="$2" --cpus-per-task="$rsk_cpus" --mem="$rsk_mem" \
            --gres="$rsk_gres" --time="$3" --job-name="rsk:$rsk_project:$rsk_rid" \
            --output="$rsk_sdir/stdout" --error="$rsk_sdir/stderr" --input=none --kill-on-bad-exit=1 \
            sh -c "$(cat "$rsk_ldir/run/$1.sh")" </dev/null >/dev/null 2>>"$rsk_ldir/srun.err" || rsk_src=$?
        rsk_put "$rsk_ldir/run/$1.rc" "$rsk_src"
    ) &
    printf '%s\n' "$!" >"$rsk_ldir/run/$1.pid"
    rsk_lease_log "step $rsk_job ($rsk_rid) started on $2 with $rsk_gpus GPU(s) for $3 min"
}
# rsk_reap: entries whose srun returned leave run/; entries nobody runs any more (the allocation that
# started them is gone, or their subshell died before srun returned) are lost, never started again
rsk_reap() {
    for rsk_f in "$rsk_ldir"/run/*.step; do
        [ -f "$rsk_f" ] || continue
        rsk_q=${rsk_f##*/} rsk_q=${rsk_q%.step} rsk_at='' rsk_why=''
        [ ! -f "$rsk_ldir/run/$rsk_q.at" ] || IFS= read -r rsk_at <"$rsk_ldir/run/$rsk_q.at" || true
        rsk_get "$rsk_at" job
        if [ -f "$rsk_ldir/run/$rsk_q.rc" ]; then
            rsk_step_end "$rsk_q" ''
        elif [ "$RSK_F" != "$rsk_me" ]; then
            rsk_why=lease-ended
            rsk_lease_log "step $rsk_q was started by an earlier allocation of this lease: lost with it"
        else
            rsk_p=$(cat "$rsk_ldir/run/$rsk_q.pid" 2>/dev/null || true)
            if [ -n "$rsk_p" ] && kill -0 "$rsk_p" 2>/dev/null; then continue; fi
            [ ! -f "$rsk_ldir/run/$rsk_q.rc" ] || continue # it returned just now
            # no srun status and no live subshell: a controller was killed between claiming and srun, or
            # the subshell itself was killed; wait a little for a step that did start to say so
            rsk_get "$rsk_at" start
            [ $(($(rsk_stamp) - ${RSK_F:-0})) -ge 30 ] || continue
            rsk_why=controller-lost
            rsk_lease_log "step $rsk_q has no srun any more: lost (not started again)"
        fi
        [ -z "$rsk_why" ] || rsk_step_end "$rsk_q" "$rsk_why"
        rsk_changed=1
    done
}
# rsk_schedule: FIFO with backfill (docs/leases.md), in one awk pass over each node's capacity, the running steps and
# the queue in order; a step longer than what is left of the lease is clipped or refused.
rsk_schedule() {
    rsk_plan_out=$(
        {
            printf 'C %s %s %s %s\n' "$(rsk_stamp)" "$rsk_lend" "$rsk_drain" "$rsk_overrun"
            for rsk_n in $rsk_nodes; do printf 'N %s %s %s %s\n' "$rsk_n" "$rsk_lgpus" "$rsk_lcpus" "$rsk_lmem"; done
            # the steps running (run/SEQ.at) and the queue in order (q/SEQ.step), each file's line read here
            for rsk_f in "$rsk_ldir"/run/*.at "$rsk_ldir"/q/*.step; do [ ! -f "$rsk_f" ] || printf 'F %s\n' "$rsk_f"; done
        } | awk "$RSK_AWK"'
            $1 == "F" {
                f = substr($0, 3); l = ""; getline l < f; close(f)
                if (f ~ /\.at$/) $0 = "R " kv(l, "node") " " kv(l, "gpus") " " kv(l, "cpus") " " kv(l, "mem") " " kv(l, "end")
                else $0 = "Q " kv(l, "seq") " " kv(l, "gpus") " " kv(l, "cpus") " " kv(l, "mem") " " kv(l, "time")
            }
            function fit(g, c, m,    k) { for (k = 1; k <= nn; k++) if (fg[nm[k]] >= g && fc[nm[k]] >= c && fm[nm[k]] >= m) return nm[k]; return "" }
            function shadow(g, c, m,    k, x, y, t, n, ord, sg, sc, sm) { # when running steps free enough for a step
                n = 0
                for (k = 1; k <= nr; k++) ord[++n] = k
                for (x = 1; x <= n; x++) for (y = x + 1; y <= n; y++) if (re[ord[y]] < re[ord[x]]) { t = ord[x]; ord[x] = ord[y]; ord[y] = t }
                for (k = 1; k <= nn; k++) { sg[nm[k]] = fg[nm[k]]; sc[nm[k]] = fc[nm[k]]; sm[nm[k]] = fm[nm[k]] }
                for (x = 1; x <= n; x++) {
                    k = ord[x]; sg[rn[k]] += rg[k]; sc[rn[k]] += rc[k]; sm[rn[k]] += rm[k]
                    if (sg[rn[k]] >= g && sc[rn[k]] >= c && sm[rn[k]] >= m) return re[k]
                }
                return -1
            }
            $1 == "C" { now = $2; lend = $3; drain = $4; ov = $5 }
            $1 == "N" { nm[++nn] = $2; fg[$2] = $3; fc[$2] = $4; fm[$2] = $5 }
            $1 == "R" { fg[$2] -= $3; fc[$2] -= $4; fm[$2] -= $5; nr++; rn[nr] = $2; rg[nr] = $3; rc[nr] = $4; rm[nr] = $5; re[nr] = $6 }
            $1 == "Q" { nq++; qs[nq] = $2; qg[nq] = $3; qc[nq] = $4; qm[nq] = $5; qt[nq] = $6 }
            END {
                sh = -1 # the reservation of the first step that does not fit: a later one starts only if it ends before
                for (i = 1; i <= nq; i++) {
                    t = qt[i] * 60
                    left = lend - now
                    if (t > left) {
                        if (ov == "refuse" || left < 60) { print "X", qs[i], "outlives-lease"; continue }
                        t = int(left / 60) * 60
                    }
                    node = fit(qg[i], qc[i], qm[i])
                    if (node != "" && (sh < 0 || now + t <= sh)) {
                        print "S", qs[i], node, t / 60
                        fg[node] -= qg[i]; fc[node] -= qc[i]; fm[node] -= qm[i]
                        nr++; rn[nr] = node; rg[nr] = qg[i]; rc[nr] = qc[i]; rm[nr] = qm[i]; re[nr] = now + t
                    } else if (sh < 0) {
                        sh = shadow(qg[i], qc[i], qm[i])
                        if (sh < 0) sh = lend
                    }
                }
            }'
    )
    [ -n "$rsk_plan_out" ] || return 0
    while read -r rsk_w rsk_a rsk_b rsk_c2; do
        case $rsk_w in
            S) rsk_step_start "$rsk_a" "$rsk_b" "$rsk_c2" ;;
            X)
                rsk_step_end "$rsk_a" "$rsk_b"
                rsk_lease_log "step $rsk_a would outlive the lease: not started ($rsk_b)" ;;
        esac
    done <<EOT
$rsk_plan_out
EOT
}
rsk_controller() {
    rsk_me=${SLURM_JOB_ID:-0}
    rsk_nodes=$(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null | tr '\n' ' ')
    rsk_nodes_csv=$(printf '%s' "$rsk_nodes" | tr ' ' ',' | sed 's/,$//')
    rsk_lend=$((rsk_t0 + rsk_limit))
    mkdir -p "$rsk_ldir/q" "$rsk_ldir/run" "$rsk_ldir/end"
    rsk_ctl_write running
    rsk_lease_log "controller holds nodes $rsk_nodes_csv ($rsk_lgpus GPUs, $rsk_lcpus CPUs, $rsk_lmem MB each) until $rsk_lend"
    rsk_changed=1 rsk_tick=0
    # a fifth of a second where sleep takes fractions (GNU, BSD, busybox), so a queued step starts
    # within a second; POSIX only promises whole seconds, and then the controller naps a second
    rsk_nap=1
    if sleep 0.01 2>/dev/null; then rsk_nap=0.2; fi
    while :; do
        if [ -f "$rsk_ldir/closed" ]; then
            rsk_ctl_write closed
            rsk_lease_log "closed: no new steps; the allocation ends"
            return 0
        fi
        rsk_reap
        rsk_want=running
        if [ -f "$rsk_ldir/drain" ]; then
            rsk_want=drained
        elif [ "$rsk_state" = draining ] || { [ $((rsk_tick % 5)) -eq 0 ] && [ "$(rsk_stamp)" -ge $((rsk_lend - rsk_drain * 60)) ]; }; then
            rsk_want=draining
        fi
        if [ "$rsk_want" != "$rsk_state" ]; then
            rsk_ctl_write "$rsk_want"
            rsk_changed=1
            case $rsk_want in
                draining) rsk_lease_log "draining: the allocation ends in under $rsk_drain min; running steps go on, no new ones start" ;;
                drained) rsk_lease_log "drained by a human (rsk lease drain): running steps go on, no new ones start" ;;
                running) rsk_lease_log "resumed: starting queued steps again" ;;
            esac
        fi
        set -- "$rsk_ldir"/q/*.step
        if [ "$rsk_state" = running ] && [ -f "$1" ] && { [ "$rsk_changed" = 1 ] || [ "$*" != "${rsk_seen:-}" ]; }; then
            rsk_changed=0 rsk_seen=$*
            rsk_schedule
        fi
        jobs >/dev/null 2>&1 || true # reaps finished subshells
        rsk_tick=$((rsk_tick + 1))
        sleep "$rsk_nap"
    done
}
