#!/usr/bin/env bats
# The submit program under dash against the lab Slurm: plan, expect, journal, idempotency, hostile input.
bats_require_minimum_version 1.5.0
load helpers

setup() { setup_root; }
teardown() { teardown_root; }

@test "plan prints a canonical plan whose hash covers its lines, and ends with @@done rc=0" {
    run --separate-stderr remote submit plan < <(request request_id=r1 arg=true)
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | tail -n 1)" = "@@done rc=0" ]
    hash=$(plan_hash)
    [ "${#hash}" -eq 64 ]
    lines=$(printf '%s\n' "$output" | sed -n 's/^@@planline //p')
    [ "$(printf '%s\n' "$lines" | sha256sum | cut -c1-64)" = "$hash" ]
    [ "$(field policy verdict)" = allow ]
    start=$(dec "$(field estimate said)" | sed -n 's/.* to start at \([^ ]*\) using .*/\1/p')
    case $start in '' | *[!0-9]*) false ;; esac # Slurm's instant, in epoch seconds (no zone to guess)
}

@test "plan resolves defaults and binds the target's identity: cluster, user, resolved root, host key, scripts" {
    ln -s "$ROOT" "$ROOT.link"
    run --separate-stderr remote submit plan < <(request arg=true hostkey=SHA256:abc)
    [ "$status" -eq 0 ]
    planline() { dec "$(printf '%s\n' "$output" | awk -v k="$1" '$1 == "@@planline" && $2 == k { print $3 }')"; }
    [ "$(planline cluster)" = rsklab ]
    [ "$(planline user)" = "$LAB_USER" ]
    [ "$(planline root)" = "$ROOT" ]
    [ "$(planline hostkey)" = SHA256:abc ]
    [ "$(planline scripts)" = "$(PYTHONPATH=$REPO/src python3 -c 'from rsk.wire.bundle import digest; print(digest())')" ]
    [ "$(planline partition)" = cpu ]
    [ "$(planline time_min)" = 60 ]
    [ "$(planline mem_mb)" = 1024 ]
    [ "$(planline path)" = /usr/local/bin:/usr/bin:/bin ]
    rm -f "$ROOT.link"
}

@test "the working directory is bound as the cluster resolves it: symlinks followed" {
    mkdir -p "$ROOT/real"
    ln -s "$ROOT/real" "$ROOT/alias"
    chown -h "$LAB_USER" "$ROOT/real" "$ROOT/alias"
    run remote submit plan < <(request "workdir=$ROOT/alias" arg=true)
    [ "$status" -eq 0 ]
    [ "$(dec "$(printf '%s\n' "$output" | awk '$1 == "@@planline" && $2 == "workdir" { print $3 }')")" = "$ROOT/real" ]
}

@test "the same request plans to the same hash; another command, host key or QOS to another" {
    run remote submit plan < <(request arg=echo arg=a)
    a=$(plan_hash)
    run remote submit plan < <(request arg=echo arg=a)
    [ "$(plan_hash)" = "$a" ]
    run remote submit plan < <(request arg=echo arg=b)
    [ "$(plan_hash)" != "$a" ]
    run remote submit plan < <(request arg=echo arg=a hostkey=SHA256:other)
    [ "$(plan_hash)" != "$a" ]
    run remote submit plan < <(request arg=echo arg=a qos=normal)
    [ "$(printf '%s\n' "$output" | awk '$2 == "qos" { print $3 }')" = "=normal" ]
}

@test "numbers are decimal: 08 is eight, never octal" {
    run remote submit plan < <(request arg=true time_min=08 cpus=02)
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | awk '$2 == "time_min" { print $3 }')" = "=8" ]
    [ "$(printf '%s\n' "$output" | awk '$2 == "cpus" { print $3 }')" = "=2" ]
}

@test "submit with a wrong hash refuses with rc 5 and journals nothing" {
    run remote submit launch < <(request request_id=r1 arg=true; go 0000)
    [ "$status" -eq 5 ]
    [ "$(field error code)" = plan-mismatch ]
    [ ! -s "$ROOT/journal/$PROJECT.log" ]
}

@test "launch plans, waits for rsk's word, and on go submits that plan with the answer framed by the go's nonce" {
    run remote submit plan < <(request request_id=l1 arg=true)
    hash=$(plan_hash)
    other=fedcba9876543210fedcba9876543210
    run --separate-stderr remote submit launch < <(request request_id=l1 arg=true; printf 'go %s %s\n' "$hash" "$other")
    [ "$status" -eq 0 ]
    # the plan part, then @@await, then the submit part under the new nonce only
    [ "$(field await plan)" = "$hash" ]
    [ "$(printf '%s\n' "$output" | sed -n '/^@@await /,$p' | sed -n '2,$p' | grep -vc "^@@$other ")" -eq 0 ]
    job=$(printf '%s\n' "$output" | sed -n "s/^@@$other accepted job=\([0-9]*\) .*/\1/p")
    [ -n "$job" ]
    [ "$(events | tr '\n' ' ')" = "intent accepted " ]
    [ "$(runuser -u "$LAB_USER" -- squeue -h -t all -n "rsk:$PROJECT:l1" -o %i)" = "$job" ]
}

