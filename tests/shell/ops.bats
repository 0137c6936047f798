#!/usr/bin/env bats
# status.sh, cancel.sh, reconcile.sh and doctor.sh under dash against the lab Slurm.
bats_require_minimum_version 1.5.0
load helpers

setup() { setup_root; }
teardown() { teardown_root; }

job_state() { printf '%s\n' "$output" | awk -v r="rid=$1" '$1 == "@@job" && $2 == r { for (i = 3; i <= NF; i++) if ($i ~ /^state=/) print substr($i, 7) }'; }

@test "status reports each job once, from squeue, markers and journal, in one call" {
    submit ok arg=true
    submit bad arg=sh arg=-c 'arg=exit 4'
    submit run arg=sleep arg=120
    wait_file "$ROOT/runs/$PROJECT/bad/ended"
    wait_file "$ROOT/runs/$PROJECT/ok/ended"
    wait_file "$ROOT/runs/$PROJECT/run/started"
    run remote status.sh "$PROJECT"
    [ "$status" -eq 0 ]
    [ "$(field status slurm)" = up ]
    [ "$(printf '%s\n' "$output" | grep -c '^@@job ')" -eq 3 ]
    [ "$(job_state ok)" = succeeded ]
    [ "$(job_state bad)" = failed ]
    [ "$(job_state run)" = running ]
    printf '%s\n' "$output" | grep -q '^@@job rid=bad .* exit=4 '
}

@test "status keeps final states of jobs Slurm forgot, from the run markers" {
    mkdir -p "$ROOT/journal" "$ROOT/runs/$PROJECT/a" "$ROOT/runs/$PROJECT/b" "$ROOT/runs/$PROJECT/c"
    {
        echo "v=1 t=x ev=accepted rid=a plan=p job=999991"
        echo "v=1 t=x ev=accepted rid=b plan=p job=999992"
        echo "v=1 t=x ev=accepted rid=c plan=p job=999993"
    } >"$ROOT/journal/$PROJECT.log"
    echo "rc=143 sig=TERM t=1 elapsed=10 limit=60" >"$ROOT/runs/$PROJECT/a/ended"
    echo "rc=143 sig=TERM t=1 elapsed=60 limit=60" >"$ROOT/runs/$PROJECT/b/ended"
    echo "job=999993 node=n1 t=1" >"$ROOT/runs/$PROJECT/c/started"
    chown -R "$LAB_USER" "$ROOT"
    run remote status.sh "$PROJECT"
    [ "$(job_state a)" = cancelled ]
    [ "$(job_state b)" = timed-out ]
    [ "$(job_state c)" = lost ]
}

@test "status with a cursor also returns the journal lines after it" {
    submit one arg=true
    run remote status.sh "$PROJECT" 1
    [ "$(field cursor lines)" = 2 ]
    [ "$(printf '%s\n' "$output" | grep -c '^@@journal ')" -eq 1 ]
}

@test "cancel by request id cancels that request's job only, and journals it" {
    submit keep arg=sleep arg=120
    keep=$JOB
    submit stop arg=sleep arg=121
    run remote cancel.sh "$PROJECT" rid stop
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | grep -c '^@@cancel ')" -eq 1 ]
    [ "$(field cancel result)" = cancelled ]
    [ "$(field cancel job)" = "$JOB" ]
    grep -q "ev=cancel-requested rid=stop .* job=$JOB" "$ROOT/journal/$PROJECT.log"
    grep -q "ev=cancelled rid=stop .* job=$JOB" "$ROOT/journal/$PROJECT.log"
    runuser -u "$LAB_USER" -- squeue -h -o %i | grep -qx "$keep"
}

@test "cancel leaves a reused job id alone when its name lacks this project's identity" {
    foreign=$(lab_sbatch --wrap 'sleep 120')
    mkdir -p "$ROOT/journal"
    echo "v=1 t=x ev=accepted rid=old plan=p job=$foreign" >"$ROOT/journal/$PROJECT.log"
    chown -R "$LAB_USER" "$ROOT/journal"
    run remote cancel.sh "$PROJECT" job "$foreign"
    [ "$(field cancel result)" = not-ours ]
    runuser -u "$LAB_USER" -- squeue -h -o %i | grep -qx "$foreign"
    runuser -u "$LAB_USER" -- scancel "$foreign"
}

@test "cancel of a batch cancels every task" {
    run remote submit.sh plan < <(request request_id=bb task=x arg=ignored)
    [ "$status" -eq 2 ]  # a batch gives each task its own command
    req() { printf 'rsk-request 1\nproject %s\nrequest_id %s\n' "$(b64 "$PROJECT")" "$(b64 bb)"
            for k in t1 t2 t3; do printf 'task %s\ntarg %s\ntarg %s\n' "$(b64 $k)" "$(b64 sleep)" "$(b64 120)"; done
            printf 'end\n'; }
    run remote submit.sh plan < <(req)
    run remote submit.sh submit --rs-expect "$(plan_hash)" < <(req)
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | grep -c '^@@accepted ')" -eq 3 ]
    run remote cancel.sh "$PROJECT" batch bb
    [ "$(printf '%s\n' "$output" | grep -c 'result=cancelled')" -eq 3 ]
}

