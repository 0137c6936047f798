# shellcheck shell=sh
# rsk reconcile PROJECT (stdin: optional "held" and "since" lines): every task whose last journal event is an intent
# is reconciled from evidence (rsk_evidence_lines, then rsk_script_runs: ADR 0039), left unresolved while Slurm does
# not give the script of a job that could be its own, else abandoned (the lock is held: the writer died before
# sbatch); with since, a job whose script runs a task no open intent names is reported (unknown=). Never
# resubmits (docs/protocol.md, "Other entries").

main() {
    rsk_start
    rsk_read_held
    [ $# -eq 1 ] || rsk_fail "$RSK_E_USAGE" usage "usage: reconcile PROJECT"
    rsk_need_token project "$1"
    project=$1 runs=$RSK_ROOT/runs/$1 jf=$RSK_ROOT/journal/$1.log
    open='' found='' results='' count=0
    rsk_block_start
    rsk_lock "$project"
    [ -f "$jf" ] || jf=/dev/null
    # "rid idx i plan task" of every task whose last event is an intent (exact fields, never patterns; i: idx or 0)
    open=$(awk "$RSK_AWK"'
        {
            r = kv($0, "rid"); e = kv($0, "ev"); i = dash(kv($0, "idx"))
            if (!is_rid(r) || e !~ /^(intent|accepted|reconciled|abandoned|failed|refused)$/) next
            k = r " " i
            if (!(k in last)) order[++n] = k
            last[k] = e; plan[k] = kv($0, "plan"); task[k] = kv($0, "task"); num[k] = i == "-" ? 0 : i
        }
        END { for (x = 1; x <= n; x++) { k = order[x]; if (last[k] == "intent") print k, num[k], plan[k], dash(task[k]) } }' "$jf")
    if [ -n "$open" ]; then
        rsk_need_slurm # one read of the queue; the evidence of every open intent, in one pass for each request
        count=$(printf '%s\n' "$open" | grep -c .)
        found="$(for rid in $(printf '%s\n' "$open" | awk '!s[$1]++ { print $1 }'); do
            { rsk_evidence_lines "$project" "$rid"; echo --; printf '%s\n' "$open"; } | awk -v r="$rid" -v n="rsk:$project:$rid" \
                -v d="$runs/$rid" "$RSK_AWK"'$0 == "--" { q = 1; next } !q { if (evidence($0, n, d) && !(EV_IDX in j)) j[EV_IDX] = EV_JOB; next }
                $1 == r { print $0, (($3 in j) ? j[$3] : "-") }'
        done)
"
    fi
    # the account's jobs that no book or journal line holds, since the ledger's oldest unknown outcome, by batch script:
    # for an intent with no evidence, and (with since) for a task whose every journal line a job may have erased
    scripts='' unknown=''
    case $found in *" -
"*) RSK_SINCE=${RSK_SINCE:-0} ;; esac
    if [ -n "$RSK_SINCE" ]; then
        [ -n "$RSK_SLURM" ] || rsk_need_slurm
        known=$(awk "$RSK_AWK"'kv($0, "ev") ~ /^(accepted|reconciled)$/ { printf "%s ", kv($0, "job") }' "$jf")
        scripts=$(rsk_script_runs "$project" "${known:-} $(printf '%s' "$found" | awk '$6 != "-" { printf "%s ", $6 }')")
        # unknown: jobs whose script Slurm does not give, and those whose script runs a task no open intent names: any
        # may be a request's (hidden by a job of the account, or a script of its own that claims it): never adopted
        unknown=$(printf '%s--\n%s\n' "$found" "$scripts" | awk '$0 == "--" { q = 1; next } !q { seen[$1 "/" $3] = 1; next }
            $1 == "?" || (NF && !(($1 "/" $2) in seen)) { printf "%s%s", s, ($1 == "?" ? $2 : $3); s = "," }')
    fi
    while read -r rid idx i plan task job; do
        [ -n "$rid" ] || continue
        [ "$task" != - ] || task=''
        [ "$job" != - ] || job=$(printf '%s\n' "$scripts" | awk -v r="$rid" -v i="$i" '$1 == r && $2 == i + 0 { print $3; exit }')
        u='' result=reconciled
        if [ -n "${job#-}" ]; then rsk_jline reconciled "$rid" "$plan" "$idx" "task=$task" "job=$job"
        elif [ -n "$unknown" ]; then result=unresolved u=$unknown # left open: nothing shows the intent submitted nothing
        else result=abandoned; rsk_jline abandoned "$rid" "$plan" "$idx" "task=$task" code=no-evidence; fi
        results="${results}rid=$rid idx=$i task=$task plan=$plan result=$result job=${job#-} unknown=$u
"
    done <<EOT
$found
EOT
    rsk_journal_write "$project" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write the journal"
    printf '%s' "$results" | while read -r a b c d e f g; do rsk_emit reconcile "$a" "$b" "$c" "$d" "$e" "$f" "$g"; done
    # stale stages: a job killed before its wrapper could publish or set aside its $RSK_OUT leaves out.stage;
    # once Slurm runs it no more, the stage becomes partial/, never a result (a lease's steps are left alone)
    stale=0
    [ -n "$RSK_SLURM" ] || rsk_squeue
    if [ "$RSK_SLURM" = up ]; then
        rsk_active_jobs "$project"
        for st in "$runs"/*/t*/out.stage; do
            d=${st%/out.stage}
            if [ ! -d "$st" ] || [ ! -f "$d/started" ]; then continue; fi
            IFS= read -r m <"$d/started" || true
            rsk_get "$m" job
            case $RSK_F in '' | *s*) continue ;; esac
            case ",$ACTIVE_JOBS," in *",$RSK_F,"*) continue ;; esac
            rm -rf "$d/partial" && mv "$st" "$d/partial" && stale=$((stale + 1))
        done
    fi
    rsk_emit reconciled "open=$count" "stale=$stale" "unknown=$unknown"
}
