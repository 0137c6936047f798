#!/usr/bin/env bats
# journal.sh and logs.sh under dash: cursors, ownership, bounded output.
bats_require_minimum_version 1.5.0
load helpers

setup() { setup_root; }
teardown() { teardown_root; }

@test "journal lists events with line numbers and a cursor; AFTER skips what was seen" {
    submit r1 arg=true
    submit r2 arg=true
    run remote journal.sh "$PROJECT"
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | grep -c '^@@journal ')" -eq 4 ]
    [ "$(field cursor lines)" = 4 ]
    run remote journal.sh "$PROJECT" 3
    [ "$(printf '%s\n' "$output" | grep -c '^@@journal ')" -eq 1 ]
    printf '%s\n' "$output" | grep -q '^@@journal n=4 v=1 .* ev=accepted rid=r2 '
}

@test "journal of a project with no journal is empty with cursor 0" {
    run remote journal.sh "$PROJECT"
    [ "$status" -eq 0 ]
    [ "$(field cursor lines)" = 0 ]
}

@test "logs returns a bounded tail of the job's output" {
    submit r1 arg=sh arg=-c 'arg=seq 1 5000'
    wait_file "$ROOT/runs/$PROJECT/r1/ended"
    run remote logs.sh "$PROJECT" "$JOB" stdout 100
    [ "$status" -eq 0 ]
    text=$(printf '%s\n' "$output" | sed -n 's/^@@chunk //p' | tr -d '\n' | base64 -d)
    [ "${#text}" -le 100 ]
    [ "$(printf '%s\n' "$text" | tail -n 1)" = 5000 ]
    run remote logs.sh "$PROJECT" "$JOB" stdout 100000 3
    text=$(printf '%s\n' "$output" | sed -n 's/^@@chunk //p' | tr -d '\n' | base64 -d)
    [ "$text" = "$(printf '4998\n4999\n5000')" ]
}

@test "logs refuses a job this project did not launch" {
    other=$(lab_sbatch --wrap true)
    run remote logs.sh "$PROJECT" "$other" stdout 100
    [ "$status" -eq 2 ]
    [ "$(field error code)" = not-ours ]
}
