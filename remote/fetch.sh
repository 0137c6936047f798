# shellcheck shell=sh
# rsk fetch PROJECT JOB PATH OFFSET MAXBYTES: files from below a job's work copy, else its run directory, never
# from outside it (docs/protocol.md, "results down"); .rsk-result[/...] is its published result, .rsk-partial[/...]
# the stage a job that did not succeed left.

main() {
    rsk_start
    [ $# -eq 5 ] || rsk_fail "$RSK_E_USAGE" usage "usage: fetch PROJECT JOB PATH OFFSET MAXBYTES"
    rsk_need_token project "$1"
    rsk_job_run "$1" "$2"
    path=$3
    for n in "$4" "$5"; do
        rsk_is_uint "$n" || rsk_fail "$RSK_E_USAGE" usage "OFFSET and MAXBYTES are numbers"
        [ $((n % 65536)) -eq 0 ] || rsk_fail "$RSK_E_USAGE" usage "OFFSET and MAXBYTES are multiples of 65536"
    done
    case $path in
        '' | /* | -* | *[!A-Za-z0-9._/+@:,-]*) rsk_fail "$RSK_E_USAGE" bad-path "paths are relative, of A-Z a-z 0-9 . _ / + @ : , -" ;;
    esac
    case /$path/ in */../*) rsk_fail "$RSK_E_USAGE" bad-path "a path may not contain .." ;; esac
    base=$RSK_RUN
    [ ! -d "$base/work" ] || base=$base/work
    case $path in # a published result, or the stage of a job that did not succeed (the wrapper's rsk_publish)
        .rsk-result | .rsk-result/*) base=$RSK_RUN/result path=${path#.rsk-result} ;;
        .rsk-partial | .rsk-partial/*) base=$RSK_RUN/partial path=${path#.rsk-partial} ;;
    esac
    path=${path#/}
    [ -n "$path" ] || path=.
    [ -d "$base" ] || rsk_fail "$RSK_E_USAGE" not-found "job $2 has no run directory yet"
    # every component below runs/ must be a real directory: no symlink leads fetch out of the project's area, not
    # even the job's own directories, which a job (same account) can turn into symlinks
    rest=${base#"$RSK_ROOT/runs/"}/$path at=$RSK_ROOT/runs
    while :; do
        part=${rest%%/*}
        [ -z "$part" ] || [ "$part" = . ] || {
            [ ! -L "$at/$part" ] || rsk_fail "$RSK_E_USAGE" bad-path "$path goes through a symlink"
            at=$at/$part
        }
        case $rest in */*) rest=${rest#*/} ;; *) break ;; esac
    done
    if [ -d "$at" ]; then
        (cd "$at" && find . -type f | head -n 1000) | while IFS= read -r f; do
            case $f in *[!A-Za-z0-9._/+@:,-]*) rsk_emit skipped "path=$(rsk_b64 "${f#./}")"; continue ;; esac
            [ -L "$at/$f" ] || rsk_emit entry "path=${f#./}" "size=$(wc -c <"$at/$f" | tr -d ' ')"
        done
        return 0
    fi
    [ -f "$at" ] || rsk_fail "$RSK_E_USAGE" not-found "no file $path in the run directory of job $2"
    rsk_emit file "size=$(wc -c <"$at" | tr -d ' ')"
    [ "$5" -gt 0 ] || return 0
    dd if="$at" bs=65536 skip=$(($4 / 65536)) count=$(($5 / 65536)) 2>/dev/null | rsk_chunks
}
