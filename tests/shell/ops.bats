#!/usr/bin/env bats
# The status, cancel, reconcile and doctor programs under dash against the lab Slurm.
bats_require_minimum_version 1.5.0
load helpers

setup() { setup_root; }
teardown() { teardown_root; }

# jfact RID KEY: a raw fact of the request's job (the states are decided in Python: tests/unit/test_states.py)

@test "status reports each job once, with the facts of squeue, markers and journal, in one call" {
    submit ok arg=true
    submit bad arg=sh arg=-c 'arg=exit 4'
    submit run arg=sleep arg=120
    wait_file "$ROOT/runs/$PROJECT/bad/t0/ended"
    wait_file "$ROOT/runs/$PROJECT/ok/t0/ended"
    wait_file "$ROOT/runs/$PROJECT/run/t0/started"
    run remote status "$PROJECT"
    [ "$status" -eq 0 ]
    [ "$(field status slurm)" = up ]
    [ "$(printf '%s\n' "$output" | grep -c '^@@job ')" -eq 3 ]
    [ "$(jfact ok rc)" = 0 ]
    [ "$(jfact bad rc)" = 4 ]
    [ "$(jfact run sq)" = RUNNING ]
    [ "$(jfact run res)" = 1,1,1024,0,60 ]
}

@test "status keeps the facts of jobs Slurm forgot, from the run markers" {
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
    run remote status "$PROJECT"
    [ "$(jfact a sig)" = TERM ] && [ "$(jfact a elapsed)" = 10 ]
    [ "$(jfact b elapsed)" = 60 ] && [ "$(jfact b limit)" = 60 ]
    [ -z "$(jfact c rc)" ] && [ -z "$(jfact c sq)" ]
}

@test "the words a job can write in the journal and the markers reach status as one word of plain characters" {
    mkdir -p "$ROOT/journal" "$ROOT/runs/$PROJECT/zz/t0"
    esc=$(printf '\033')
    printf 'v=2 t=%s[2J ev=accepted rid=zz plan=x idx=0 task=[bold]HI[/bold]%s[31mRED[link=http://evil.example/]x job=99998 res=1,%s]0;t lease=a%sb\n' \
        "$esc" "$esc" "$esc" "$esc" >"$ROOT/journal/$PROJECT.log"
    printf 'rc=1%s[0m sig=TERM%s]8 t=1 elapsed=5 limit=60\n' "$esc" "$esc" >"$ROOT/runs/$PROJECT/zz/t0/ended"
    chown -R "$LAB_USER" "$ROOT"
    run remote status "$PROJECT"
    [ "$status" -eq 0 ]
    line=$(printf '%s\n' "$output" | grep '^@@job rid=zz ')
    [ -n "$line" ]
    case $line in *"$esc"*) false ;; esac # no escape character passes
    [ "$(jfact zz task)" = "[bold]HI[_bold]_[31mRED[link_http:__evil.example_]x" ]
    [ "$(jfact zz sig)" = "TERM_]8" ]
}

@test "status with a cursor also returns the journal lines after it" {
    submit one arg=true
    run remote status "$PROJECT" 1
    [ "$(field cursor lines)" = 2 ]
    [ "$(printf '%s\n' "$output" | grep -c '^@@journal ')" -eq 1 ]
}

