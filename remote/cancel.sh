# shellcheck shell=sh
# rsk cancel PROJECT job JOBID | rid REQUEST_ID | batch REQUEST_ID (stdin: an optional "held" line): cancels a job
# the ledger holds (by id, whatever its name), or one the journal accepted for this project while Slurm's job of
# that id still carries its identity rsk:PROJECT:RID; a reused job id is never touched (docs/protocol.md).

main() {
    rsk_start
    rsk_read_held
    [ $# -eq 3 ] || rsk_fail "$RSK_E_USAGE" usage "usage: cancel PROJECT job|rid|batch VALUE"
    rsk_need_token project "$1"
    project=$1 mode=$2 value=$3
    case $mode in
        job) rsk_is_job_id "$value" || rsk_fail "$RSK_E_USAGE" bad-job "job id must be a number (a lease's step: LEASEJOBsSEQ)" ;;
        rid | batch) rsk_need_token request-id "$value" ;;
        *) rsk_fail "$RSK_E_USAGE" usage "mode is job, rid or batch" ;;
    esac
    jf=$RSK_ROOT/journal/$project.log
    [ -f "$jf" ] || [ -n "$RSK_HELD" ] || { rsk_emit cancel "job=$value" result=not-ours; return 0; }
    [ -f "$jf" ] || jf=/dev/null
    rsk_lock "$project"
    # "job rid idx task plan" for every accepted or held job that matches, newest first: a chain's later link never
    # starts in between
    matches=$(awk -v mode="$mode" -v value="$value" -v held=" $RSK_HELD" "$RSK_AWK"'
        # a request id takes its attempts too (R.a2, ...: rsk retry and rsk extend), as wait and status follow them
        function want(j, r) { return (mode == "job" && j == value) || (mode != "job" && (r == value \
            || (index(r, value ".a") == 1 && substr(r, length(value) + 3) ~ /^[0-9]+$/))) }
        function keep(j, r, rest,    h) { # one line a job: as the ledger holds it, else as journaled, its plan known
            h = index(held, " " j ":" r " ") > 0
            if (!(j in s) || h > hs[j] || (h == hs[j] && rest !~ / -$/)) { s[j] = j " " r " " rest; hs[j] = h }
        }
        BEGIN { n = split(held, w, " "); for (i = 1; i <= n; i++) { split(w[i], hp, ":"); if (want(hp[1], hp[2])) keep(hp[1], hp[2], "- - -") } }
        kv($0, "ev") == "accepted" || kv($0, "ev") == "reconciled" {
            j = kv($0, "job"); r = kv($0, "rid")
            if (is_job(j) && is_rid(r) && want(j, r)) keep(j, r, dash(kv($0, "idx")) " " dash(kv($0, "task")) " " dash(kv($0, "plan")))
        }
        END { for (j in s) print s[j] }' "$jf" | sort -rn)
    [ -n "$matches" ] || { rsk_emit cancel "job=$value" result=not-ours; return 0; }
    rsk_need_slurm
    steps=''
    case $matches in *s*) steps=$(rsk_lease_steps "$project") ;; esac
    rsk_block_start
    results='' kill=''
    while read -r job rid idx task plan; do
        [ "$task" != - ] || task=''
        [ "$idx" != - ] || idx=''
        case $job in *s*) cancel_step ;; *) cancel_job ;; esac
        results="${results}$job $rid ${idx:--} ${task:--} $plan $result
"
    done <<EOT
$matches
EOT
    # the jobs to cancel go to one scancel (which says 0 for a job that already ended), then Slurm's word says which
    # it cancelled: one that ended by itself first is finished
    # shellcheck disable=SC2086  # job ids
    [ -z "$kill" ] || { scancel $kill 2>/dev/null || true; rsk_need_slurm; }
    while read -r job rid idx task plan result; do
        [ "$result" != kill ] || { result=cancelled; ! rsk_sq_job "$job" || case $SQ_STATE in
            CANCELLED | COMPLETING) ;; *) if rsk_is_active "$SQ_STATE"; then result=failed; else result=finished; fi ;; esac; }
        [ "$task" != - ] || task=''
        [ "$result" != cancelled ] || rsk_jline cancelled "$rid" "$plan" "$idx" "job=$job" "task=$task"
        [ -z "$job" ] || rsk_emit cancel "job=$job" "rid=$rid" "task=$task" "result=$result"
    done <<EOT
$results
EOT
    rsk_journal_write "$project" || true
}
cancel_job() { # sets result for one Slurm job: touched only while it carries rsk:PROJECT:RID or the ledger holds it
    if ! rsk_sq_job "$job" || ! rsk_is_active "$SQ_STATE"; then
        result=finished
    elif [ "$SQ_NAME" != "rsk:$project:$rid" ] && case " $RSK_HELD" in *" $job:$rid "*) false ;; esac; then
        result=not-ours
    else
        result=kill kill="$kill $job"
    fi
}
# cancel_step: a queued step leaves the queue (under the project lock, so the controller either claimed it
# already or never will); a running one is cancelled as the Slurm step its started marker names, when
# that step still carries the step's identity (squeue -s: the one query that lists steps)
cancel_step() {
    # shellcheck disable=SC2046  # three words
    set -- $(printf '%s\n' "$steps" | awk -v j="$job" '$2 == j { print $1, $6, $7; exit }')
    result=finished
    [ $# -eq 3 ] || return 0
    case $1 in
        q) ! rsk_unqueue "$RSK_ROOT/leases/$project/$2" "$3" cancelled || result=cancelled ;;
        run)
            f=$RSK_ROOT/runs/$project/$rid/t${idx:-0}/started s=''
            [ ! -f "$f" ] || IFS= read -r s <"$f" || true
            rsk_get "$s" slurm
            case $RSK_F in
                *[!0-9.]* | '' | .* | *.) result=failed ;; # started but not yet running, or an older marker
                *) if squeue -h -s -j "${RSK_F%%.*}" -o '%i|%j' 2>/dev/null | grep -qxF "$RSK_F|rsk:$project:$rid" \
                    && scancel "$RSK_F" 2>/dev/null; then result=cancelled; fi ;;
            esac ;;
    esac
}