@test "reconcile records evidence, abandons what never reached Slurm, and submits nothing" {
    job=$(lab_sbatch --job-name "rsk:$PROJECT:seen" --wrap 'sleep 60')
    mkdir -p "$ROOT/journal"
    printf 'v=1 t=x ev=intent rid=seen plan=p\nv=1 t=x ev=intent rid=gone plan=q\n' >"$ROOT/journal/$PROJECT.log"
    chown -R "$LAB_USER" "$ROOT/journal"
    before=$(runuser -u "$LAB_USER" -- squeue -h | wc -l)
    run remote reconcile.sh "$PROJECT"
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -q "^@@reconcile rid=seen plan=p result=reconciled job=$job"
    printf '%s\n' "$output" | grep -q '^@@reconcile rid=gone plan=q result=abandoned'
    [ "$(runuser -u "$LAB_USER" -- squeue -h | wc -l)" -eq "$before" ]
    run remote reconcile.sh "$PROJECT"
    [ "$(field reconciled open)" = 0 ]
}

@test "doctor reports every check, with sacct unavailable on the lab" {
    run remote doctor.sh
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -q '^@@check name=controller result=pass'
    printf '%s\n' "$output" | grep -q '^@@check name=sacct result=unavailable'
    printf '%s\n' "$output" | grep -q '^@@check name=test-only result=pass'
    ! printf '%s\n' "$output" | grep -q 'result=fail'
}

@test "where sacct works, status takes final states from it for jobs with no markers" {
    # a stand-in sacct on the cluster user's PATH: the lab runs without accounting, so this checks
    # only that status.sh joins sacct's answer (the same format sacct -P prints) into the states
    fake="$ROOT/fakebin"
    mkdir -p "$fake"
    cat >"$fake/sacct" <<SH
#!/bin/sh
printf '%s\n' "888801|rsk:$PROJECT:ok|COMPLETED|0:0" "888802|rsk:$PROJECT:oom|OUT_OF_MEMORY|0:125" \
    "888803|rsk:$PROJECT:gone|CANCELLED by 1000|0:15" "888804|someone-else|FAILED|1:0"
SH
    chmod 0755 "$fake/sacct"
    mkdir -p "$ROOT/journal"
    for r in ok:888801 oom:888802 gone:888803; do
        echo "v=1 t=x ev=accepted rid=${r%%:*} plan=p job=${r#*:}" >>"$ROOT/journal/$PROJECT.log"
    done
    chown -R "$LAB_USER" "$ROOT"
    run runuser -u "$LAB_USER" -- env RSK_ROOT="$ROOT" PATH="$fake:$PATH" dash "$ROOT/scripts/dev/status.sh" "$PROJECT"
    [ "$status" -eq 0 ]
    [ "$(job_state ok)" = succeeded ]
    [ "$(job_state oom)" = failed ]
    [ "$(job_state gone)" = cancelled ]
    printf '%s\n' "$output" | grep -q '^@@job rid=oom .* exit=0 '
}

@test "without flock, the mkdir lock serialises submits and breaks a dead holder's lock" {
    noflock="$ROOT/noflock"
    mkdir -p "$noflock"
    for c in /usr/bin/*; do [ "${c##*/}" = flock ] || ln -s "$c" "$noflock/${c##*/}"; done
    chown -R "$LAB_USER" "$ROOT"
    plain() { runuser -u "$LAB_USER" -- env RSK_ROOT="$ROOT" PATH="$noflock:/usr/sbin:/sbin" dash "$ROOT/scripts/dev/submit.sh" "$@"; }
    run plain plan < <(request request_id=a arg=true)
    ha=$(plan_hash)
    run plain plan < <(request request_id=b arg=false)
    hb=$(plan_hash)
    # a lock left by a process that no longer exists
    mkdir -p "$ROOT/journal/$PROJECT.lock.d"
    echo 999999 >"$ROOT/journal/$PROJECT.lock.d/pid"
    chown -R "$LAB_USER" "$ROOT/journal"
    plain submit --rs-expect "$ha" < <(request request_id=a arg=true) >"$ROOT/a.out" &
    plain submit --rs-expect "$hb" < <(request request_id=b arg=false) >"$ROOT/b.out" &
    wait
    grep -q '^@@accepted ' "$ROOT/a.out"
    grep -q '^@@accepted ' "$ROOT/b.out"
    [ "$(grep -c ' ev=intent ' "$ROOT/journal/$PROJECT.log")" -eq 2 ]
    [ "$(grep -c ' ev=accepted ' "$ROOT/journal/$PROJECT.log")" -eq 2 ]
    # each intent is followed by its own outcome: the lock kept them from interleaving
    [ "$(awk '{print $3, $4}' "$ROOT/journal/$PROJECT.log" | sed -n '1p;2p' | cut -d' ' -f2 | sort -u | wc -l)" -eq 1 ]
    [ ! -d "$ROOT/journal/$PROJECT.lock.d" ]
}