@test "status, the active count and cancel find a job the ledger holds by id, whatever name it gave itself" {
    submit ren arg=sleep arg=120
    runuser -u "$LAB_USER" -- scontrol update JobId="$JOB" JobName=innocent
    run remote status "$PROJECT"
    # Slurm writes its output under the request's run directory, which no rename changes: still this project's
    case $(jfact ren sq) in PENDING | RUNNING) ;; *) false ;; esac
    run remote submit plan < <(request request_id=other arg=true)
    [ "$(field active count)" = 1 ] && [ "$(field active jobs)" = "$JOB" ]
    HELD="$JOB:ren,999999:ghost" run remote status "$PROJECT"
    case $(jfact ren sq) in PENDING | RUNNING) ;; *) false ;; esac
    [ "$(jfact ren held)" = 1 ]
    [ "$(jfact ghost job)" = 999999 ] && [ -z "$(jfact ghost sq)" ] # held, unknown to the journal: listed
    HELD="$JOB:ren" run remote submit plan < <(request request_id=other arg=true)
    [ "$(field active count)" = 1 ] && [ "$(field active jobs)" = "$JOB" ]
    # the job also claims another request in the journal: Slurm's word (name, output path) and the ledger's decide
    echo "v=2 t=x ev=accepted rid=other plan=p idx=0 job=$JOB" >>"$ROOT/journal/$PROJECT.log"
    run remote cancel "$PROJECT" rid other
    [ "$(field cancel job)" = "$JOB" ]
    [ "$(field cancel result)" = not-ours ]
    HELD="$JOB:ren" run remote cancel "$PROJECT" job "$JOB"
    [ "$(field cancel result)" = cancelled ]
    [ "$(field cancel rid)" = ren ]
    HELD="bad word" run remote status "$PROJECT"
    [ "$status" -eq 2 ]
    [ "$(field error code)" = bad-held ]
}

@test "cancel finds a renamed job without the ledger by where Slurm writes its output, and only for its request" {
    submit ren arg=sleep arg=120
    runuser -u "$LAB_USER" -- scontrol update JobId="$JOB" JobName=innocent
    : >"$ROOT/journal/$PROJECT.log" # the job erased its journal lines too; the ledger lost the answer
    run remote cancel "$PROJECT" rid else
    [ "$(field cancel result)" = not-ours ] # nothing of that request
    runuser -u "$LAB_USER" -- squeue -h -j "$JOB" -o %T | grep -Eq 'PENDING|RUNNING'
    run remote cancel "$PROJECT" rid ren
    [ "$(field cancel job)" = "$JOB" ]
    [ "$(field cancel result)" = cancelled ]
    grep -q " ev=cancelled rid=ren .* job=$JOB" "$ROOT/journal/$PROJECT.log"
}

@test "a job's name cannot stand in for Slurm's state: the cap, status and cancel read the state Slurm gives" {
    submit fake arg=sleep arg=120
    runuser -u "$LAB_USER" -- scontrol update JobId="$JOB" JobName="rsk:$PROJECT:fake|COMPLETED|0:00|1:00|none"
    run remote submit plan < <(request request_id=other arg=true)
    [ "$(field active count)" = 1 ]
    [ "$(field active jobs)" = "$JOB" ]
    run remote status "$PROJECT"
    case $(jfact fake sq) in PENDING | RUNNING) ;; *) false ;; esac
    run remote cancel "$PROJECT" job "$JOB"
    [ "$(field cancel result)" = cancelled ]
}

@test "a line break in a job's name or comment forges no line of Slurm's queue" {
    submit fake arg=sleep arg=120
    runuser -u "$LAB_USER" -- scontrol update JobId="$JOB" \
        JobName="$(printf 'a\n%s|COMPLETED|0:01|1-00:00:00|n1|rsk:%s:fake' "$JOB" "$PROJECT")" \
        Comment="$(printf 'x\n%s|COMPLETED|0:01|1:00|n1|rsk:%s:fake|' "$JOB" "$PROJECT")"
    export HELD="$JOB:fake" # rsk finds its jobs by the ledger's ids (the name is now "a")
    run remote submit plan < <(request request_id=other arg=true)
    [ "$(field active count)" = 1 ]
    run remote status "$PROJECT"
    case $(jfact fake sq) in PENDING | RUNNING) ;; *) false ;; esac
    run remote cancel "$PROJECT" job "$JOB"
    [ "$(field cancel result)" = cancelled ]
    unset HELD
}