@test "launch submits a batch of two shapes on go: the plan it submits is the plan it printed" {
    set -- request_id=lb task=a targ=true task=b targ=true tgpus=1 partition=gpu
    run remote submit plan < <(request "$@")
    hash=$(plan_hash)
    other=fedcba9876543210fedcba9876543210
    run --separate-stderr remote submit launch < <(request "$@"; printf 'go %s %s\n' "$hash" "$other")
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | grep -c "^@@$other accepted job=[0-9]*_[01] .* plan=$hash ")" -eq 2 ]
}

@test "launch without a go (end of input, another word, a go without its nonce) submits and journals nothing" {
    run remote submit plan < <(request request_id=l2 arg=true)
    hash=$(plan_hash)
    for answer in '' 'stop' "go $hash" "go $hash short" "go $hash fedcba9876543210fedcba9876543210 more"; do
        run --separate-stderr remote submit launch < <(request request_id=l2 arg=true; [ -z "$answer" ] || printf '%s\n' "$answer")
        [ "$status" -eq 0 ]
        [ "$(field await plan)" = "$hash" ]
        ! printf '%s\n' "$output" | grep -q ' accepted '
    done
    [ ! -s "$ROOT/journal/$PROJECT.log" ]
    [ -z "$(runuser -u "$LAB_USER" -- squeue -h -n "rsk:$PROJECT:l2" -o %i)" ]
}

@test "launch with a go for another hash refuses with rc 5 and journals nothing" {
    other=fedcba9876543210fedcba9876543210
    run --separate-stderr remote submit launch < <(request request_id=l3 arg=true; printf 'go %s %s\n' "$(printf '0%.0s' $(seq 64))" "$other")
    [ "$status" -eq 5 ]
    printf '%s\n' "$output" | grep -q "^@@$other error code=plan-mismatch "
    [ ! -s "$ROOT/journal/$PROJECT.log" ]
}

@test "submit journals intent then accepted in sealed blocks, and the job runs the command" {
    submit r1 arg=sh arg=-c 'arg=echo ran-as-$(whoami)'
    [ -n "$JOB" ]
    [ "$(events | tr '\n' ' ')" = "intent accepted " ]
    sed -n 1p "$ROOT/journal/$PROJECT.log" | grep -Eq ' h=[0-9a-f]{16}$'
    # the seal of the first block: sha256 of "" "\n" and the line without its seal
    line=$(sed -n 1p "$ROOT/journal/$PROJECT.log")
    [ "$(printf '\n%s\n' "${line% h=*}" | sha256sum | cut -c1-16)" = "${line##* h=}" ]
    wait_file "$ROOT/runs/$PROJECT/r1/t0/ended"
    [ "$(cat "$ROOT/runs/$PROJECT/r1/t0/stdout")" = "ran-as-$LAB_USER" ]
    grep -q '^rc=0 ' "$ROOT/runs/$PROJECT/r1/t0/ended"
}

@test "the job's environment is the plan's: no login variables (GPU selectors neither), PATH from the plan, SBATCH_* ignored" {
    bin="$ROOT/bin"
    mkdir -p "$bin"
    printf '#!/bin/sh\necho impostor\n' >"$bin/hostname"
    chmod 0755 "$bin/hostname"
    chown -R "$LAB_USER" "$bin"
    run remote submit plan < <(request request_id=e1 arg=sh arg=-c 'arg=env; hostname' env=GOOD=yes)
    hash=$(plan_hash)
    run runuser -u "$LAB_USER" -- env RSK_ROOT="$ROOT" PATH="$bin:$PATH" LEAK=secret SBATCH_GRES=gpu:4 \
        SBATCH_PARTITION=gpu CUDA_VISIBLE_DEVICES=0,1,2,3 HSA_VISIBLE_DEVICES=0 ONEAPI_DEVICE_SELECTOR='level_zero:*' \
        ZE_AFFINITY_MASK=0 GPU_DEVICE_ORDINAL=0 CUDA_DEVICE_ORDER=PCI_BUS_ID dash -c "$(cat "$PROGS/loader.sh")" rsk-submit launch \
        < <(shipped submit; printf 'rsk-frame 2 %s\n' "$NONCE"; request request_id=e1 arg=sh arg=-c 'arg=env; hostname' env=GOOD=yes
            go "$hash")
    [ "$status" -eq 0 ]
    job=$(printf '%s\n' "$output" | sed -n "s/^@@$NONCE accepted job=\([0-9]*\) .*/\1/p")
    wait_file "$ROOT/runs/$PROJECT/e1/t0/ended"
    out=$(cat "$ROOT/runs/$PROJECT/e1/t0/stdout")
    printf '%s\n' "$out" | grep -qx 'GOOD=yes'
    printf '%s\n' "$out" | grep -qx 'PATH=/usr/local/bin:/usr/bin:/bin'
    ! printf '%s\n' "$out" | grep -q 'LEAK\|impostor\|SBATCH_\|VISIBLE\|ORDINAL\|ZE_\|ONEAPI\|CUDA'
    # Slurm allocated what the plan says: the cpu partition, no GPU (scontrol remembers it MinJobAge)
    shown=$(runuser -u "$LAB_USER" -- scontrol show job "$job")
    printf '%s\n' "$shown" | grep -q 'Partition=cpu '
    ! printf '%s\n' "$shown" | grep -q 'gpu'
}

