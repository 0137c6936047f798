# shellcheck shell=sh
# rsk status PROJECT [AFTER] (stdin: an optional "held" line): the raw facts of every rsk job and step of a project
# in one call, one @@job line each in one shape, joined in one awk pass (status.awk); with AFTER, the journal lines
# after it (docs/protocol.md, "Other entries"). It decides nothing: rsk.wire.states does.

main() {
    rsk_start
    rsk_read_held # the jobs the ledger holds: found by id, listed even when the journal lost them
    if [ $# -lt 1 ] || [ $# -gt 2 ]; then rsk_fail "$RSK_E_USAGE" usage "usage: status PROJECT [AFTER]"; fi
    rsk_need_token project "$1"
    project=$1 after=${2:-} runs=$RSK_ROOT/runs/$1 jf=$RSK_ROOT/journal/$1.log
    [ -z "$after" ] || { rsk_need_line AFTER "$after"; after=$RSK_V; }
    [ -f "$jf" ] || jf=/dev/null
    jn=$(wc -l <"$jf") # the journal as it was before Slurm's word: a job it names was submitted before squeue ran
    rsk_squeue
    # where accounting works, sacct knows final states of jobs squeue forgot (one call, last 30 days; where it
    # does not, it fails at once)
    acct=''
    if [ "$RSK_SLURM" = up ] && command -v sacct >/dev/null 2>&1; then
        acct=$(sacct -n -X -P -u "$RSK_USER" -S now-30days -o JobID,State,ExitCode,ElapsedRaw,TimelimitRaw 2>/dev/null) || acct=''
    fi
    rsk_emit status "slurm=$RSK_SLURM" "t=$(rsk_now)" "project=$project"
    # One pipe into status.awk, never a file: what Slurm said cannot be rewritten on its way by a job of the
    # account. Sections in a fixed order, each opened by a line that no line of the one before can be:
    # squeue's and sacct's lines start with a job id, the markers' with their path under runs/.
    {
        printf '%s\n' "$RSK_HELD" "$RSK_SQ" '-- acct' "$acct" '-- markers'
        [ ! -d "$runs" ] || find "$runs" \( -name ended -type f -exec awk '{ print FILENAME " " $0 }' {} + \) \
            -o \( -path '*/result/.rsk-manifest' -type f -print \) 2>/dev/null || true
        echo '-- steps' # a line per lease ("L NAME STATE JOB"), then the steps of the project's leases
        rsk_sq_leases "$project"
        for lf in "$RSK_ROOT/leases/$project"/*/lease; do
            [ -f "$lf" ] || continue
            lf=${lf%/lease}
            rsk_lease "$project" "${lf##*/}"
            [ ! -f "$LDIR/drain" ] || case $L_state in running | draining) L_state=drained ;; esac
            printf 'L %s %s %s\n' "${lf##*/}" "$L_state" "${L_job:--}"
        done
        [ ! -d "$RSK_ROOT/leases/$project" ] || rsk_lease_steps "$project"
    } | RSK_NONCE=$RSK_NONCE awk -v prefix="rsk:$project:" -v runs="$runs" -v jf="$jf" -v after="$after" \
        -v upto="$jn" "$RSK_AWK$RSK_STATUS_AWK" - "$jf"
}