@test "status reads what Slurm holds by every way of asking, and a line break in a GRES forges no line" {
    # a job of the account raises a pending job by spellings its plan never uses (docs/adr/0041)
    up=$(lab_sbatch --hold --job-name "rsk:$PROJECT:up" -p cpu -c 1 --mem 100 -t 2 --wrap 'sleep 1')
    runuser -u "$LAB_USER" -- scontrol update JobId="$up" TresPerJob=gres:gpu:3
    runuser -u "$LAB_USER" -- scontrol update JobId="$up" Partition=gpu MinCPUsNode=2
    # ... and another forges a line of its own in Slurm's answer: Slurm keeps a GRES with a line break
    fake=$(lab_sbatch --hold --job-name "rsk:$PROJECT:fake" -c 1 --mem 100 -t 2 --wrap 'sleep 1')
    runuser -u "$LAB_USER" -- scontrol update JobId="$fake" \
        Gres="$(printf 'gpu:1\n%s|COMPLETED|1|60|n1|1|1|1|100M|N/A' "$fake")"
    HELD="$up:up,$fake:fake" run remote status "$PROJECT"
    runuser -u "$LAB_USER" -- scancel "$up" "$fake"
    [ "$(jfact up sq_shape)" = 1,2,100,3 ]
    [ "$(jfact up sq_part)" = gpu ]
    [ "$(jfact fake sq)" = PENDING ]
    [ "$(jfact fake sq_elapsed)" = 0 ]
}

@test "cancel by request id cancels that request's job only, and journals it" {
    submit keep arg=sleep arg=120
    keep=$JOB
    submit stop arg=sleep arg=121
    run remote cancel "$PROJECT" rid stop
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | grep -c '^@@cancel ')" -eq 1 ]
    [ "$(field cancel result)" = cancelled ]
    [ "$(field cancel job)" = "$JOB" ]
    grep -q "ev=cancelled rid=stop .* job=$JOB" "$ROOT/journal/$PROJECT.log"
    runuser -u "$LAB_USER" -- squeue -h -o %i | grep -qx "$keep"
}

@test "cancel by request id takes its attempts (R.a2) too, newest first, and no request that only starts alike" {
    submit run arg=sleep arg=120
    first=$JOB
    submit run.a2 arg=sleep arg=121
    again=$JOB
    submit run.ab arg=sleep arg=122
    other=$JOB
    run remote cancel "$PROJECT" rid run
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | grep -c '^@@cancel .*result=cancelled')" -eq 2 ]
    [ "$(printf '%s\n' "$output" | grep '^@@cancel ' | head -n 1 | grep -c "job=$again ")" -eq 1 ]
    ! runuser -u "$LAB_USER" -- squeue -h -o %i | grep -qx "$first"
    runuser -u "$LAB_USER" -- squeue -h -o %i | grep -qx "$other"
    run remote cancel "$PROJECT" rid run.ab
    [ "$(field cancel result)" = cancelled ]
}

@test "cancel leaves a reused job id alone when its name lacks this project's identity" {
    foreign=$(lab_sbatch --wrap 'sleep 120')
    mkdir -p "$ROOT/journal"
    echo "v=1 t=x ev=accepted rid=old plan=p job=$foreign" >"$ROOT/journal/$PROJECT.log"
    chown -R "$LAB_USER" "$ROOT/journal"
    run remote cancel "$PROJECT" job "$foreign"
    [ "$(field cancel result)" = not-ours ]
    runuser -u "$LAB_USER" -- squeue -h -o %i | grep -qx "$foreign"
    runuser -u "$LAB_USER" -- scancel "$foreign"
}