# the names that choose which GPUs a job sees, or how they are numbered, in CUDA, ROCm, HIP, HSA, OpenCL and oneAPI
GPU_NAMES='CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES HIP_VISIBLE_DEVICES HSA_VISIBLE_DEVICES
HABANA_VISIBLE_DEVICES GPU_DEVICE_ORDINAL CUDA_DEVICE_ORDER ZE_AFFINITY_MASK ZE_ENABLE_PCI_ID_DEVICE_ORDER
ZE_FLAT_DEVICE_HIERARCHY ONEAPI_DEVICE_SELECTOR SYCL_DEVICE_FILTER SYCL_DEVICE_ALLOWLIST'

@test "environment names that rsk or Slurm own, or that choose the GPUs a job sees, are refused" {
    for e in SLURM_JOB_ID=1 RSK_X=1 rsk_run=/tmp PATH=/tmp SBATCH_GRES=gpu:4; do
        run remote submit plan < <(request "env=$e" arg=true)
        [ "$status" -eq 2 ]
        [ "$(field error code)" = bad-env ]
    done
    for name in $GPU_NAMES; do
        run remote submit plan < <(request "env=$name=0" arg=true)
        [ "$status" -eq 2 ]
        [ "$(field error code)" = bad-env ]
    done
    run remote submit plan < <(request env=VISIBLE=0 env=DEVICES_SEEN=1 arg=true)
    [ "$status" -eq 0 ]
}

@test "the job script refuses every such name too, whatever reaches it" {
    submit js arg=true
    # the job script's own guard (rsk_export), as Slurm keeps the script, run on each name as an entry would be
    runuser -u "$LAB_USER" -- scontrol write batch_script "$JOB" - | grep '^rsk_export() ' >"$ROOT/export.sh"
    [ -s "$ROOT/export.sh" ]
    for name in $GPU_NAMES SLURM_JOB_ID PATH; do
        run dash -c '. "$1"; rsk_a=$2=0; rsk_export; echo exported' - "$ROOT/export.sh" "$name"
        [ "$status" -eq 2 ]
        [ "$output" = "rsk: refusing environment name $name" ]
    done
    run dash -c '. "$1"; rsk_a=GOOD=1; rsk_export; echo "exported $GOOD"' - "$ROOT/export.sh"
    [ "$output" = "exported 1" ]
}

@test "a job that turns requeue back on and requeues itself runs nothing more, and counts its whole limit" {
    submit rr arg=sh arg=-c 'arg=if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then scontrol update JobId="$SLURM_JOB_ID" Requeue=1 && scontrol requeue "$SLURM_JOB_ID"; sleep 30; fi; echo ran-again'
    # Slurm holds a requeued job a while before it runs it again; the wrapper then runs nothing
    i=0
    until runuser -u "$LAB_USER" -- scontrol show job "$JOB" | grep -q 'Restarts=[1-9]'; do
        i=$((i + 1)); [ "$i" -lt 100 ] || false; sleep 0.2
    done
    run remote status "$PROJECT"
    [ "$(jfact rr sq_elapsed)" = "$(jfact rr sq_limit)" ] # Slurm's run time is the last run's: the limit counts
    runuser -u "$LAB_USER" -- scancel "$JOB"
}

@test "a job cannot requeue itself to run its time limit again (sbatch --no-requeue)" {
    submit rq arg=sh arg=-c 'arg=scontrol requeue "$SLURM_JOB_ID" && echo requeued || echo refused; sleep 5'
    wait_file "$ROOT/runs/$PROJECT/rq/t0/ended" 60
    [ "$(cat "$ROOT/runs/$PROJECT/rq/t0/stdout")" = refused ]
    runuser -u "$LAB_USER" -- scontrol show job "$JOB" | grep -q 'Requeue=0 Restarts=0'
}

@test "a request id that was accepted replays the same job and submits nothing" {
    submit r1 arg=true
    job=$JOB
    run remote submit plan < <(request request_id=r1 arg=true)
    [ "$(field prior state)" = done ]
    [ "$(field prior job)" = "$job" ]
    run remote submit launch < <(request request_id=r1 arg=true; go "$(plan_hash)")
    [ "$status" -eq 0 ]
    [ "$(field accepted job)" = "$job" ]
    [ "$(field accepted replay)" = 1 ]
    [ "$(wc -l < "$ROOT/journal/$PROJECT.log")" -eq 2 ]
}

