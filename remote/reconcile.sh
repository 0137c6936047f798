# shellcheck shell=sh
# rsk reconcile PROJECT: every task whose last journal event is an intent is "reconciled job=J" when Slurm (by the
# job's name, or by its stdout path under the request's run directory, which a running job cannot change), a run marker or
# a lease's queue knows its job, or an active job of the account Slurm took since the ledger's oldest hold with no
# outcome (stdin: "held LIST" and "since EPOCH") runs a batch script in the request's run directory (Slurm's copy
# of the script, which no job can change: ADR 0039); else "unresolved unknown=J,..." while Slurm does not give the
# script of such a job (it could be the intent's: the intent stays open); else "abandoned" (the lock is held: the
# writer died before sbatch). Never resubmits. The stage of a job that ended
# without publishing (out.stage) is set aside as partial/.

main() {
    rsk_start
    rsk_read_held
    IFS=' ' read -r rsk_w rsk_v || true
    [ "${rsk_w:-}" != since ] || rsk_since "${rsk_v:-}"
    [ $# -eq 1 ] || rsk_fail "$RSK_E_USAGE" usage "usage: reconcile PROJECT"
    rsk_need_token project "$1"
    project=$1
    jf=$RSK_ROOT/journal/$project.log
    open=''
    if [ -f "$jf" ]; then
        rsk_lock "$project"
        # "rid idx plan task" of every task whose last event is an intent (exact fields, never patterns)
        open=$(awk "$RSK_AWK"'
            {
                r = kv($0, "rid"); e = kv($0, "ev"); i = dash(kv($0, "idx"))
                if (!is_rid(r) || e !~ /^(intent|accepted|reconciled|abandoned|failed|refused)$/) next
                k = r " " i
                if (!(k in last)) order[++n] = k
                last[k] = e; plan[k] = kv($0, "plan"); task[k] = kv($0, "task")
            }
            END { for (x = 1; x <= n; x++) { k = order[x]; if (last[k] == "intent") print k, plan[k], dash(task[k]) } }' "$jf")
    fi
    count=0
    rsk_block_start
    results='' found=''
    if [ -n "$open" ]; then
        rsk_need_slurm # one read of the queue: the evidence of every open intent
        while read -r rid idx plan task; do
            count=$((count + 1))
            [ "$task" != - ] || task=''
            i=$idx
            [ "$i" != - ] || i=0
            job=$(rsk_evidence_lines "$project" "$rid" | awk -v n="rsk:$project:$rid" -v d="$RSK_ROOT/runs/$project/$rid" \
                -v i="$i" "$RSK_AWK"'evidence($0, n, d) && EV_IDX == i { print EV_JOB; exit }')
            found="$found$rid $idx $plan ${task:--} ${job:--}
"
        done <<EOT
$open
EOT
        # an intent with no evidence: the account's jobs since the ledger's oldest unknown outcome that no book holds,
        # by the run directory of their batch scripts (Slurm's copy, which no job can change)
        scripts=''
        case $found in *" -
"*) scripts=$(rsk_script_runs "$(printf '%s' "$found" | awk '$5 != "-" { printf "%s ", $5 }')") ;; esac
        unknown=$(printf '%s\n' "$scripts" | awk '$2 == "?" { printf "%s%s", s, $1; s = "," }')
        while read -r rid idx plan task job; do
            [ -n "$rid" ] || continue
            [ "$task" != - ] || task=''
            i=$idx
            [ "$i" != - ] || i=0
            [ "$job" != - ] || job=$(printf '%s\n' "$scripts" | awk -v d="$RSK_ROOT/runs/$project/$rid" -v i="$i" '
                $2 == d { k = index($1, "_") ? substr($1, index($1, "_") + 1) + 0 : 0; if (k == i + 0) { print $1; exit } }')
            [ -n "$job" ] || job=-
            if [ "$job" != - ]; then
                rsk_jline reconciled "$rid" "$plan" "$idx" "task=$task" "job=$job"
                results="${results}rid=$rid idx=$i task=$task plan=$plan result=reconciled job=$job unknown=
"
            elif [ -n "$unknown" ]; then # left open: nothing the cluster shows proves the intent submitted nothing
                results="${results}rid=$rid idx=$i task=$task plan=$plan result=unresolved job= unknown=$unknown
"
            else
                rsk_jline abandoned "$rid" "$plan" "$idx" "task=$task" code=no-evidence
                results="${results}rid=$rid idx=$i task=$task plan=$plan result=abandoned job= unknown=
"
            fi
        done <<EOT
$found
EOT
    fi
    rsk_journal_write "$project" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write the journal"
    printf '%s' "$results" | while read -r a b c d e f g; do rsk_emit reconcile "$a" "$b" "$c" "$d" "$e" "$f" "$g"; done
    # stale stages: a job killed before its wrapper could publish or set aside its $RSK_OUT leaves out.stage;
    # once Slurm runs it no more, the stage becomes partial/, never a result (a lease's steps are left alone)
    stale=0
    [ -n "$RSK_SLURM" ] || rsk_squeue
    if [ "$RSK_SLURM" = up ]; then
        active=" $(rsk_active_jobs "$project" | tr '\n' ' ') "
        for st in "$RSK_ROOT/runs/$project"/*/t*/out.stage; do
            d=${st%/out.stage}
            if [ ! -d "$st" ] || [ ! -f "$d/started" ]; then continue; fi
            IFS= read -r m <"$d/started" || true
            rsk_get "$m" job
            case $RSK_F in '' | *s*) continue ;; esac
            case $active in *" $RSK_F "*) continue ;; esac
            rm -rf "$d/partial" && mv "$st" "$d/partial" && stale=$((stale + 1))
        done
    fi
    rsk_emit reconciled "open=$count" "stale=$stale"
}