@test "cancel of a batch cancels every task" {
    run remote submit plan < <(request request_id=bb task=x arg=ignored)
    [ "$status" -eq 2 ]  # a batch gives each task its own command
    req() { framed "$(printf 'project =%s\nrequest_id =bb\n' "$PROJECT"
            for k in t1 t2 t3; do printf 'task =%s\ntarg =sleep\ntarg =120\n' "$k"; done)
"; }
    run remote submit plan < <(req)
    run remote submit launch < <(req; go "$(plan_hash)")
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | grep -c '^@@accepted ')" -eq 3 ]
    run remote cancel "$PROJECT" batch bb
    [ "$(printf '%s\n' "$output" | grep -c 'result=cancelled')" -eq 3 ]
}

@test "cancel says cancelled only for what Slurm cancelled: a job that ended before the scancel is finished" {
    submit brief arg=sleep arg=1 # running when cancel reads the queue, ended by the time scancel runs
    brief=$JOB
    submit long arg=sleep arg=120
    fake=$(mktemp -d) # root's, as a site's own command is (one the account could rewrite is refused)
    printf '#!/bin/sh\nsleep 12\nexec /usr/bin/scancel "$@"\n' >"$fake/scancel" # a scancel that comes late
    chmod 0755 "$fake" "$fake/scancel"
    for _ in $(seq 30); do [ "$(runuser -u "$LAB_USER" -- squeue -h -j "$brief" -o %T)" = RUNNING ] && break; sleep 1; done
    run remote_env "$fake:$PATH" cancel "$PROJECT" rid brief
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -q "^@@cancel job=$brief rid=brief task= result=finished"
    ! grep -q " ev=cancelled rid=brief " "$ROOT/journal/$PROJECT.log"
    run remote_env "$fake:$PATH" cancel "$PROJECT" rid long
    printf '%s\n' "$output" | grep -q "^@@cancel job=$JOB rid=long task= result=cancelled"
    grep -q " ev=cancelled rid=long " "$ROOT/journal/$PROJECT.log"
    rm -rf "$fake"
}

@test "reconcile records evidence, abandons what never reached Slurm, and submits nothing" {
    job=$(lab_sbatch --job-name "rsk:$PROJECT:seen" --wrap 'sleep 60')
    mkdir -p "$ROOT/journal"
    printf 'v=1 t=x ev=intent rid=seen plan=p\nv=1 t=x ev=intent rid=gone plan=q\n' >"$ROOT/journal/$PROJECT.log"
    chown -R "$LAB_USER" "$ROOT/journal"
    mine() { runuser -u "$LAB_USER" -- squeue -h -o %j | awk -v p="rsk:$PROJECT:" 'index($0, p) == 1 { n++ } END { print n + 0 }'; }
    before=$(mine) # this project's jobs: other suites share the lab's account and queue
    run remote reconcile "$PROJECT"
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -q "^@@reconcile rid=seen idx=0 task= plan=p result=reconciled job=$job"
    printf '%s\n' "$output" | grep -q '^@@reconcile rid=gone idx=0 task= plan=q result=abandoned'
    [ "$(printf '%s\n' "$output" | grep -c '^@@reconcile ')" -eq 2 ] # one line per open intent, nothing else
    [ "$(mine)" -eq "$before" ]
    run remote reconcile "$PROJECT"
    [ "$(field reconciled open)" = 0 ]
    [ "$(printf '%s\n' "$output" | grep -c '^@@reconcile ')" -eq 0 ]
}

@test "with since, reconcile names a job whose script runs a task no journal line gives a job, and adopts nothing" {
    submit hid arg=sleep arg=60 # its intent and accepted lines, then the job erases them and renames itself
    runuser -u "$LAB_USER" -- scontrol update JobId="$JOB" JobName=innocent
    : >"$ROOT/journal/$PROJECT.log"
    SINCE=0 run remote reconcile "$PROJECT"
    [ "$status" -eq 0 ]
    [ "$(field reconciled unknown)" = "$JOB" ] # it may be a request's: nothing of it is given back
    [ "$(printf '%s\n' "$output" | grep -c '^@@reconcile ')" -eq 0 ] # nor taken for one (a script can claim anything)
    [ ! -s "$ROOT/journal/$PROJECT.log" ]
    run remote reconcile "$PROJECT" # without since: nothing is read by script
    [ -z "$(field reconciled unknown)" ]
    runuser -u "$LAB_USER" -- scancel "$JOB"
}

