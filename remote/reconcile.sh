#!/bin/sh
# rsk reconcile: resolve every intent that has no outcome, from Slurm's evidence; never resubmit.
#   reconcile.sh PROJECT
# For each request whose last journal event is an intent: a job with its rsk identity (squeue, or
# the wrapper's started marker) means it was submitted -> "reconciled job=J"; no evidence while
# the project lock is held means the process died before sbatch -> "abandoned" (safe to launch again).
set -eu
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

main() {
    rsk_start
    [ $# -eq 1 ] || rsk_fail "$RSK_E_USAGE" usage "usage: reconcile.sh PROJECT"
    rsk_need_token project "$1"
    project=$1
    jf=$(rsk_journal_file "$project")
    open=''
    if [ -f "$jf" ]; then
        rsk_need_writable "$RSK_ROOT/journal"
        rsk_lock "$RSK_ROOT/journal/$project.lock"
        open=$(awk '
            function kv(key,    i) { for (i = 1; i <= NF; i++) if (index($i, key "=") == 1) return substr($i, length(key) + 2); return "" }
            { r = kv("rid"); last[r] = kv("ev"); plan[r] = kv("plan"); if (!(r in seen)) { seen[r] = 1; order[++n] = r } }
            END { for (i = 1; i <= n; i++) if (last[order[i]] == "intent") print order[i] " " plan[order[i]] }' "$jf")
    fi
    count=0
    if [ -n "$open" ]; then
        squeue -h -u "$(id -un)" -o '%i' >/dev/null 2>&1 \
            || rsk_fail "$RSK_E_UNAVAILABLE" slurm-unavailable "squeue failed: cannot look for evidence now"
        while read -r rid plan; do
            count=$((count + 1))
            job=$(rsk_find_job "$project" "$rid" "$RSK_ROOT/runs/$project/$rid")
            if [ -n "$job" ]; then
                rsk_journal "$project" reconciled "$rid" "$plan" "job=$job"
                rsk_emit reconcile "rid=$rid" "plan=$plan" result=reconciled "job=$job"
            else
                rsk_journal "$project" abandoned "$rid" "$plan" code=no-evidence
                rsk_emit reconcile "rid=$rid" "plan=$plan" result=abandoned
            fi
        done <<EOT
$open
EOT
    fi
    rsk_emit reconciled "open=$count"
}

main "$@"