@test "request ids are compared whole: exp.1 is not exp-1, and project a.b does not count aXb's jobs" {
    submit exp-1 arg=sleep arg=60
    first=$JOB
    run remote submit plan < <(request request_id=exp.1 arg=sleep arg=60)
    [ -z "$(field prior state)" ]
    submit exp.1 arg=sleep arg=60
    [ "$JOB" != "$first" ]
    base=$PROJECT
    PROJECT="${base}aXb"
    submit x arg=sleep arg=60
    PROJECT="${base}a.b"
    run remote submit plan < <(request arg=true)
    [ "$(field active count)" = 0 ]
    PROJECT=$base
}

@test "the same request id with another plan is a conflict (rc 5), at plan time already" {
    submit r1 arg=true
    run remote submit plan < <(request request_id=r1 arg=false)
    [ "$status" -eq 5 ]
    [ "$(field error code)" = request-conflict ]
}

@test "request ids, projects and names that could escape a path are refused" {
    for rid in ../x a/b .hidden '-x' 'a b' "$(printf 'a\nb')"; do
        run remote submit plan < <(request "request_id=$rid" arg=true)
        [ "$status" -eq 2 ]
        [ "$(field error code)" = bad-request-id ]
    done
    PROJECT=../evil
    run remote submit plan < <(request arg=true)
    [ "$status" -eq 2 ]
    [ "$(field error code)" = bad-project ]
    [ ! -e "$ROOT/evil" ]
}

@test "hostile arguments and environment reach the job byte for byte, never interpreted" {
    marker="/tmp/rsk-pwned-$$"
    set -- "arg=sh" "arg=-c" 'arg=for a in "$@"; do printf "[%s]" "$a"; done; printf "{%s}" "$V"' "arg=sh" \
        "arg=\$(touch $marker)" 'arg=`touch '"$marker"'`' "arg=a;b" "arg=*" "arg=it's \"q\"" \
        "arg=$(printf 'x\ny')" "arg=é漢" "arg=" "env=V=\$(touch $marker); \`x\` *"
    submit h "$@"
    wait_file "$ROOT/runs/$PROJECT/h/t0/ended"
    expected="[\$(touch $marker)][\`touch $marker\`][a;b][*][it's \"q\"][$(printf 'x\ny')][é漢][]{\$(touch $marker); \`x\` *}"
    [ "$(cat "$ROOT/runs/$PROJECT/h/t0/stdout")" = "$expected" ]
    [ ! -e "$marker" ]
}

@test "a bad request is refused with a typed @@error: truncated, unknown key, repeated key, not base64" {
    run remote submit plan < <(printf 'rsk-request 2 40\nproject =%s\n' "$PROJECT")
    [ "$status" -eq 2 ]
    [ "$(field error code)" = bad-request ]
    run remote submit plan < <(printf 'rsk-request 2\nproject =%s\n' "$PROJECT")  # no length
    [ "$(field error code)" = bad-request ]
    run remote submit plan < <(framed $'bogus eA==\n')
    [ "$status" -eq 2 ]
    run remote submit plan < <(framed $'project =a\nproject =b\n')
    [ "$status" -eq 2 ]
    [ "$(field error code)" = bad-request ]
    run remote submit plan < <(framed $'project $(id)\n')
    [ "$status" -eq 2 ]
    [ "$(field error code)" = bad-encoding ]
    run remote submit plan < <(printf 'rsk-request 9 0\n')
    [ "$(field error code)" = bad-protocol ]
}

@test "without the frame line a program prints no @@ line and exits 2" {
    run runuser -u "$LAB_USER" -- env RSK_ROOT="$ROOT" dash -c "$(cat "$PROGS/loader.sh")" rsk-status "$PROJECT" \
        < <(shipped status)
    [ "$status" -eq 2 ]
    ! printf '%s\n' "$output" | grep -q '^@@'
}

@test "the loader reads the program to the byte, across short reads, and leaves the request whole" {
    prog="$PROGS/submit.sh"
    size=$(($(wc -c <"$prog")))
    # the program arrives in three pieces with pauses between (a pipe hands each over alone), then the request
    run runuser -u "$LAB_USER" -- env RSK_ROOT="$ROOT" dash -c "$(cat "$PROGS/loader.sh")" rsk-submit plan \
        < <(printf 'rsk-program %s\n' "$size"; head -c 1000 "$prog"; sleep 0.3; tail -c +1001 "$prog" | head -c 30000
            sleep 0.3; tail -c +31001 "$prog"; printf 'rsk-frame 2 %s\n' "$NONCE"; request request_id=ld arg=true)
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -q "^@@$NONCE plan "
}

