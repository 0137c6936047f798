# shellcheck shell=sh
# rsk logs PROJECT JOBID stdout|stderr MAXBYTES [LINES]: @@log, then @@chunk lines of at most the last LINES lines
# (all when 0) and MAXBYTES bytes of a job this project launched

main() {
    rsk_start
    if [ $# -lt 4 ] || [ $# -gt 5 ]; then rsk_fail "$RSK_E_USAGE" usage "usage: logs PROJECT JOBID STREAM MAXBYTES [LINES]"; fi
    lines=${5:-0}
    rsk_is_uint "$lines" || rsk_fail "$RSK_E_USAGE" usage "LINES must be a number"
    rsk_need_token project "$1"
    case $3 in stdout | stderr) ;; *) rsk_fail "$RSK_E_USAGE" bad-stream "stream is stdout or stderr" ;; esac
    rsk_is_uint "$4" || rsk_fail "$RSK_E_USAGE" usage "MAXBYTES must be a number"
    rsk_job_run "$1" "$2"
    rid=$RSK_RID
    run=$RSK_RUN
    started=no
    ended=''
    [ ! -f "$run/started" ] || started=yes
    [ ! -f "$run/ended" ] || ended=$(cat "$run/ended")
    size=0 other=0 # the other stream's size too: an empty stdout beside a stderr that holds the error
    [ "$3" = stdout ] && o=stderr || o=stdout
    [ ! -f "$run/$3" ] || size=$(wc -c <"$run/$3" | tr -d ' ')
    [ ! -f "$run/$o" ] || other=$(wc -c <"$run/$o" | tr -d ' ')
    rsk_emit log "rid=$rid" "started=$started" "ended=$(rsk_b64 "$ended")" "size=$size" "other=$other"
    if [ -f "$run/$3" ]; then
        if [ "$lines" -gt 0 ]; then tail -n "$lines" "$run/$3"; else cat "$run/$3"; fi | tail -c "$4" \
            | base64 | tr -d '\n' | fold -w 4000 | while IFS= read -r chunk || [ -n "$chunk" ]; do
            rsk_emit chunk "$chunk"
        done
    fi
}
