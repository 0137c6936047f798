#!/usr/bin/env bats
# The policy part under dash: defaults, the policy file, verdicts bound into the plan hash, the cap.
bats_require_minimum_version 1.5.0
load helpers

setup() { setup_root; }
teardown() { teardown_root; }

write_policy() { printf '%s\n' "$@" > "$ROOT/policy.conf"; chown "$LAB_USER" "$ROOT/policy.conf"; }

@test "no policy file: the documented default is shown" {
    run remote info
    [ "$status" -eq 0 ]
    [ "$(field policy source)" = default ]
    [ "$(field policy digest)" = default-1 ]
}

@test "the policy file's digest is bound into the plan hash" {
    run remote submit plan < <(request arg=true)
    a=$(plan_hash)
    write_policy "max_gpus = 4"
    run remote submit plan < <(request arg=true)
    [ "$(field policy source)" = file ]
    [ "$(plan_hash)" != "$a" ]
}

@test "a request over a ceiling or outside the allowed partitions is refused with reasons (rc 3)" {
    write_policy "partitions = cpu" "max_gpus = 1" "max_time_min = 30"
    run remote submit plan < <(request partition=gpu gpus=2 time_min=60 arg=true)
    [ "$status" -eq 3 ]
    [ "$(field policy verdict)" = refuse ]
    reasons=$(printf '%s\n' "$output" | sed -n 's/^@@policy-reason msg=//p' | while read -r m; do printf '%s' "$m" | base64 -d; echo; done)
    printf '%s\n' "$reasons" | grep -q 'partition gpu is not allowed'
    printf '%s\n' "$reasons" | grep -q 'gpus per node 2 exceeds the ceiling 1'
    printf '%s\n' "$reasons" | grep -q 'time limit (min) 60 exceeds the ceiling 30'
}

@test "policy defaults for time and memory apply to requests that give none" {
    write_policy "default_time_min = 15" "default_mem_mb = 256"
    run remote submit plan < <(request arg=true)
    [ "$status" -eq 0 ]
    [ "$(dec "$(printf '%s\n' "$output" | awk '$2 == "time_min" { print $3 }')")" = 15 ]
    [ "$(dec "$(printf '%s\n' "$output" | awk '$2 == "mem_mb" { print $3 }')")" = 256 ]
}

@test "a cap reached since planning refuses with its own code (7) and journals it" {
    write_policy "max_active_jobs = 1"
    run remote submit plan < <(request request_id=a arg=sleep arg=60)
    run remote submit launch < <(request request_id=a arg=sleep arg=60; go "$(plan_hash)")
    [ "$status" -eq 0 ]
    run remote submit plan < <(request request_id=b arg=sleep arg=61)
    [ "$(field active count)" = 1 ]
    run remote submit launch < <(request request_id=b arg=sleep arg=61; go "$(plan_hash)")
    [ "$status" -eq 7 ]
    [ "$(field error code)" = active-cap ]
    tail -n 1 "$ROOT/journal/$PROJECT.log" | grep -q 'ev=refused rid=b .* code=active-cap'
}

@test "a batch that queues more jobs at once than the active cap is refused at plan time, whatever is active" {
    write_policy "max_active_jobs = 2"
    run remote submit plan < <(request request_id=big task=a targ=true task=b targ=true task=c targ=true)
    [ "$status" -eq 3 ]
    [ "$(field policy verdict)" = refuse ]
    printf '%s\n' "$output" | sed -n 's/^@@policy-reason msg=//p' | base64 -d | grep -q '3 jobs queued at once exceed the cap of 2 active jobs: give --max-running K (K <= 2), still one launch'
    run remote submit plan < <(request request_id=two task=a targ=true task=b targ=true)
    [ "$status" -eq 0 ]
}

@test "policy.conf can limit QOS; an allowed one passes" {
    write_policy "qos = normal"
    run remote submit plan < <(request qos=high arg=true)
    [ "$status" -eq 3 ]
    printf '%s\n' "$output" | sed -n 's/^@@policy-reason msg=//p' | base64 -d | grep -q 'qos high is not allowed'
}

@test "a malformed policy file is refused, naming the key" {
    for line in "max_gpus = lots" "partitions = cpu|gpu" "colour = blue"; do
        write_policy "$line"
        run remote submit plan < <(request arg=true)
        [ "$status" -eq 3 ]
        [ "$(field error code)" = bad-policy ]
        [[ "$(dec "$(field error msg)")" == *"${line%% *}"* ]]
    done
}
