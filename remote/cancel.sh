#!/bin/sh
# rsk cancel: cancel jobs this project launched through rsk, and only those.
#   cancel.sh PROJECT job JOBID | rid REQUEST_ID | batch REQUEST_ID
# A job qualifies when the journal accepted it for this project AND the live Slurm job with that id
# still carries the rsk identity (rsk:PROJECT:RID) in its name: a bare job id that Slurm reused is
# never touched. Prints one @@cancel line per job: result=cancelled|finished|not-ours.
set -eu
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

main() {
    rsk_start
    [ $# -eq 3 ] || rsk_fail "$RSK_E_USAGE" usage "usage: cancel.sh PROJECT job|rid|batch VALUE"
    rsk_need_token project "$1"
    project=$1
    mode=$2
    value=$3
    case $mode in
        job) case $value in '' | *[!0-9_]*) rsk_fail "$RSK_E_USAGE" bad-job "job id must be a number" ;; esac ;;
        rid | batch) rsk_need_token request-id "$value" ;;
        *) rsk_fail "$RSK_E_USAGE" usage "mode is job, rid or batch" ;;
    esac
    jf=$(rsk_journal_file "$project")
    [ -f "$jf" ] || { rsk_emit cancel "job=$value" result=not-ours; return 0; }
    rsk_need_writable "$RSK_ROOT/journal"
    rsk_lock "$RSK_ROOT/journal/$project.lock"
    # job rid task, for every accepted job that matches
    matches=$(awk -v mode="$mode" -v value="$value" '
        function kv(key,    i) { for (i = 1; i <= NF; i++) if (index($i, key "=") == 1) return substr($i, length(key) + 2); return "" }
        $0 ~ / ev=(accepted|reconciled) / {
            j = kv("job"); r = kv("rid")
            if ((mode == "job" && j == value) || (mode != "job" && r == value)) {
                t = kv("task"); print j " " r " " (t == "" ? "-" : t) " " kv("plan")
            }
        }' "$jf" | sort -u)
    if [ -z "$matches" ]; then
        rsk_emit cancel "job=$value" result=not-ours
        return 0
    fi
    live=$(squeue -h -r -u "$(id -un)" -o '%i|%j' 2>/dev/null) || rsk_fail "$RSK_E_UNAVAILABLE" slurm-unavailable "squeue failed: the controller does not answer"
    printf '%s\n' "$matches" | while read -r job rid task plan; do
        [ "$task" != - ] || task=''
        name=$(printf '%s\n' "$live" | awk -F'|' -v j="$job" '$1 == j { print $2; exit }')
        if [ -z "$name" ]; then
            rsk_emit cancel "job=$job" "rid=$rid" "task=$task" result=finished
        elif [ "$name" != "$(rsk_job_prefix "$project")$rid" ]; then
            rsk_emit cancel "job=$job" "rid=$rid" "task=$task" result=not-ours
        else
            rsk_journal "$project" cancel-requested "$rid" "$plan" "job=$job" "task=$task"
            if scancel "$job" 2>/dev/null; then
                rsk_journal "$project" cancelled "$rid" "$plan" "job=$job" "task=$task"
                rsk_emit cancel "job=$job" "rid=$rid" "task=$task" result=cancelled
            else
                rsk_emit cancel "job=$job" "rid=$rid" "task=$task" result=failed
            fi
        fi
    done
}

main "$@"
