# shellcheck shell=sh
# rsk remote library: sourced by every entry script in this directory.
# Machine-readable output is only ever on lines that start with "@@"; everything
# else on stdout or stderr is noise for the local side to ignore.
#
# Every value that came from a user travels base64-encoded (no newlines) and is
# decoded only where it must be; it is never evaluated by a shell.

# shellcheck disable=SC2034  # the constants below are used by the scripts that source this file
RSK_PROTOCOL=1
RSK_DIR=$(cd "$(dirname "$0")" && pwd)
RSK_SCRIPTS_DIGEST=$(basename "$RSK_DIR")
RSK_ROOT=${RSK_ROOT:-$(cd "$RSK_DIR/../.." && pwd)}
RSK_RC=0

# Exit codes of the remote scripts (docs/protocol.md keeps the table).
RSK_E_USAGE=2        # malformed request or arguments
RSK_E_POLICY=3       # the cluster policy refuses the request
RSK_E_MISMATCH=5     # the plan changed (expect) or a request id is reused with another plan
RSK_E_CAP=7          # the active-jobs cap of the project is reached
RSK_E_UNAVAILABLE=69 # the Slurm controller cannot be reached
RSK_E_SBATCH=70      # sbatch refused or failed
RSK_E_ROOT=73        # the remote root is not writable (full, permissions)

# @@ lines ------------------------------------------------------------------
rsk_emit() { # rsk_emit KIND [key=value ...]
    rsk_kind=$1
    shift
    printf '@@%s' "$rsk_kind"
    for rsk_kv in "$@"; do
        printf ' %s' "$rsk_kv"
    done
    printf '\n'
}

rsk_finish() { # trap handler: releases a held lock and closes the output with @@done
    rsk_status=$?
    [ "$RSK_RC" -ne 0 ] || RSK_RC=$rsk_status
    rsk_unlock
    printf '@@done rc=%s\n' "$RSK_RC"
    exit "$RSK_RC"
}

rsk_start() { # rsk_start: every entry script calls this first
    trap rsk_finish EXIT
    rsk_emit hello "protocol=$RSK_PROTOCOL" "scripts=$RSK_SCRIPTS_DIGEST"
}

rsk_fail() { # rsk_fail RC CODE MESSAGE: @@error line, then exit RC
    RSK_RC=$1
    rsk_emit error "code=$2" "rc=$1" "msg=$(rsk_b64 "$3")"
    exit "$1"
}

# encoding ------------------------------------------------------------------
rsk_b64() { # rsk_b64 STRING: base64 on one line
    printf '%s' "$1" | base64 | tr -d '\n'
}

# A value on the wire is "=LITERAL" (only the characters of rsk_is_literal, so no decoding and no
# fork) or base64 (anything else). Base64 never starts with "=", so the two cannot be confused.
rsk_is_literal() { case $1 in *[!A-Za-z0-9._/:@+,-]*) return 1 ;; esac; }

rsk_enc() { # rsk_enc VALUE: sets RSK_E to the wire form of VALUE
    if rsk_is_literal "$1"; then RSK_E="=$1"; else RSK_E=$(rsk_b64 "$1"); fi
}

rsk_unb64() { # rsk_unb64 WIRE: sets RSK_V to the value (trailing newlines kept)
    case $1 in "="*) RSK_V=${1#=}; return 0 ;; esac
    RSK_V=$(printf '%s' "$1" | base64 -d 2>/dev/null && printf x) \
        || rsk_fail "$RSK_E_USAGE" bad-encoding "a value is not valid base64"
    RSK_V=${RSK_V%x}
}

rsk_sq() { # rsk_sq STRING: the string single-quoted for sh (trailing newlines kept)
    rsk_q=$(printf '%sx' "$1" | sed "s/'/'\\\\''/g")
    printf "'%s'" "${rsk_q%x}"
}

rsk_sha256() { # rsk_sha256: digest of stdin
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum | cut -c1-64
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 | cut -c1-64
    else
        openssl dgst -sha256 -r | cut -c1-64
    fi
}

rsk_now() { date -u +%Y-%m-%dT%H:%M:%SZ; }

# validation ----------------------------------------------------------------
rsk_is_uint() { case $1 in '' | *[!0-9]*) return 1 ;; esac; }

rsk_is_token() { # names safe in paths and job names: [A-Za-z0-9._-], 1..64, no leading dot or dash
    case $1 in '' | .* | -* | *[!A-Za-z0-9._-]*) return 1 ;; esac
    [ "${#1}" -le 64 ]
}

rsk_need_token() { # rsk_need_token WHAT VALUE
    rsk_is_token "$2" || rsk_fail "$RSK_E_USAGE" "bad-$1" \
        "$1 must be 1-64 characters of A-Z a-z 0-9 . _ - and not start with . or -"
}

rsk_need_writable() { # rsk_need_writable DIR...: each exists and takes a new file (probed in a subshell,
    # because a failed redirection would end this shell before any error could be reported)
    for rsk_dir in "$@"; do
        mkdir -p "$rsk_dir" 2>/dev/null || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot create $rsk_dir"
        rsk_probe="$rsk_dir/.probe.$$"
        if ! (printf 'probe\n' >"$rsk_probe") 2>/dev/null; then
            rm -f "$rsk_probe" 2>/dev/null || true
            rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write under $rsk_dir (permissions or a full disk)"
        fi
        rm -f "$rsk_probe"
    done
}

