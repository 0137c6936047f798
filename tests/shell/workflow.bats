#!/usr/bin/env bats
# A workflow (tasks with needs) in the submit program under dash against the lab Slurm: one plan, every task
# submitted level by level with Slurm's dependencies, and whole or not at all.
bats_require_minimum_version 1.5.0
load helpers

setup() { setup_root; }
teardown() { teardown_root; }

# dep JOB: the dependency Slurm holds for a job
dep() { runuser -u "$LAB_USER" -- scontrol show job "$1" | sed -n 's/.*Dependency=\([^ ]*\).*/\1/p'; }
# ajob KEY: the job id the submit answer gives the task KEY
ajob() { printf '%s\n' "$output" | awk -v t="task=$1" '$1 == "@@accepted" { for (i = 2; i <= NF; i++) if ($i == t) { sub(/^job=/, "", $2); print $2 } }'; }

@test "a workflow is submitted level by level, each task after the jobs of what it needs" {
    set -- request_id=wf task=prep targ=sleep targ=30 task=ta targ=true tneeds=prep:ok task=tb targ=true tneeds=prep:ok \
        task=ev targ=true tneeds=ta:ok,tb:any tgpus=1 task=rep targ=true tneeds=ev:any
    run remote submit plan < <(request "$@")
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -q '^@@planline tneeds =ta:ok,tb:any$'
    run remote submit launch < <(request "$@"; go "$(plan_hash)")
    [ "$status" -eq 0 ]
    prep=$(ajob prep) ta=$(ajob ta) tb=$(ajob tb) ev=$(ajob ev) rep=$(ajob rep)
    [ "${ta%_*}" = "${tb%_*}" ] # alike at one level: one job array
    [ "$(dep "$ta")" = "afterok:${prep}(unfulfilled)" ]
    case $(dep "$ev") in *"afterok:${ta}(unfulfilled)"*"afterany:${tb}(unfulfilled)"*) ;; *) false ;; esac
    [ "$(dep "$rep")" = "afterany:${ev}(unfulfilled)" ]
    grep -q "ev=accepted .* task=ev needs=1:ok,2:any job=$ev" "$ROOT/journal/$PROJECT.log"
}

@test "a need that names no earlier task is refused before anything is planned" {
    run remote submit plan < <(request request_id=bad task=a targ=true tneeds=b:ok task=b targ=true)
    [ "$status" -eq 2 ] && [ "$(field error code)" = bad-needs ]
    run remote submit plan < <(request request_id=bad task=a targ=true tneeds=a:ok)
    [ "$status" -eq 2 ] && [ "$(field error code)" = bad-needs ]
    run remote submit plan < <(request request_id=bad task=a targ=true task=b targ=true tneeds=a:maybe)
    [ "$status" -eq 2 ] && [ "$(field error code)" = bad-needs ]
    [ ! -e "$ROOT/journal/$PROJECT.log" ]
}


@test "a chain's links run one command on one shape, each after every earlier link stopped, within the budget" {
    chain() { request request_id=ch budget_min=3 signal_s=30 "$@"; }
    run remote submit plan < <(chain task=link1 targ=true ttime_min=1 task=link2 targ=true ttime_min=1 tneeds=link1:notok)
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -q '^@@planline budget_min =3$'
    # links that do not wait for each other, another command in a later link, more run time than the budget
    run remote submit plan < <(chain task=link1 targ=true ttime_min=1 task=link2 targ=true ttime_min=1)
    [ "$status" -eq 2 ] && [ "$(field error code)" = bad-chain ]
    run remote submit plan < <(chain task=link1 targ=true ttime_min=1 task=link2 targ=rm ttime_min=1 tneeds=link1:notok)
    [ "$status" -eq 2 ] && [ "$(field error code)" = bad-chain ]
    run remote submit plan < <(chain task=link1 targ=true ttime_min=2 task=link2 targ=true ttime_min=2 tneeds=link1:notok)
    [ "$status" -eq 2 ] && [ "$(field error code)" = bad-chain ]
    run remote submit plan < <(chain task=link1 targ=true ttime_min=1 tgpus=1 task=link2 targ=true ttime_min=1 tneeds=link1:notok)
    [ "$status" -eq 2 ] && [ "$(field error code)" = bad-chain ]
}

@test "a fault in a later task refuses the whole batch: never a batch cut short" {
    run remote submit plan < <(request request_id=cut task=a targ=true task=b targ=true tnodes=0)
    [ "$status" -eq 2 ] && [ "$(field error code)" = bad-resources ]
    run remote submit plan < <(request request_id=cut task=a targ=true task=b targ=true task=a targ=true)
    [ "$status" -eq 2 ] && [ "$(field error code)" = bad-task-key ]
}

@test "a needed task's job that the journal forged is refused, and no job of another request is cancelled" {
    set -- request_id=wf2 task=prep targ=true task=train targ=true tneeds=prep:ok
    run remote submit plan < <(request "$@")
    hash=$(plan_hash)
    other=$(lab_sbatch --job-name innocent --wrap 'sleep 60')
    mkdir -p "$ROOT/journal"
    echo "v=2 t=x ev=accepted rid=wf2 plan=$hash idx=0 task=prep job=$other" >"$ROOT/journal/$PROJECT.log"
    chown -R "$LAB_USER" "$ROOT"
    run remote submit launch < <(request "$@"; go "$hash")
    [ "$status" -eq 5 ] && [ "$(field error code)" = evidence-mismatch ]
    [ -z "$(runuser -u "$LAB_USER" -- squeue -h -o '%j %T' | awk -v n="rsk:$PROJECT:wf2" '$1 == n && $2 != "CANCELLED"')" ]
    case $(runuser -u "$LAB_USER" -- squeue -h -j "$other" -o '%T') in PENDING | RUNNING) ;; *) false ;; esac
    runuser -u "$LAB_USER" -- scancel "$other"
}
