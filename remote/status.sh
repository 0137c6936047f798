#!/bin/sh
# rsk status: the state of every rsk job of a project, in one call (never one call per job).
#   status.sh PROJECT [AFTER]     with AFTER, also the journal lines after that line (one call for events)
# Joins the sources in one awk pass: squeue (what Slurm still knows), the run markers the job
# wrapper writes (started / ended: exit code, signal), sacct where accounting works, and the attempt
# journal (what rsk submitted, cancels it asked for). Final states stay known after Slurm forgets a
# job, with or without sacct.
# Prints @@status, then one @@job line per job:
#   @@job rid=R task=K job=J state=S exit=N sig=SIG elapsed=SEC limit=SEC where=NODES|(REASON) submitted=T
#         res=NODES,CPUS,MEM_MB,GPUS,TIME_MIN
# and, with AFTER, @@journal n=LINE ... lines and @@cursor lines=N.
# state: pending running succeeded failed cancelled timed-out lost unknown
set -eu
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

main() {
    rsk_start
    if [ $# -lt 1 ] || [ $# -gt 2 ]; then rsk_fail "$RSK_E_USAGE" usage "usage: status.sh PROJECT [AFTER]"; fi
    rsk_need_token project "$1"
    project=$1
    after=${2:-}
    [ -z "$after" ] || rsk_is_uint "$after" || rsk_fail "$RSK_E_USAGE" usage "AFTER must be a line number"
    jf=$(rsk_journal_file "$project")
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/rsk-status.XXXXXX")
    trap 'rm -rf "$tmp"; rsk_finish' EXIT
    slurm=up
    if ! squeue -h -r -u "$(id -un)" -t all -o '%i|%j|%T|%M|%l|%R' >"$tmp/sq" 2>"$tmp/sq.err"; then
        slurm=down
        : >"$tmp/sq"
    fi
    # where accounting works, sacct knows final states of jobs squeue forgot (one call, last 30 days)
    : >"$tmp/acct"
    if [ "$slurm" = up ] && command -v sacct >/dev/null 2>&1 && sacct -n -X -j 1 -o JobID >/dev/null 2>&1; then
        sacct -n -X -P -u "$(id -un)" -S now-30days -o JobID,JobName,State,ExitCode >"$tmp/acct" 2>/dev/null || : >"$tmp/acct"
    fi
    runs="$RSK_ROOT/runs/$project"
    if [ -d "$runs" ]; then
        find "$runs" \( -name started -o -name ended \) -type f -exec awk '{ print FILENAME " " $0 }' {} + \
            >"$tmp/markers" 2>/dev/null || true
    else
        : >"$tmp/markers"
    fi
    [ -f "$jf" ] || jf=/dev/null
    rsk_emit status "slurm=$slurm" "t=$(rsk_now)" "project=$project"
    awk -v prefix="$(rsk_job_prefix "$project")" -v runs="$runs" -v sqf="$tmp/sq" -v mkf="$tmp/markers" -v acf="$tmp/acct" \
        -v slurm="$slurm" -v after="$after" -f "$RSK_DIR/status.awk" "$jf"
}

main "$@"