# locking -------------------------------------------------------------------
# rsk_lock FILE: exclusive lock held until rsk_unlock or exit; flock where present,
# else a mkdir lock whose owner pid is checked so a dead holder does not block forever.
rsk_lock() {
    RSK_LOCKFILE=$1
    if command -v flock >/dev/null 2>&1; then
        exec 9>>"$RSK_LOCKFILE" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot open lock $RSK_LOCKFILE"
        flock -w 120 9 || rsk_fail "$RSK_E_ROOT" lock-timeout "lock $RSK_LOCKFILE held too long"
        RSK_LOCKMODE=flock
        return 0
    fi
    RSK_LOCKMODE='mkdir'
    rsk_i=0
    until mkdir "$RSK_LOCKFILE.d" 2>/dev/null; do
        rsk_owner=$(cat "$RSK_LOCKFILE.d/pid" 2>/dev/null || true)
        if [ -n "$rsk_owner" ] && ! kill -0 "$rsk_owner" 2>/dev/null; then
            rm -rf "$RSK_LOCKFILE.d"
            continue
        fi
        rsk_i=$((rsk_i + 1))
        [ "$rsk_i" -lt 1200 ] || rsk_fail "$RSK_E_ROOT" lock-timeout "lock $RSK_LOCKFILE held too long"
        sleep 0.1
    done
    echo "$$" >"$RSK_LOCKFILE.d/pid"
}

rsk_unlock() {
    if [ "${RSK_LOCKMODE:-}" = flock ]; then
        exec 9>&-
    elif [ "${RSK_LOCKMODE:-}" = mkdir ]; then
        rm -rf "$RSK_LOCKFILE.d"
    fi
    RSK_LOCKMODE=
}

# journal -------------------------------------------------------------------
# One append-only file per project: $RSK_ROOT/journal/PROJECT.log, one event a line:
#   v=1 t=TIME ev=EVENT rid=RID plan=HASH [job=ID] [rc=N] [code=CODE] [msg=B64]
# Appended only while the project lock is held; never rewritten.
rsk_journal_file() { printf '%s/journal/%s.log' "$RSK_ROOT" "$1"; }

rsk_journal() { # rsk_journal PROJECT EVENT RID PLAN [key=value ...]
    rsk_jf=$(rsk_journal_file "$1")
    rsk_line="v=1 t=$(rsk_now) ev=$2 rid=$3 plan=$4"
    shift 4
    for rsk_kv in "$@"; do
        rsk_line="$rsk_line $rsk_kv"
    done
    printf '%s\n' "$rsk_line" >>"$rsk_jf" \
        || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot append to the journal $rsk_jf"
}

rsk_field() { # rsk_field LINE KEY: the value of key=value in a journal line
    rsk_rest=" $1 "
    case $rsk_rest in
        *" $2="*) rsk_rest=${rsk_rest#*" $2="}; printf '%s' "${rsk_rest%% *}" ;;
    esac
}

# Slurm ---------------------------------------------------------------------
rsk_minutes() { # rsk_minutes SLURMTIME: minutes, or "" for infinite/unknown
    case $1 in
        '' | infinite | UNLIMITED | n/a | NONE) printf '' ; return 0 ;;
    esac
    rsk_days=0
    rsk_t=$1
    case $rsk_t in *-*) rsk_days=${rsk_t%%-*}; rsk_t=${rsk_t#*-} ;; esac
    rsk_old_ifs=$IFS
    IFS=:
    # shellcheck disable=SC2086  # splitting on ":" is the point
    set -- $rsk_t
    IFS=$rsk_old_ifs
    case $# in
        1) if [ "$rsk_days" -gt 0 ]; then rsk_m=$(($1 * 60)); else rsk_m=$1; fi ;;
        2) if [ "$rsk_days" -gt 0 ]; then rsk_m=$(($1 * 60 + $2)); else rsk_m=$(($1 + ($2 > 0))); fi ;;
        *) rsk_m=$(($1 * 60 + $2 + ($3 > 0))) ;;
    esac
    printf '%s' "$((rsk_days * 1440 + rsk_m))"
}

rsk_slurm_down() { # rsk_slurm_down TEXT: true when TEXT says the controller is unreachable
    case $1 in
        *"Unable to contact slurm controller"* | *"Socket timed out"* | *"Connection refused"* \
            | *"Zero Bytes were transmitted"* | *"slurm_load_"*"error"*) return 0 ;;
    esac
    return 1
}

rsk_job_prefix() { printf 'rsk:%s:' "$1"; } # rsk_job_prefix PROJECT: every rsk job name starts so

rsk_find_job() { # rsk_find_job PROJECT RID RUNDIR: the job id Slurm or the run markers know, or ""
    rsk_jn="$(rsk_job_prefix "$1")$2"
    rsk_id=$(squeue -h -u "$(id -un)" -t all -n "$rsk_jn" -o '%A' 2>/dev/null | head -n 1)
    if [ -z "$rsk_id" ] && [ -f "$3/started" ]; then
        rsk_id=$(sed -n 's/.*job=\([0-9_]*\).*/\1/p' "$3/started" | head -n 1)
    fi
    printf '%s' "$rsk_id"
}