@test "a program cut short, or without its header, runs nothing and exits 2" {
    prog="$PROGS/status.sh"
    size=$(($(wc -c <"$prog")))
    run runuser -u "$LAB_USER" -- env RSK_ROOT="$ROOT" dash -c "$(cat "$PROGS/loader.sh")" rsk-status "$PROJECT" \
        < <(printf 'rsk-program %s\n' "$size"; head -c $((size - 10)) "$prog")
    [ "$status" -eq 2 ]
    printf '%s\n' "$output" | grep -q 'did not arrive whole'
    run runuser -u "$LAB_USER" -- env RSK_ROOT="$ROOT" dash -c "$(cat "$PROGS/loader.sh")" rsk-status "$PROJECT" \
        < <(printf 'rsk-frame 2 %s\n' "$NONCE")
    [ "$status" -eq 2 ]
    ! printf '%s\n' "$output" | grep -q '^@@'
    run runuser -u "$LAB_USER" -- env RSK_ROOT="$ROOT" dash -c "$(cat "$PROGS/loader.sh")" rsk-status "$PROJECT" \
        < <(printf 'rsk-program 12x\n')
    [ "$status" -eq 2 ]
}

@test "Slurm's refusal at plan time is rc 70 with its message" {
    run remote submit plan < <(request partition=gpu gpus=64 arg=true)
    [ "$status" -eq 70 ]
    [ "$(field error code)" = slurm-rejected ]
}

@test "a missing working directory is refused before anything is submitted" {
    run remote submit plan < <(request workdir=/nonexistent/dir arg=true)
    [ "$status" -eq 2 ]
    [ "$(field error code)" = workdir-missing ]
    # the message names the directory that is missing
    msg=$(field error msg)
    case $(dec "$msg") in *"/nonexistent/dir does not exist"*) ;; *) false ;; esac
}

@test "an unwritable remote root refuses before sbatch (rc 73)" {
    run remote submit plan < <(request request_id=r1 arg=true)
    hash=$(plan_hash)
    mkdir -p "$ROOT/journal"
    chown root "$ROOT/journal"
    chmod 0755 "$ROOT/journal"
    run remote submit launch < <(request request_id=r1 arg=true; go "$hash")
    [ "$status" -eq 73 ]
    [ "$(field error code)" = root-unwritable ]
    [ -z "$(runuser -u "$LAB_USER" -- squeue -h -n "rsk:$PROJECT:r1" -o %i)" ]
}

@test "flock is a checked requirement: without it nothing is journaled or submitted (rc 78)" {
    noflock="$ROOT/noflock"
    mkdir -p "$noflock"
    for c in /usr/bin/*; do [ "${c##*/}" = flock ] || ln -s "$c" "$noflock/${c##*/}"; done
    run remote submit plan < <(request request_id=r1 arg=true)
    run remote_env "$noflock:/usr/sbin:/sbin" submit launch < <(request request_id=r1 arg=true; go "$(plan_hash)")
    [ "$status" -eq 78 ]
    [ "$(field error code)" = missing-command ]
    [ ! -s "$ROOT/journal/$PROJECT.log" ]
}

@test "a Slurm command the account can rewrite is refused before anything is read, journaled or submitted (rc 78)" {
    # a job of the account puts a squeue of its own first on PATH, to answer for Slurm
    fake="$ROOT/jobbin"
    mkdir -p "$fake"
    printf '#!/bin/sh\nexit 0\n' >"$fake/squeue"
    chmod 0755 "$fake/squeue"
    chown -R "$LAB_USER" "$fake"
    for entry in status gpus; do
        run remote_env "$fake:$PATH" "$entry" "$PROJECT"
        [ "$status" -eq 78 ]
        [ "$(field error code)" = untrusted-command ]
        dec "$(field error msg)" | grep -q "$fake/squeue"
    done
    run remote_env "$fake:$PATH" submit launch < <(request request_id=u1 arg=true; go 0000)
    [ "$status" -eq 78 ]
    [ ! -s "$ROOT/journal/$PROJECT.log" ]
    # a command the account cannot write, in a directory it can, is the same risk: the job swaps it
    rm "$fake/squeue"
    ln -s /usr/bin/squeue "$fake/squeue"
    run remote_env "$fake:$PATH" status "$PROJECT"
    [ "$status" -eq 78 ]
    # in a directory only root writes, the same command is trusted
    chown -R root "$fake"
    run remote_env "$fake:$PATH" status "$PROJECT"
    [ "$status" -eq 0 ]
}

@test "a journal that refuses the outcome after sbatch loses no job: the same request id replays it" {
    fake="$ROOT/fakebin"
    mkdir -p "$fake"
    # sbatch submits, then the disk "fills": the journal cannot take the outcome
    printf '#!/bin/sh\n/usr/bin/sbatch "$@"; rc=$?; chmod a-w %s/journal/%s.log; exit $rc\n' "$ROOT" "$PROJECT" >"$fake/sbatch"
    chmod 0755 "$fake/sbatch" # (root's: a command the account could rewrite is refused, see below)
    run remote submit plan < <(request request_id=full arg=sleep arg=60)
    hash=$(plan_hash)
    run remote_env "$fake:$PATH" submit launch < <(request request_id=full arg=sleep arg=60; go "$hash")
    [ "$status" -eq 0 ]
    job=$(field accepted job)
    [ -n "$job" ]
    [ "$(field warning code)" = journal-unwritable ]
    chmod u+w "$ROOT/journal/$PROJECT.log"
    [ "$(events | tr '\n' ' ')" = "intent " ]
    run remote submit launch < <(request request_id=full arg=sleep arg=60; go "$hash")
    [ "$status" -eq 0 ]
    [ "$(field accepted job)" = "$job" ]
    [ "$(field accepted replay)" = 1 ]
    [ "$(events | tr '\n' ' ')" = "intent reconciled " ]
    [ "$(runuser -u "$LAB_USER" -- squeue -h -n "rsk:$PROJECT:full" -o %i | wc -l)" -eq 1 ]
}