@test "doctor reports every check, with sacct unavailable, devices unconstrained and processes untracked on the lab" {
    run remote doctor
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -q '^@@check name=controller result=pass'
    printf '%s\n' "$output" | grep -q '^@@check name=sacct result=unavailable'
    printf '%s\n' "$output" | grep -q '^@@check name=devices result=warn'
    printf '%s\n' "$output" | grep -q '^@@check name=proctrack result=warn'
    printf '%s\n' "$output" | grep -q '^@@check name=test-only result=pass'
    ! printf '%s\n' "$output" | grep -q 'result=fail'
}

@test "where sacct works, status joins its final states for jobs with no markers" {
    # a stand-in sacct on the cluster user's PATH: the lab runs without accounting, so this checks
    # only that status joins sacct's answer (the same format sacct -P prints) into the facts
    fake="$ROOT/fakebin"
    mkdir -p "$fake"
    cat >"$fake/sacct" <<SH
#!/bin/sh
printf '%s\n' "888801|COMPLETED|0:0" "888802|OUT_OF_MEMORY|0:125" "888803|CANCELLED by 1000|0:15" "888804|FAILED|1:0"
SH
    chmod 0755 "$fake/sacct"
    mkdir -p "$ROOT/journal"
    for r in ok:888801 oom:888802 gone:888803; do
        echo "v=1 t=x ev=accepted rid=${r%%:*} plan=p job=${r#*:}" >>"$ROOT/journal/$PROJECT.log"
    done
    chown -R "$LAB_USER" "$ROOT"
    chown -R root "$fake" # the stand-in for the site's sacct is root's (one the account could rewrite is refused)
    run remote_env "$fake:$PATH" status "$PROJECT"
    [ "$status" -eq 0 ]
    [ "$(jfact ok ac)" = COMPLETED ]
    [ "$(jfact oom ac)" = OUT_OF_MEMORY ] && [ "$(jfact oom ac_exit)" = 0 ]
    [ "$(jfact gone ac)" = CANCELLED ]
}

@test "status reads the journal as it was before squeue ran: a job accepted meanwhile waits for the next read" {
    # a launch's job accepted while status runs is in the journal but not in squeue's answer: read together, it
    # looked forgotten by Slurm (lost, its charge at worst). The stand-in squeue journals such a job, then answers.
    submit ok arg=true
    fake="$ROOT/fakebin"
    mkdir -p "$fake"
    cat >"$fake/squeue" <<SH
#!/bin/sh
echo "v=1 t=x ev=accepted rid=meanwhile plan=p job=888805" >>"$ROOT/journal/$PROJECT.log"
exec /usr/bin/squeue "\$@"
SH
    chmod 0755 "$fake/squeue"
    chown -R "$LAB_USER" "$ROOT"
    chown -R root "$fake"
    before=$(wc -l <"$ROOT/journal/$PROJECT.log")
    run remote_env "$fake:$PATH" status "$PROJECT" 0
    [ "$status" -eq 0 ]
    [ -n "$(jfact ok job)" ] && [ -z "$(jfact meanwhile job)" ]
    [ "$(field cursor lines)" = "$before" ] # the line journaled meanwhile comes with the next read
    run remote status "$PROJECT"
    [ "$(jfact meanwhile job)" = 888805 ]
}

