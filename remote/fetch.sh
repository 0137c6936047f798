# shellcheck shell=sh
# rsk fetch PROJECT JOB|- PATH OFFSET MAXBYTES: files from below a job's work copy, else its run directory, never
# from outside it (docs/protocol.md, "results down"); .rsk-result[/...] is its published result, .rsk-partial[/...]
# the stage a job that did not succeed left. JOB "-": PATH of each job of a "jobs JOB,..." line on stdin, in one call.

main() {
    rsk_start
    [ $# -eq 5 ] || rsk_fail "$RSK_E_USAGE" usage "usage: fetch PROJECT JOB|- PATH OFFSET MAXBYTES"
    rsk_need_token project "$1"
    if ! rsk_is_uint "$4" || ! rsk_is_uint "$5" || [ $(($4 % 65536 + $5 % 65536)) -ne 0 ]; then
        rsk_fail "$RSK_E_USAGE" usage "OFFSET and MAXBYTES are numbers, multiples of 65536"
    fi
    case /$3/ in # relative, of the fetchable names, never up (//: an empty path or an absolute one)
        //* | /-* | */../* | *[!A-Za-z0-9._/+@:,-]*) rsk_fail "$RSK_E_USAGE" bad-path "paths are relative, of A-Z a-z 0-9 . _ / + @ : , -, without .." ;;
    esac
    [ "$2" = - ] || { rsk_job_run "$1" "$2"; fetch_from "$@" "$RSK_RUN"; return 0; }
    { IFS=' ' read -r rsk_w rsk_l && [ "$rsk_w" = jobs ]; } || rsk_fail "$RSK_E_USAGE" usage "fetch PROJECT - reads \"jobs JOB,...\""
    printf '%s\n' "$rsk_l" | tr , '\n' | rsk_job_runs "$1" | while read -r job rid idx; do
        rsk_emit job "job=$job"
        (RSK_EACH=missing && fetch_from "$1" "$job" "$3" "$4" "$5" "$RSK_ROOT/runs/$1/$rid${idx:+/t$idx}") || true
    done
}
fetch_from() { # fetch_from PROJECT JOB PATH OFFSET MAXBYTES RUN: PATH below the job's run directory RUN
    base=$6 path=$3
    [ ! -d "$base/work" ] || base=$base/work
    case $path in # a published result (result/), or the stage of a job that did not succeed (partial/): rsk_publish
        .rsk-result | .rsk-result/* | .rsk-partial | .rsk-partial/*) d=${path%%/*} base=$6/${d#.rsk-} path=${path#"$d"} ;;
    esac
    path=${path#/}
    [ -d "$base" ] || rsk_fail "$RSK_E_USAGE" not-found "job $2 has no run directory yet"
    # every component below runs/ must be a real directory: no symlink leads fetch out of the project's area, not
    # even the job's own directories, which a job (same account) can turn into symlinks
    rest=${base#"$RSK_ROOT/runs/"}/$path at=$RSK_ROOT/runs rsk_ifs=$IFS IFS=/
    for part in $rest; do # (split at /: it holds no glob character, every part of it was checked)
        case $part in '' | .) ;; *) [ ! -L "$at/$part" ] || rsk_fail "$RSK_E_USAGE" bad-path "$path goes through a symlink"; at=$at/$part ;; esac
    done
    IFS=$rsk_ifs
    if [ -d "$at" ]; then
        (cd "$at" && find . -type f | head -n 1000) | while IFS= read -r f; do
            case $f in *[!A-Za-z0-9._/+@:,-]*) rsk_emit skipped "path=$(rsk_b64 "${f#./}")"; continue ;; esac
            [ -L "$at/$f" ] || rsk_emit entry "path=${f#./}" "size=$(($(wc -c <"$at/$f")))"
        done
        return 0
    fi
    [ -f "$at" ] || rsk_fail "$RSK_E_USAGE" not-found "no file $path in the run directory of job $2"
    rsk_emit file "size=$(($(wc -c <"$at")))"
    [ "$5" -gt 0 ] || return 0
    dd if="$at" bs=65536 skip=$(($4 / 65536)) count=$(($5 / 65536)) 2>/dev/null | rsk_chunks
}