@test "a torn tail (a cut write, an older rsk) is kept and sealed with a repaired event" {
    run remote submit plan < <(request request_id=r1 arg=true)
    hash=$(plan_hash)
    mkdir -p "$ROOT/journal"
    printf 'v=1 t=2026-01-01T00:00:00Z ev=failed rid=old plan=p\nv=2 t=2026-01-01T00:00:01Z ev=inte' >"$ROOT/journal/$PROJECT.log"
    chown -R "$LAB_USER" "$ROOT/journal"
    run remote submit launch < <(request request_id=r1 arg=true; go "$hash")
    [ "$status" -eq 0 ]
    sed -n 1p "$ROOT/journal/$PROJECT.log" | grep -q 'ev=failed rid=old'
    [ "$(sed -n 2p "$ROOT/journal/$PROJECT.log")" = 'v=2 t=2026-01-01T00:00:01Z ev=inte' ]
    sed -n 3p "$ROOT/journal/$PROJECT.log" | grep -q 'ev=repaired .* lines=2'
    [ "$(events | tail -n 2 | tr '\n' ' ')" = "intent accepted " ]
    # every block checks out
    PYTHONPATH="$REPO/src" python3 -c '
import sys
from rsk.wire.chain import check
lines = [(n + 1, t) for n, t in enumerate(open(sys.argv[1]).read().splitlines())]
r = check("", lines)
assert r.ok, r.problems' "$ROOT/journal/$PROJECT.log"
}

@test "an intent with no outcome and no job is abandoned, then the request is submitted once" {
    run remote submit plan < <(request request_id=r1 arg=true)
    hash=$(plan_hash)
    mkdir -p "$ROOT/journal"
    printf 'v=2 t=2026-01-01T00:00:00Z ev=intent rid=r1 plan=%s idx=0\n' "$hash" > "$ROOT/journal/$PROJECT.log"
    chown -R "$LAB_USER" "$ROOT/journal"
    run remote submit plan < <(request request_id=r1 arg=true)
    [ "$(field prior state)" = open ]
    run remote submit launch < <(request request_id=r1 arg=true; go "$hash")
    [ "$status" -eq 0 ]
    [ "$(events | tr '\n' ' ')" = "intent repaired abandoned intent accepted " ]
}

@test "an intent with no outcome whose job exists is reconciled to that job, not resubmitted" {
    intent_with_job r1
    run remote submit launch < <(request request_id=r1 arg=sleep arg=30; go "$hash")
    [ "$status" -eq 0 ]
    [ "$(field accepted job)" = "$job" ]
    [ "$(field accepted replay)" = 1 ]
    [ "$(runuser -u "$LAB_USER" -- squeue -h -n "rsk:$PROJECT:r1" -o %i | wc -l)" -eq 1 ]
}

@test "a queue Slurm does not answer for decides nothing: no open intent is abandoned and resubmitted (rc 69)" {
    intent_with_job r1
    # squeue answers the plan, then fails under the lock (a busy controller): the job of the open intent is
    # not seen, and must not read as "no job"
    fake="$ROOT/flaky"
    mkdir -p "$fake"
    count="$ROOT/journal/squeue.calls"
    printf '#!/bin/sh\nn=$(cat %s 2>/dev/null || echo 0); echo $((n + 1)) > %s\n[ "$n" -lt 1 ] || exit 1\nexec /usr/bin/squeue "$@"\n' \
        "$count" "$count" >"$fake/squeue"
    chmod 0755 "$fake/squeue" # (root's, so trusted)
    run remote_env "$fake:$PATH" submit launch < <(request request_id=r1 arg=sleep arg=30; go "$hash")
    [ "$status" -eq 69 ]
    [ "$(field error code)" = slurm-unavailable ]
    [ "$(events | tr '\n' ' ')" = "intent " ]
    [ "$(runuser -u "$LAB_USER" -- squeue -h -n "rsk:$PROJECT:r1" -o %i)" = "$job" ]
}

@test "a job found by its name that runs another plan is a conflict, never a replay" {
    job=$(lab_sbatch --job-name "rsk:$PROJECT:r1" --comment "rsk-plan:0123abcd" --wrap 'sleep 30')
    run remote submit plan < <(request request_id=r1 arg=sleep arg=30)
    [ "$status" -eq 5 ]
    [ "$(field error code)" = request-conflict ]
    run remote submit plan < <(request request_id=r2 arg=sleep arg=30)
    [ "$status" -eq 0 ]
    [ -n "$job" ]
}

