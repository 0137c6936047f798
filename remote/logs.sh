# shellcheck shell=sh
# rsk logs: a bounded tail of a job's stdout or stderr, for jobs this project launched.
#   logs PROJECT JOBID STREAM MAXBYTES [LINES]     STREAM is stdout or stderr; at most LINES lines
#   (all, when 0 or not given) and never more than MAXBYTES bytes
# Prints @@log (state of the run) and @@chunk lines (base64, at most MAXBYTES in all).

main() {
    rsk_start
    if [ $# -lt 4 ] || [ $# -gt 5 ]; then rsk_fail "$RSK_E_USAGE" usage "usage: logs PROJECT JOBID STREAM MAXBYTES [LINES]"; fi
    lines=${5:-0}
    rsk_is_uint "$lines" || rsk_fail "$RSK_E_USAGE" usage "LINES must be a number"
    rsk_need_token project "$1"
    case $2 in '' | *[!0-9_]*) rsk_fail "$RSK_E_USAGE" bad-job "job id must be a number (or ARRAY_INDEX)" ;; esac
    case $3 in stdout | stderr) ;; *) rsk_fail "$RSK_E_USAGE" bad-stream "stream is stdout or stderr" ;; esac
    rsk_is_uint "$4" || rsk_fail "$RSK_E_USAGE" usage "MAXBYTES must be a number"
    jf=$(rsk_journal_file "$1")
    # the request and task index of this exact job id (compared as a whole string, never a pattern)
    found=$(awk -v job="$2" '
        function kv(key,    i) { for (i = 1; i <= NF; i++) if (index($i, key "=") == 1) return substr($i, length(key) + 2); return "" }
        (kv("ev") == "accepted" || kv("ev") == "reconciled") && kv("job") == job && kv("rid") ~ /^[A-Za-z0-9_][A-Za-z0-9._-]*$/ && kv("idx") ~ /^[0-9]*$/ { r = kv("rid") " " kv("idx") }
        END { print r }' "$jf" 2>/dev/null || true)
    [ -n "${found% }" ] || rsk_fail "$RSK_E_USAGE" not-ours "job $2 was not launched through rsk in project $1"
    rid=${found%% *}
    idx=${found#* }
    run="$RSK_ROOT/runs/$1/$rid"
    [ -z "$idx" ] || run="$run/t$idx"
    started=no
    ended=''
    [ ! -f "$run/started" ] || started=yes
    [ ! -f "$run/ended" ] || ended=$(cat "$run/ended")
    size=0
    [ ! -f "$run/$3" ] || size=$(wc -c <"$run/$3" | tr -d ' ')
    rsk_emit log "rid=$rid" "started=$started" "ended=$(rsk_b64 "$ended")" "size=$size"
    if [ -f "$run/$3" ]; then
        if [ "$lines" -gt 0 ]; then tail -n "$lines" "$run/$3"; else cat "$run/$3"; fi | tail -c "$4" \
            | base64 | tr -d '\n' | fold -w 4000 | while IFS= read -r chunk || [ -n "$chunk" ]; do
            rsk_emit chunk "$chunk"
        done
    fi
}