@test "status writes no temporary file: Slurm's answers reach its join through a pipe, which no job can rewrite" {
    submit ok arg=true
    wait_file "$ROOT/runs/$PROJECT/ok/t0/ended"
    # a file under TMPDIR (the account's, like every file a job can reach) would be a window in which a job
    # of the account could rewrite what Slurm said: status must not need one
    output=$({ shipped status; printf 'rsk-frame 2 %s\n' "$NONCE"; } | runuser -u "$LAB_USER" -- env RSK_ROOT="$ROOT" \
        TMPDIR="$ROOT/no-such-dir" dash -c "$(cat "$PROGS/loader.sh")" rsk-status "$PROJECT" | sed "s/^@@$NONCE /@@/")
    [ "$(printf '%s\n' "$output" | tail -n 1)" = "@@done rc=0" ]
    [ "$(jfact ok rc)" = 0 ]
    [ -n "$(jfact ok sq)" ] || [ -n "$(jfact ok elapsed)" ]
}

@test "the project lock serialises submits: each intent is followed by its own outcome" {
    run remote submit plan < <(request request_id=a arg=true)
    ha=$(plan_hash)
    run remote submit plan < <(request request_id=b arg=false)
    hb=$(plan_hash)
    remote submit launch < <(request request_id=a arg=true; go "$ha") >"$ROOT/a.out" &
    remote submit launch < <(request request_id=b arg=false; go "$hb") >"$ROOT/b.out" &
    wait
    grep -q '^@@accepted ' "$ROOT/a.out"
    grep -q '^@@accepted ' "$ROOT/b.out"
    [ "$(events | tr '\n' ' ')" = "intent accepted intent accepted " ]
    [ "$(awk '{print $4}' "$ROOT/journal/$PROJECT.log" | sed -n '1p;2p' | sort -u | wc -l)" -eq 1 ]
}

@test "a lock that is not a plain file is lock-held at once: a FIFO a job made blocks no open, leaves no shell" {
    mkdir -p "$ROOT/journal"
    mkfifo "$ROOT/journal/$PROJECT.lock"
    chown -R "$LAB_USER" "$ROOT/journal"
    printf 'v=2 t=x ev=intent rid=gone plan=q\n' >"$ROOT/journal/$PROJECT.log"
    SECONDS=0
    run timeout 20 bash -c "$(declare -f remote remote_env shipped); ROOT=$ROOT NONCE=$NONCE PROGS=$PROGS LAB_USER=$LAB_USER remote reconcile $PROJECT"
    [ "$status" -eq 75 ] # not timeout's 124: the open never waited on a writer
    [ "$(field error code)" = lock-held ]
    [ "$SECONDS" -lt 10 ]
    [ "$(events | tr '\n' ' ')" = "intent " ] # nothing journaled
    run remote cancel "$PROJECT" rid gone # cancel goes on without it, as ever
    [ "$status" -eq 0 ]
    [ "$(field warning code)" = lock-held ]
}

@test "cancel and logs find a job id as a whole string, never as a pattern" {
    submit r1 arg=sleep arg=120
    run remote logs "$PROJECT" "${JOB%?}" stdout 100
    [ "$status" -eq 2 ]
    [ "$(field error code)" = not-ours ]
    run remote cancel "$PROJECT" job "${JOB%?}"
    [ "$(field cancel result)" = not-ours ]
    run remote cancel "$PROJECT" rid r
    [ "$(field cancel result)" = not-ours ]
    runuser -u "$LAB_USER" -- squeue -h -o %i | grep -qx "$JOB"
}

# lease_step LEASE SEQ RID: a queue entry of a lease (as `submit launch --lease` writes it) and its journal line
lease_step() {
    mkdir -p "$ROOT/leases/$PROJECT/$1/q" "$ROOT/leases/$PROJECT/$1/run" "$ROOT/leases/$PROJECT/$1/end" "$ROOT/journal"
    printf 'seq=%06d job=999999s%d rid=%s idx=0 task= plan=p gpus=1 cpus=1 mem=100 time=2\n' "$2" "$2" "$3" \
        >"$ROOT/leases/$PROJECT/$1/q/$(printf %06d "$2").step"
    echo "v=2 t=x ev=accepted rid=$3 plan=p idx=0 job=999999s$2 lease=$1 res=1,1,100,1,2" >>"$ROOT/journal/$PROJECT.log"
}

