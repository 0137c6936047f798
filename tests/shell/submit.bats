#!/usr/bin/env bats
# submit.sh under dash against the lab Slurm: plan, expect, journal, idempotency, hostile input.
bats_require_minimum_version 1.5.0
load helpers

setup() { setup_root; }
teardown() { teardown_root; }

@test "plan prints a canonical plan whose hash covers its lines, and ends with @@done rc=0" {
    run --separate-stderr remote submit.sh plan < <(request request_id=r1 arg=true)
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | tail -n 1)" = "@@done rc=0" ]
    hash=$(plan_hash)
    [ "${#hash}" -eq 64 ]
    lines=$(printf '%s\n' "$output" | sed -n 's/^@@planline //p')
    [ "$(printf '%s\n' "$lines" | sha256sum | cut -c1-64)" = "$hash" ]
    [ "$(field policy verdict)" = allow ]
    [ "$(field estimate start)" != unknown ]
}

@test "plan resolves defaults: cluster, user, default partition, policy default time and memory" {
    run --separate-stderr remote submit.sh plan < <(request arg=true)
    [ "$status" -eq 0 ]
    planline() { dec "$(printf '%s\n' "$output" | awk -v k="$1" '$1 == "@@planline" && $2 == k { print $3 }')"; }
    [ "$(planline cluster)" = rsklab ]
    [ "$(planline user)" = "$LAB_USER" ]
    [ "$(planline partition)" = cpu ]
    [ "$(planline time_min)" = 60 ]
    [ "$(planline mem_mb)" = 1024 ]
}

@test "the same request plans to the same hash; another command to another" {
    run remote submit.sh plan < <(request arg=echo arg=a)
    a=$(plan_hash)
    run remote submit.sh plan < <(request arg=echo arg=a)
    [ "$(plan_hash)" = "$a" ]
    run remote submit.sh plan < <(request arg=echo arg=b)
    [ "$(plan_hash)" != "$a" ]
}

@test "submit with a wrong hash refuses with rc 5 and journals nothing" {
    run remote submit.sh submit --rs-expect 0000 < <(request request_id=r1 arg=true)
    [ "$status" -eq 5 ]
    [ "$(field error code)" = plan-mismatch ]
    [ ! -s "$ROOT/journal/$PROJECT.log" ]
}

@test "submit journals intent then accepted, and the job runs the command" {
    run remote submit.sh plan < <(request request_id=r1 arg=sh arg=-c arg='echo ran-as-$(whoami)')
    hash=$(plan_hash)
    run remote submit.sh submit --rs-expect "$hash" < <(request request_id=r1 arg=sh arg=-c arg='echo ran-as-$(whoami)')
    [ "$status" -eq 0 ]
    job=$(field accepted job)
    [ -n "$job" ]
    [ "$(sed -n 1p "$ROOT/journal/$PROJECT.log" | cut -d' ' -f3)" = ev=intent ]
    [ "$(sed -n 2p "$ROOT/journal/$PROJECT.log" | cut -d' ' -f3)" = ev=accepted ]
    wait_file "$ROOT/runs/$PROJECT/r1/ended"
    [ "$(cat "$ROOT/runs/$PROJECT/r1/stdout")" = "ran-as-$LAB_USER" ]
    grep -q '^rc=0 ' "$ROOT/runs/$PROJECT/r1/ended"
}

@test "a request id that was accepted replays the same job and submits nothing" {
    run remote submit.sh plan < <(request request_id=r1 arg=true)
    hash=$(plan_hash)
    run remote submit.sh submit --rs-expect "$hash" < <(request request_id=r1 arg=true)
    job=$(field accepted job)
    run remote submit.sh submit --rs-expect "$hash" < <(request request_id=r1 arg=true)
    [ "$status" -eq 0 ]
    [ "$(field accepted job)" = "$job" ]
    [ "$(field accepted replay)" = 1 ]
    [ "$(wc -l < "$ROOT/journal/$PROJECT.log")" -eq 2 ]
}

@test "the same request id with another plan is a conflict (rc 5)" {
    run remote submit.sh plan < <(request request_id=r1 arg=true)
    run remote submit.sh submit --rs-expect "$(plan_hash)" < <(request request_id=r1 arg=true)
    run remote submit.sh plan < <(request request_id=r1 arg=false)
    run remote submit.sh submit --rs-expect "$(plan_hash)" < <(request request_id=r1 arg=false)
    [ "$status" -eq 5 ]
    [ "$(field error code)" = request-conflict ]
}

@test "request ids, projects and names that could escape a path are refused" {
    for rid in ../x a/b .hidden '-x' 'a b' "$(printf 'a\nb')"; do
        run remote submit.sh plan < <(request "request_id=$rid" arg=true)
        [ "$status" -eq 2 ]
        [ "$(field error code)" = bad-request-id ]
    done
    PROJECT=../evil
    run remote submit.sh plan < <(request arg=true)
    [ "$status" -eq 2 ]
    [ "$(field error code)" = bad-project ]
    [ ! -e "$ROOT/evil" ]
}

