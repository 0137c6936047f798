#!/usr/bin/env bats
# The journal and logs programs under dash: cursors, seals, anchors, ownership, bounded output.
bats_require_minimum_version 1.5.0
load helpers

setup() { setup_root; }
teardown() { teardown_root; }

@test "journal lists events with line numbers and a cursor; AFTER skips what was seen" {
    submit r1 arg=true
    submit r2 arg=true
    run remote journal "$PROJECT"
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | grep -c '^@@journal ')" -eq 4 ]
    [ "$(field cursor lines)" = 4 ]
    [ "$(field base n)" = 0 ]
    run remote journal "$PROJECT" 3
    [ "$(printf '%s\n' "$output" | grep -c '^@@journal ')" -eq 1 ]
    [ "$(field base n)" = 3 ]
    [ "$(field base seal)" = "$(sed -n 3p "$ROOT/journal/$PROJECT.log" | sed 's/.* h=//')" ]
    printf '%s\n' "$output" | grep -q '^@@journal n=4 v=2 .* ev=accepted rid=r2 '
}

@test "an anchor the client saw is confirmed, and reported when the journal was cut or rewritten" {
    submit r1 arg=true
    seal=$(sed -n 2p "$ROOT/journal/$PROJECT.log" | sed 's/.* h=//')
    run remote journal "$PROJECT" 0 2 "$seal"
    [ "$(field anchor ok)" = 1 ]
    sed -i '2d' "$ROOT/journal/$PROJECT.log"
    run remote journal "$PROJECT" 0 2 "$seal"
    [ "$(field anchor ok)" = 0 ]
}

@test "journal of a project with no journal is empty with cursor 0" {
    run remote journal "$PROJECT"
    [ "$status" -eq 0 ]
    [ "$(field cursor lines)" = 0 ]
}

@test "logs returns a bounded tail of the job's output" {
    submit r1 arg=sh arg=-c 'arg=seq 1 5000'
    wait_file "$ROOT/runs/$PROJECT/r1/t0/ended"
    run remote logs "$PROJECT" "$JOB" stdout 100
    [ "$status" -eq 0 ]
    text=$(printf '%s\n' "$output" | sed -n 's/^@@chunk //p' | tr -d '\n' | base64 -d)
    [ "${#text}" -le 100 ]
    [ "$(printf '%s\n' "$text" | tail -n 1)" = 5000 ]
    run remote logs "$PROJECT" "$JOB" stdout 100000 3
    text=$(printf '%s\n' "$output" | sed -n 's/^@@chunk //p' | tr -d '\n' | base64 -d)
    [ "$text" = "$(printf '4998\n4999\n5000')" ]
}

@test "logs refuses a job this project did not launch" {
    other=$(lab_sbatch --wrap true)
    run remote logs "$PROJECT" "$other" stdout 100
    [ "$status" -eq 2 ]
    [ "$(field error code)" = not-ours ]
}