@test "a lease's step and a job report their facts in the same shape, the step's from its lease's queue" {
    submit ok arg=true
    mkdir -p "$ROOT/leases/$PROJECT/gone"
    echo "job=999999 rid=gone plan=p partition=debug nodes=1 cpus=1 mem=500 gpus=1 time=10" >"$ROOT/leases/$PROJECT/gone/lease"
    lease_step gone 1 st
    chown -R "$LAB_USER" "$ROOT"
    run remote status "$PROJECT"
    keys() { printf '%s\n' "$output" | awk -v r="rid=$1" '$1 == "@@job" && $2 == r { for (i = 2; i <= NF; i++) { sub(/=.*/, "", $i); printf "%s ", $i } }'; }
    [ -n "$(keys ok)" ] && [ "$(keys ok)" = "$(keys st)" ]
    [ "$(jfact st st)" = q ] && [ "$(jfact st st_lease)" = ended ] && [ "$(jfact st lease)" = gone ]
    [ -z "$(jfact st sq)" ] && [ -z "$(jfact st where)" ] # nothing of Slurm's is made up for a step
    [ -z "$(jfact ok st)" ] && [ -z "$(jfact ok st_lease)" ]
}

@test "a step moving through its lease's queue while status reads it is listed every time" {
    mkdir -p "$ROOT/leases/$PROJECT/busy"
    echo "job=999999 rid=busy plan=p partition=debug nodes=1 cpus=1 mem=500 gpus=1 time=10" >"$ROOT/leases/$PROJECT/busy/lease"
    for s in $(seq 1 120); do lease_step busy "$s" "r$s"; done
    chown -R "$LAB_USER" "$ROOT"
    q="$ROOT/leases/$PROJECT/busy"
    # the controller claims steps (q/ -> run/) and ends them (run/ -> end/) while status runs
    ( for s in $(seq 1 120); do f=$(printf %06d "$s"); mv "$q/q/$f.step" "$q/run/$f.step"; mv "$q/run/$f.step" "$q/end/$f.step"; done ) &
    mover=$!
    while kill -0 "$mover" 2>/dev/null; do
        run remote status "$PROJECT"
        [ "$status" -eq 0 ]
        [ "$(printf '%s\n' "$output" | grep -c '^@@job .* st=[a-z]')" -eq 120 ]
    done
    wait "$mover"
}

@test "an index a job of the account writes is a task's only up to a batch's 10,000: journal, intent, output path" {
    mkdir -p "$ROOT/journal" "$ROOT/runs/$PROJECT/zz"
    printf 'v=2 t=x ev=accepted rid=zz plan=x idx=99999999999999999999 job=1\nv=2 t=x ev=accepted rid=zz plan=x idx=10001 job=2\nv=2 t=x ev=accepted rid=ok plan=x idx=9999 job=3\nv=2 t=x ev=intent rid=yy plan=x idx=abc\nv=2 t=x ev=intent rid=yy plan=x idx=123456\n' \
        >"$ROOT/journal/$PROJECT.log"
    chown -R "$LAB_USER" "$ROOT"
    # a job of the account that Slurm writes under the project's runs, by a path of its own choosing
    job=$(lab_sbatch --hold --array=7 -o "$ROOT/runs/$PROJECT/zz/t9%99a/stdout" --wrap true)
    run remote status "$PROJECT"
    runuser -u "$LAB_USER" -- scancel "$job"
    [ "$status" -eq 0 ]
    [ "$(jfact ok idx)" = 9999 ]
    printf '%s\n' "$output" | grep '^@@job rid=zz ' | grep -q " job=${job}_7 " # listed, its index unknown
    [ -z "$(jfact zz idx)" ]
    run remote reconcile "$PROJECT"
    [ "$status" -eq 0 ]
    [ "$(field reconciled open)" = 0 ] # no forged intent is an open task
}