@test "hostile arguments and environment reach the job byte for byte, never interpreted" {
    marker="/tmp/rsk-pwned-$$"
    set -- "arg=sh" "arg=-c" 'arg=for a in "$@"; do printf "[%s]" "$a"; done; printf "{%s}" "$V"' "arg=sh" \
        "arg=\$(touch $marker)" 'arg=`touch '"$marker"'`' "arg=a;b" "arg=*" "arg=it's \"q\"" \
        "arg=$(printf 'x\ny')" "arg=é漢" "arg=" "env=V=\$(touch $marker); \`x\` *"
    run remote submit.sh plan < <(request request_id=h "$@")
    [ "$status" -eq 0 ]
    run remote submit.sh submit --rs-expect "$(plan_hash)" < <(request request_id=h "$@")
    [ "$status" -eq 0 ]
    wait_file "$ROOT/runs/$PROJECT/h/ended"
    expected="[\$(touch $marker)][\`touch $marker\`][a;b][*][it's \"q\"][$(printf 'x\ny')][é漢][]{\$(touch $marker); \`x\` *}"
    [ "$(cat "$ROOT/runs/$PROJECT/h/stdout")" = "$expected" ]
    [ ! -e "$marker" ]
}

@test "a bad request is refused with a typed @@error: truncated, unknown key, not base64" {
    run remote submit.sh plan < <(printf 'rsk-request 1\nproject %s\n' "$(b64 "$PROJECT")")
    [ "$status" -eq 2 ]
    [ "$(field error code)" = bad-request ]
    run remote submit.sh plan < <(printf 'rsk-request 1\nbogus eA==\nend\n')
    [ "$status" -eq 2 ]
    run remote submit.sh plan < <(printf 'rsk-request 1\nproject $(id)\nend\n')
    [ "$status" -eq 2 ]
    [ "$(field error code)" = bad-encoding ]
    run remote submit.sh plan < <(printf 'rsk-request 9\nend\n')
    [ "$(field error code)" = bad-protocol ]
}

@test "Slurm's refusal at plan time is rc 70 with its message" {
    run remote submit.sh plan < <(request partition=gpu gpus=64 arg=true)
    [ "$status" -eq 70 ]
    [ "$(field error code)" = slurm-rejected ]
}

@test "a missing working directory is refused before anything is submitted" {
    run remote submit.sh plan < <(request workdir=/nonexistent/dir arg=true)
    [ "$status" -eq 2 ]
    [ "$(field error code)" = workdir-missing ]
}

@test "an unwritable remote root refuses before sbatch (rc 73)" {
    run remote submit.sh plan < <(request request_id=r1 arg=true)
    hash=$(plan_hash)
    mkdir -p "$ROOT/journal"
    chown root "$ROOT/journal"
    chmod 0755 "$ROOT/journal"
    run remote submit.sh submit --rs-expect "$hash" < <(request request_id=r1 arg=true)
    [ "$status" -eq 73 ]
    [ "$(field error code)" = root-unwritable ]
    [ -z "$(runuser -u "$LAB_USER" -- squeue -h -n "rsk:$PROJECT:r1" -o %i)" ]
}

@test "an intent with no outcome and no job is abandoned, then the request is submitted once" {
    run remote submit.sh plan < <(request request_id=r1 arg=true)
    hash=$(plan_hash)
    mkdir -p "$ROOT/journal"
    printf 'v=1 t=2026-01-01T00:00:00Z ev=intent rid=r1 plan=%s\n' "$hash" > "$ROOT/journal/$PROJECT.log"
    chown -R "$LAB_USER" "$ROOT/journal"
    run remote submit.sh submit --rs-expect "$hash" < <(request request_id=r1 arg=true)
    [ "$status" -eq 0 ]
    [ "$(sed -n 2p "$ROOT/journal/$PROJECT.log" | cut -d' ' -f3)" = ev=abandoned ]
    [ "$(sed -n 4p "$ROOT/journal/$PROJECT.log" | cut -d' ' -f3)" = ev=accepted ]
}

@test "an intent with no outcome whose job exists is reconciled to that job, not resubmitted" {
    run remote submit.sh plan < <(request request_id=r1 arg=sleep arg=30)
    hash=$(plan_hash)
    job=$(lab_sbatch --job-name "rsk:$PROJECT:r1" --wrap 'sleep 30')
    mkdir -p "$ROOT/journal"
    printf 'v=1 t=2026-01-01T00:00:00Z ev=intent rid=r1 plan=%s\n' "$hash" > "$ROOT/journal/$PROJECT.log"
    chown -R "$LAB_USER" "$ROOT/journal"
    run remote submit.sh submit --rs-expect "$hash" < <(request request_id=r1 arg=sleep arg=30)
    [ "$status" -eq 0 ]
    [ "$(field accepted job)" = "$job" ]
    [ "$(field accepted reconciled)" = 1 ]
    [ "$(runuser -u "$LAB_USER" -- squeue -h -n "rsk:$PROJECT:r1" -o %i | wc -l)" -eq 1 ]
}