@test "the remote programs hold no eval, and none of the GNU-only forms rsk once used" {
    # (a negated command is not checked by set -e unless it is the last one: each check is a `run`)
    run grep -rnw eval "$REPO"/remote/
    [ "$status" -eq 1 ]
    # the loader's one eval runs the program it read from stdin, nothing else
    [ "$(grep -cw eval "$PROGS/loader.sh")" -eq 1 ]
    grep -qx 'eval "$RSK_TAKEN"' "$PROGS/loader.sh"
    grep -q 'rsk_nap=1$' "$REPO"/remote/controller.sh
    # the one fractional sleep is the lease controller's probe, which falls back to whole seconds
    run sh -c "grep -rn 'sleep 0\.\|mv -T\|head -c' '$REPO/remote' | grep -v 'if sleep 0\.01 2>/dev/null; then rsk_nap=0\.2; fi'"
    [ "$status" -eq 1 ]
}

@test "a step goes into a lease only while the lease's job carries the lease's identity" {
    other=$(lab_sbatch -J innocent --wrap 'sleep 120')
    ldir="$ROOT/leases/$PROJECT/old"
    mkdir -p "$ldir/q" "$ldir/run" "$ldir/end"
    echo "job=$other rid=opened plan=x partition=$(sinfo -h -o %P | head -n 1 | tr -d '*') account= qos= nodes=1 cpus=1 mem=1000 gpus=0 time=60 drain=0 overrun=refuse" >"$ldir/lease"
    chown -R "$LAB_USER" "$ROOT/leases"
    run remote submit plan < <(request request_id=s1 lease=old arg=true) # the job id is another job's now
    runuser -u "$LAB_USER" -- scontrol update JobId="$other" JobName="rsk:$PROJECT:opened"
    [ "$status" -eq 2 ]
    [ "$(field error code)" = lease-ended ]
    run remote submit plan < <(request request_id=s1 lease=old arg=true)
    [ "$status" -eq 0 ]
    [ "$(field estimate lease)" = old ]
}

@test "a step without --time runs until its lease ends; one that asks for more than is left, or more than a node of it, or a workflow, is refused" {
    job=$(lab_sbatch -J "rsk:$PROJECT:opened" --wrap 'sleep 120')
    ldir="$ROOT/leases/$PROJECT/dev"
    mkdir -p "$ldir/q" "$ldir/run" "$ldir/end"
    echo "job=$job rid=opened plan=x partition=$(sinfo -h -o %P | head -n 1 | tr -d '*') account= qos= nodes=1 cpus=1 mem=1000 gpus=0 time=60 drain=0 overrun=refuse" >"$ldir/lease"
    echo "job=$job end=$(($(date +%s) + 90))" >"$ldir/ctl" # a minute and a half left of its 60
    chown -R "$LAB_USER" "$ROOT/leases"
    run remote submit plan < <(request request_id=s1 lease=dev arg=true)
    [ "$status" -eq 0 ]
    [ "$(field estimate lease)" = dev ]
    run remote submit plan < <(request request_id=s2 lease=dev time_min=5 arg=true)
    [ "$status" -eq 70 ]
    [ "$(field error code)" = outlives-lease ]
    run remote submit plan < <(request request_id=s3 lease=dev cpus=2 arg=true) # its one node holds 1 CPU
    [ "$status" -eq 70 ]
    [ "$(field error code)" = step-never-fits ]
    dec "$(field error msg)" | grep -q "lease dev: 2 CPUs per node are more than the lease's 1"
    # the controller starts a step as soon as it fits: a workflow's needs would be passed over
    run remote submit plan < <(request request_id=s4 lease=dev task=a targ=true task=b targ=true tneeds=a:ok)
    [ "$status" -eq 2 ]
    [ "$(field error code)" = bad-request ]
    run remote submit plan < <(request request_id=s5 lease=dev task=a targ=true task=b targ=true)
    [ "$status" -eq 0 ]
}

# facts LINE: the request, behind a "facts ..." line as a broker sends it ahead of it
with_facts() { printf '%s\n' "$1"; shift; request "$@"; }
planline() { dec "$(printf '%s\n' "$output" | awk -v k="$1" '$1 == "@@planline" && $2 == k { print $3 }')"; }

@test "asked with 'facts -', plan prints the cluster's facts it read; given them back, it plans the same without reading them" {
    run --separate-stderr remote submit plan < <(with_facts 'facts -' arg=true)
    [ "$status" -eq 0 ]
    hash=$(plan_hash)
    cluster=$(field facts cluster)
    parts=$(field facts parts)
    arrays=$(field facts arrays)
    [ "$arrays" = "$(scontrol show config | sed -n 's/^MaxArraySize *= *//p')" ]
    [ "$(dec "$cluster")" = rsklab ]
    dec "$parts" | grep -q '^cpu\*|'
    [ "$(planline facts)" = "$(dec "$parts" | awk -F'|' '$1 == "cpu*" { $1 = "cpu"; OFS = ","; $1 = $1; print }' | paste -sd/)" ]
    run --separate-stderr remote submit plan < <(with_facts "facts $cluster $parts $arrays" arg=true)
    [ "$status" -eq 0 ]
    [ "$(plan_hash)" = "$hash" ]
    [ -z "$(field facts cluster)" ] # nothing read, nothing printed
    # without the facts line, nothing is printed either (a direct command keeps nothing)
    run --separate-stderr remote submit plan < <(request arg=true)
    [ "$(plan_hash)" = "$hash" ] && [ -z "$(field facts cluster)" ]
}

