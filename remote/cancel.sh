# shellcheck shell=sh
# rsk cancel PROJECT job JOBID | rid REQUEST_ID | batch REQUEST_ID (stdin: an optional "held" line): cancels the job,
# or the request's jobs (its attempts R.aN too), of this project, and answers on Slurm's word (docs/protocol.md). A job
# is the request's while the ledger holds it (by id, whatever its name), or while Slurm lists it named rsk:PROJECT:RID
# or writing under the request's run directory; a journal line alone touches nothing (a reused id, a forged line).
# A job of the account can hold the project's lock for ever: cancel waits for it a few seconds (a launch in flight
# ends), then goes on without it and journals nothing (docs/adr/0056). One awk pass over the queue and the journal
# decides, scancel takes the jobs in a few calls, one more read of the queue answers: linear in the jobs.

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
    rsk_try_lock "$project" 5 || rsk_emit warning code=lock-held "msg=$(rsk_b64 "the lock of project $project could not be taken in \
5 s (another rsk command of the project, or a job of the account, holds it): cancelled all the same, not journaled")"
    [ -f "$jf" ] || jf=/dev/null
    rsk_need_slurm
    # "JOB RID IDX TASK PLAN VERDICT" for each job asked for, newest first (a chain's later link never starts in
    # between): kill (Slurm runs it, and it is the request's), step (a lease's), finished (Slurm lists it no more, or
    # ended), not-ours (Slurm runs it under another identity)
    jobs=$(printf '%s\n' "$RSK_HELD" "$RSK_SQ" | awk -v mode="$mode" -v value="$value" -v jf="$jf" \
        -v prefix="rsk:$project:" -v runs="$RSK_ROOT/runs/$project" "$RSK_AWK"'
        function want(r) { return is_rid(r) && (mode == "job" || r == value \
            || (index(r, value ".a") == 1 && substr(r, length(value) + 3) ~ /^[0-9]+$/)) }
        function take(j, r, rest) { if (!(j in sr)) { sr[j] = r; sx[j] = "- - -" } if (sr[j] == r && rest !~ / -$/) sx[j] = rest }
        NR == 1 { held_jobs($0, h); next } # (a line, never an argument: 10,000 of them pass the limit on one)
        FILENAME != jf { # Slurm: whose request each active job is, by the ledger, else its name, else its output path
            sq($0)
            if (!active(SQ_STATE)) next
            r = SQ_ID in h ? h[SQ_ID] : index(SQ_NAME, prefix) == 1 ? substr(SQ_NAME, length(prefix) + 1) : ""
            if (!(SQ_ID in h) && !want(r) && sq_under(runs)) { r = substr(SQ_OUT, length(runs) + 2); sub(/\/.*/, "", r) }
            on[SQ_ID] = want(r) ? r : ""
            if (on[SQ_ID] != "" && (mode != "job" || SQ_ID == value)) take(SQ_ID, r, "- - -")
            next
        }
        kv($0, "ev") == "accepted" || kv($0, "ev") == "reconciled" {
            j = kv($0, "job"); r = kv($0, "rid"); i = kv($0, "idx")
            if (is_job(j) && want(r) && (mode != "job" || j == value) && (!(j in h) || h[j] == r))
                take(j, r, (i ~ /^[0-9]+$/ ? i : "-") " " dash(clean(kv($0, "task"))) " " dash(clean(kv($0, "plan"))))
        }
        END {
            for (j in h) if (mode == "job" ? j == value : want(h[j])) take(j, h[j], "- - -")
            for (j in sr) print j, sr[j], sx[j], (j ~ /s/ ? "step" : !(j in on) ? "finished" : on[j] != "" ? "kill" : "not-ours")
        }' - "$jf" | sort -rn)
    # a lease's steps: a queued one leaves the queue (rsk_unqueue: the controller claims it by a move of its own, and one
    # of the two wins); a running one is cancelled as the Slurm step its started marker names, while that step carries
    # the step's identity (squeue -s: the one query that lists steps); "-": started, not yet running, or an older marker
    steps=''
    case $jobs in *" step"*) steps=$({ rsk_lease_steps "$project"; echo --; squeue -a -h -s -u "$RSK_USER" -o '%i|%j' 2>/dev/null
        echo --; printf '%s\n' "$jobs"; } | awk -v runs="$RSK_ROOT/runs/$project" -v prefix="rsk:$project:" "$RSK_AWK"'
            $0 == "--" { p++; next } !p { at[$2] = $1 " " $6 " " $7; next } p == 1 { ss[$0]; next } $6 != "step" { next }
            { w = $1 in at ? at[$1] : "- - -"; s = "+"; f = runs "/" $2 "/t" ($3 == "-" ? 0 : $3) "/started"
              if (w ~ /^run /) { s = (getline m < f) > 0 ? kv(m, "slurm") : ""; s = s !~ /^[0-9]+(\.[0-9]+)*$/ ? "-" : (s "|" prefix $2) in ss ? s : "+" }
              close(f); print $1, $2, $3, $4, $5, w, s }' | while read -r job rid idx task plan where lease seq s; do
            result=finished
            case $where:$s in
                q:*) ! rsk_unqueue "$RSK_ROOT/leases/$project/$lease" "$seq" cancelled || result=cancelled ;;
                run:-) result=failed ;;
                run:[0-9]*) ! scancel "$s" 2>/dev/null || result=cancelled ;;
            esac
            printf '%s %s %s %s %s %s\n' "$job" "$rid" "$idx" "$task" "$plan" "$result"
        done) ;;
    esac
    # the jobs to cancel, newest first, in scancel calls of 200 words at most, an array's tasks as ARRAY_[a-b,c]
    # shellcheck disable=SC2086  # job ids
    printf '%s\n' "$jobs" | awk '$6 == "kill" && $1 ~ /_/ { a = substr($1, 1, index($1, "_") - 1); i = substr($1, length(a) + 2) + 0
            if (!(a in lo)) { w[++m] = a; lo[a] = hi[a] = i } x[a, i] = 1; if (i < lo[a]) lo[a] = i; if (i > hi[a]) hi[a] = i }
        $6 == "kill" && $1 !~ /_/ { w[++m] = $1 }
        END { for (k = 1; k <= m; k++) { a = w[k]; r = ""
                if (a in lo) { for (i = lo[a]; i <= hi[a]; i++) if ((a, i) in x) { for (e = i; (a, e + 1) in x; e++); r = r "," i (e > i ? "-" e : ""); i = e }
                    a = a "_[" substr(r, 2) "]" }
                printf "%s%s", a, (k % 200 && k < m ? " " : "\n") } }' | while read -r ids; do scancel $ids 2>/dev/null || true; done
    # Slurm's word after: one that ended by itself first is finished; one it lists no more pended (gone=1: a job that
    # started keeps its record; a pending task of an array is dropped from its array's record: ADR 0069)
    case $jobs in *" kill"*) rsk_need_slurm ;; esac
    out=$({ printf '%s\n' "$RSK_SQ" --; printf '%s\n' "$jobs" "$steps"; } | RSK_NONCE=$RSK_NONCE awk -v t="$(rsk_now)" "$RSK_AWK"'
        $0 == "--" { p = 1; next }
        !p { sq($0); st[SQ_ID] = SQ_STATE; next }
        NF == 6 && $6 != "step" {
            r = $6; k = $4 == "-" ? "" : $4
            if (r == "kill") r = !($1 in st) || st[$1] ~ /^(CANCELLED|COMPLETING)$/ ? "cancelled" : active(st[$1]) ? "failed" : "finished"
            print "@@" ENVIRON["RSK_NONCE"] " cancel job=" $1 " rid=" $2 " task=" k " result=" r ($6 == "kill" && !($1 in st) ? " gone=1" : "")
            if (r == "cancelled") print "J v=2 t=" t " ev=cancelled rid=" $2 " plan=" $5 " idx=" ($3 == "-" ? "" : $3) " job=" $1 (k == "" ? "" : " task=" k)
        }')
    [ -n "$out" ] || rsk_emit cancel "job=$value" result=not-ours # nothing of that id or request, anywhere
    printf '%s\n' "$out" | sed -n '/^@@/p'
    rsk_jblock "$out"
    [ -z "$RSK_LOCKED" ] || rsk_journal_write "$project" || true
}
