# shellcheck shell=sh
# rsk logs PROJECT JOBID stdout|stderr MAXBYTES [LINES]: @@log, then @@chunk lines of at most the last LINES lines
# (all when 0) and MAXBYTES bytes of a job this project launched

main() {
    rsk_start
    if [ $# -lt 4 ] || [ $# -gt 5 ]; then rsk_fail "$RSK_E_USAGE" usage "usage: logs PROJECT JOBID STREAM MAXBYTES [LINES]"; fi
    lines=${5:-0}
    rsk_is_uint "$lines" || rsk_fail "$RSK_E_USAGE" usage "LINES must be a number"
    rsk_need_token project "$1"
    case $3 in stdout) o=stderr ;; stderr) o=stdout ;; *) rsk_fail "$RSK_E_USAGE" bad-stream "stream is stdout or stderr" ;; esac
    rsk_is_uint "$4" || rsk_fail "$RSK_E_USAGE" usage "MAXBYTES must be a number"
    rsk_job_run "$1" "$2"
    run=$RSK_RUN started=no ended='' size=0 other=0 # the other stream's size too: an empty stdout beside a stderr that holds the error
    [ ! -f "$run/started" ] || started=yes
    [ ! -f "$run/ended" ] || ended=$(cat "$run/ended")
    [ ! -f "$run/$3" ] || size=$(wc -c <"$run/$3" | tr -d ' ')
    [ ! -f "$run/$o" ] || other=$(wc -c <"$run/$o" | tr -d ' ')
    rsk_emit log "rid=$RSK_RID" "started=$started" "ended=$(rsk_b64 "$ended")" "size=$size" "other=$other"
    [ -f "$run/$3" ] || return 0
    if [ "$lines" -gt 0 ]; then tail -n "$lines" "$run/$3"; else cat "$run/$3"; fi | tail -c "$4" | rsk_chunks
}