@test "given facts are what the plan uses and binds: another cluster name or default partition is another plan" {
    run --separate-stderr remote submit plan < <(with_facts 'facts -' arg=true)
    parts=$(field facts parts)
    hash=$(plan_hash)
    run --separate-stderr remote submit plan < <(with_facts "facts =othername $parts 1001" arg=true)
    [ "$status" -eq 0 ] && [ "$(planline cluster)" = othername ] && [ "$(plan_hash)" != "$hash" ]
    swapped=$(dec "$parts" | sed 's/^cpu\*|/cpu|/; s/^gpu|/gpu*|/' | base64 -w0)
    run --separate-stderr remote submit plan < <(with_facts "facts =rsklab $swapped 1001" arg=true)
    [ "$status" -eq 0 ] && [ "$(planline partition)" = gpu ]
}

@test "malformed facts are refused before anything is read or planned (rc 2)" {
    good=$(b64 'cpu|1:00:00|4|4000|(null)|2')
    for line in "facts =bad/name =x 1001" "facts =rsklab $(b64 'cpu|1') 1001" "facts =rsklab $(b64 'a|b|c|d|e|f|g') 1001" \
        "facts =rsklab = 1001" "facts =rsklab $good" "facts =rsklab $good x"; do
        run --separate-stderr remote submit plan < <(with_facts "$line" arg=true)
        [ "$status" -eq 2 ]
        [ "$(field error code)" = bad-facts ]
    done
}

@test "a batch past the cluster's largest array is an array a block: each task in its own run directory, max_running in all" {
    run --separate-stderr remote submit plan < <(with_facts 'facts -' arg=true)
    cluster=$(field facts cluster) parts=$(field facts parts)
    set -- request_id=sw max_running=4
    for i in $(seq 0 24); do set -- "$@" "task=k$i" targ=sh targ=-c "targ=echo task $i \$RSK_RUN_DIR; sleep 1"; done
    # a MaxArraySize of 10 (a broker's facts say so): tasks 0-9, 10-19 and 20-24 are three arrays of indices from 0
    run --separate-stderr remote submit plan < <(with_facts "facts $cluster $parts 10" "$@")
    [ "$status" -eq 0 ] && [ "$(planline max_running)" = 4 ] && [ "$(field active at_once)" = 4 ]
    hash=$(plan_hash)
    run --separate-stderr remote submit launch < <(with_facts "facts $cluster $parts 10" "$@"; go "$hash")
    [ "$status" -eq 0 ]
    jobs=$(printf '%s\n' "$output" | sed -n 's/^@@accepted job=\([0-9_]*\) .* idx=\([0-9]*\) task=\(k[0-9]*\) .*/\2 \1 \3/p')
    [ "$(printf '%s\n' "$jobs" | wc -l)" -eq 25 ]
    printf '%s\n' "$jobs" | awk '{ split($2, j, "_"); if ($1 % 10 != j[2] || $3 != "k" $1) exit 1 }'
    arrays=$(printf '%s\n' "$jobs" | awk '{ sub(/_.*/, "", $2); if (!s[$2]++) print $2 }')
    [ "$(printf '%s\n' "$arrays" | wc -l)" -eq 3 ]
    # Slurm's throttle on the three arrays adds up to max_running; the second's script runs task 10 + its index
    set -- $arrays
    sum=0
    for a in "$@"; do
        k=$(runuser -u "$LAB_USER" -- scontrol show job "$a" | sed -n 's/.*ArrayTaskThrottle=\([0-9]*\).*/\1/p' | head -n 1)
        sum=$((sum + k))
    done
    [ "$sum" -eq 4 ]
    runuser -u "$LAB_USER" -- scontrol write batch_script "$2" - | grep -qxF 'rsk_ti=$((10 + ${SLURM_ARRAY_TASK_ID:-0}))'
    # each task ran its own command in its own run directory tI, whatever array and index Slurm gave it
    for i in $(seq 0 24); do wait_file "$ROOT/runs/$PROJECT/sw/t$i/ended"; done
    for i in $(seq 0 24); do grep -qxF "task $i $ROOT/runs/$PROJECT/sw/t$i" "$ROOT/runs/$PROJECT/sw/t$i/stdout"; done
    run remote status "$PROJECT"
    [ "$(printf '%s\n' "$output" | grep -c '^@@job rid=sw ')" -eq 25 ]
    printf '%s\n' "$output" | grep -q "^@@job rid=sw task=k15 idx=15 job=${2}_5 "
}
