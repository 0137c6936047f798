# Helpers for the bats suites of the remote scripts: each test gets a fresh remote root owned by
# the lab's cluster user, and runs the scripts there under dash, as that user, against the lab Slurm.
LAB_USER=${RSK_LAB_USER:-rsklab}
REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)

setup_root() {
    ROOT=$(mktemp -d /tmp/rsk-bats.XXXXXX)
    mkdir -p "$ROOT/scripts/dev"
    cp "$REPO"/remote/*.sh "$REPO"/remote/*.awk "$ROOT/scripts/dev/"
    chown -R "$LAB_USER" "$ROOT"
    chmod 0755 "$ROOT"
    PROJECT="b$(date +%s)$$${BATS_TEST_NUMBER}"
}

teardown_root() {
    runuser -u "$LAB_USER" -- scancel --name "rsk:$PROJECT:" >/dev/null 2>&1 || true
    for j in $(runuser -u "$LAB_USER" -- squeue -h -o '%i %j' | awk -v p="rsk:$PROJECT:" 'index($2, p) == 1 {print $1}'); do
        runuser -u "$LAB_USER" -- scancel "$j" || true
    done
    rm -rf "$ROOT"
}

b64() { printf '%s' "$1" | base64 -w0; }

# request KEY=VALUE... : an rsk request on stdout ("arg=x" and "env=N=V" may repeat)
request() {
    printf 'rsk-request 1\n'
    printf 'project %s\n' "$(b64 "$PROJECT")"
    for kv in "$@"; do
        key=${kv%%=*}
        value=${kv#*=}
        if [ -z "$value" ] && { [ "$key" = arg ] || [ "$key" = env ]; }; then
            printf "%s =\n" "$key"
        else
            printf '%s %s\n' "$key" "$(b64 "$value")"
        fi
    done
    printf 'end\n'
}

# remote SCRIPT ARGS... : run a deployed script under dash as the cluster user (stdin passes through)
remote() {
    script=$1
    shift
    runuser -u "$LAB_USER" -- env RSK_ROOT="$ROOT" dash "$ROOT/scripts/dev/$script" "$@"
}

# field KIND KEY: the value of KEY on the first @@KIND line of $output
field() {
    printf '%s\n' "$output" | awk -v k="@@$1" -v key="$2" '$1 == k { for (i = 2; i <= NF; i++) if (index($i, key "=") == 1) { print substr($i, length(key) + 2); exit } }'
}

plan_hash() { printf '%s\n' "$output" | sed -n 's/^@@plan //p'; }

wait_file() { # wait_file PATH [SECONDS]
    i=0
    while [ ! -f "$1" ]; do
        i=$((i + 1))
        [ "$i" -lt "$(( ${2:-60} * 5 ))" ] || return 1
        sleep 0.2
    done
}

dec() { # dec WIRE: a wire value ("=literal" or base64) decoded
    case $1 in "="*) printf '%s' "${1#=}" ;; *) printf '%s' "$1" | base64 -d ;; esac
}

submit() { # submit RID ARGS...: plan, then submit with the expected hash; sets JOB
    rid=$1
    shift
    run remote submit.sh plan < <(request "request_id=$rid" "$@")
    run remote submit.sh submit --rs-expect "$(plan_hash)" < <(request "request_id=$rid" "$@")
    [ "$status" -eq 0 ]
    JOB=$(field accepted job)
}

# lab_sbatch ARGS...: a plain job as the cluster user, not through rsk (its output and working
# directory must be somewhere the cluster user can write, whatever directory the tests run from)
lab_sbatch() { runuser -u "$LAB_USER" -- sbatch --parsable --chdir=/tmp --output=/dev/null "$@"; }
