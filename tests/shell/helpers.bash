# Helpers for the bats suites of the remote programs: each test gets a fresh remote root owned by
# the lab's cluster user, and runs exactly the programs rsk ships (rsk.wire.bundle) under dash, as that
# user, against the lab Slurm, with the frame line rsk sends first on stdin.
LAB_USER=${RSK_LAB_USER:-rsklab}
REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
NONCE=0123456789abcdef0123456789abcdef

setup_root() {
    ROOT=$(mktemp -d /tmp/rsk-bats.XXXXXX)
    chown -R "$LAB_USER" "$ROOT"
    chmod 0755 "$ROOT"
    PROJECT="b$(date +%s)$$${BATS_TEST_NUMBER}"
    PROGS="$BATS_FILE_TMPDIR/programs"
    if [ ! -d "$PROGS" ]; then
        mkdir -p "$PROGS"
        PYTHONPATH="$REPO/src" python3 -c 'import sys; from rsk.wire.bundle import write_all; write_all(sys.argv[1])' "$PROGS"
    fi
}

teardown_root() {
    for j in $(runuser -u "$LAB_USER" -- squeue -h -o '%i %j' | awk -v p="rsk:$PROJECT:" 'index($2, p) == 1 {print $1}'); do
        runuser -u "$LAB_USER" -- scancel "$j" || true
    done
    # a cancelled job's wrapper may still be writing its end marker: try again once it has
    rm -rf "$ROOT" 2>/dev/null || { sleep 1; rm -rf "$ROOT"; }
}

b64() { printf '%s' "$1" | base64 -w0; }
enc() { # the wire form of a value, as rsk sends it
    case $1 in *[!A-Za-z0-9._/:@+,-]*) b64 "$1" ;; *) printf '=%s' "$1" ;; esac
}

# framed LINES: a request as rsk sends it: "rsk-request 2 LENGTH", then LENGTH bytes of lines (each ends in a newline)
framed() { printf 'rsk-request 2 %s\n%s' "$(printf '%s' "$1" | wc -c | tr -d ' ')" "$1"; }

# request KEY=VALUE... : an rsk request on stdout ("arg=x" and "env=N=V" may repeat)
request() {
    framed "$(printf 'project %s\n' "$(enc "$PROJECT")"; for kv in "$@"; do printf '%s %s\n' "${kv%%=*}" "$(enc "${kv#*=}")"; done)
"
}

# remote ENTRY[.sh] ARGS... : run a shipped program under dash as the cluster user, as rsk does: the loader
# on the command line, the program then the frame line on stdin; its @@NONCE lines come out as @@ lines
# (submit reads the request from stdin)
remote() { remote_env "" "$@"; }

# shipped ENTRY: what rsk sends on stdin ahead of the frame line
shipped() {
    printf 'rsk-program %s\n' "$(($(wc -c <"$PROGS/$1.sh")))"
    cat "$PROGS/$1.sh"
}

# remote_env PATH ENTRY ARGS...: the same with another PATH for the cluster user ("" keeps it); with HELD set,
# the "held JOB:RID,..." line (the jobs a ledger holds) follows the frame, with SINCE set the "since EPOCH" line, with
# JOBS set the "jobs JOB,..." line (a fetch of many jobs)
remote_env() {
    path=${1:-$PATH}
    entry=${2%.sh}
    shift 2
    { shipped "$entry"; printf 'rsk-frame 2 %s\n' "$NONCE"; [ -z "${HELD:-}" ] || printf 'held %s\n' "$HELD"
      [ -z "${SINCE:-}" ] || printf 'since %s\n' "$SINCE"
      [ -z "${JOBS:-}" ] || printf 'jobs %s\n' "$JOBS"
      case $entry in submit*) cat ;; esac; } \
        | runuser -u "$LAB_USER" -- env RSK_ROOT="$ROOT" PATH="$path" dash -c "$(cat "$PROGS/loader.sh")" "rsk-$entry" "$@" \
        | sed "s/^@@$NONCE /@@/"
    return "${PIPESTATUS[1]}"
}

# field KIND KEY: the value of KEY on the first @@KIND line of $output
field() {
    printf '%s\n' "$output" | awk -v k="@@$1" -v key="$2" '$1 == k { for (i = 2; i <= NF; i++) if (index($i, key "=") == 1) { print substr($i, length(key) + 2); exit } }'
}

jfact() { printf '%s\n' "$output" | awk -v r="rid=$1" -v k="$2=" '$1 == "@@job" && $2 == r { for (i = 3; i <= NF; i++) if (index($i, k) == 1) print substr($i, length(k) + 1) }'; }  # jfact RID KEY: KEY of the request's @@job line

plan_hash() { printf '%s\n' "$output" | sed -n 's/^@@plan //p'; }

wait_file() { # wait_file PATH [SECONDS]
    i=0
    while [ ! -f "$1" ]; do
        i=$((i + 1))
        [ "$i" -lt "$(( ${2:-180} * 5 ))" ] || return 1
        sleep 0.2
    done
}

dec() { # dec WIRE: a wire value ("=literal" or base64) decoded
    case $1 in "="*) printf '%s' "${1#=}" ;; *) printf '%s' "$1" | base64 -d ;; esac
}

# go HASH: rsk's word after the ledger allowed the plan HASH, as rsk sends it to `submit launch` (its answer
# is framed by the nonce the go names: the same one here, so @@ lines read as before)
go() { printf 'go %s %s\n' "$1" "$NONCE"; }

intent_with_job() { # intent_with_job RID: a journaled intent to run `sleep 30` with no outcome, whose job
    # (named as rsk names it) exists: an answer lost after sbatch; sets hash and job
    run remote submit plan < <(request "request_id=$1" arg=sleep arg=30)
    hash=$(plan_hash)
    job=$(lab_sbatch --job-name "rsk:$PROJECT:$1" --wrap 'sleep 30')
    mkdir -p "$ROOT/journal"
    printf 'v=1 t=2026-01-01T00:00:00Z ev=intent rid=%s plan=%s\n' "$1" "$hash" > "$ROOT/journal/$PROJECT.log"
    chown -R "$LAB_USER" "$ROOT/journal"
}

submit() { # submit RID ARGS...: plan, then launch and go with that plan's hash, as rsk does; sets JOB
    rid=$1
    shift
    run remote submit plan < <(request "request_id=$rid" "$@")
    run remote submit launch < <(request "request_id=$rid" "$@"; go "$(plan_hash)")
    [ "$status" -eq 0 ]
    JOB=$(field accepted job)
}

events() { awk '{ for (i = 1; i <= NF; i++) if (index($i, "ev=") == 1) print substr($i, 4) }' "$ROOT/journal/$PROJECT.log"; }

# lab_sbatch ARGS...: a plain job as the cluster user, not through rsk (its output and working
# directory must be somewhere the cluster user can write, whatever directory the tests run from)
lab_sbatch() { runuser -u "$LAB_USER" -- sbatch --parsable --chdir=/tmp --output=/dev/null "$@"; }
