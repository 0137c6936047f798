# shellcheck shell=sh disable=SC2016,SC2154
# rsk batches: the part of submit.sh that handles --tasks requests (sourced by submit.sh; uses its
# request variables, plan helpers and sbatch runner). A batch is one plan with every task in it;
# tasks of one resource shape are submitted as one job array, the array index being the task's
# position in the batch (docs/protocol.md, docs/adr/0003-batches-as-job-arrays.md).
# SC2016: the wrapper text keeps $ for the job to expand; SC2154: task variables are set through eval.

# batch tasks -------------------------------------------------------------------
# Each task: a key (a token, unique in the batch), its argv, extra env, and optional resources;
# its resolved shape "nodes cpus mem_mb gpus time_min" is S_I. Tasks of one shape share one job array.
resolve_tasks() {
    i=1
    KEYS=' '
    SHAPES=''
    while [ "$i" -le "$NT" ]; do
        eval "rsk_k=\$T_key_$i rsk_a=\$T_arg_$i rsk_n=\$T_nodes_$i rsk_c=\$T_cpus_$i rsk_m=\$T_mem_mb_$i rsk_g=\$T_gpus_$i rsk_t=\$T_time_min_$i"
        rsk_unb64 "$rsk_k"
        rsk_need_token task-key "$RSK_V"
        case $KEYS in *" $RSK_V "*) rsk_fail "$RSK_E_USAGE" bad-task-key "task key $RSK_V appears twice" ;; esac
        KEYS="$KEYS$RSK_V "
        eval "K_$i=\$RSK_V"
        [ -n "$rsk_a" ] || rsk_fail "$RSK_E_USAGE" no-command "task $RSK_V has no command"
        decode_uint nodes "$rsk_n" "$NODES"; rsk_n=$RSK_V
        decode_uint cpus "$rsk_c" "$CPUS"; rsk_c=$RSK_V
        decode_uint mem "$rsk_m" "$MEM_MB"; rsk_m=$RSK_V
        decode_uint gpus "$rsk_g" "$GPUS"; rsk_g=$RSK_V
        decode_uint time "$rsk_t" "$TIME_MIN"; rsk_t=$RSK_V
        if [ "$rsk_n" -lt 1 ] || [ "$rsk_c" -lt 1 ] || [ "$rsk_m" -lt 1 ] || [ "$rsk_t" -lt 1 ]; then
            rsk_fail "$RSK_E_USAGE" bad-resources "task resources must be at least 1"
        fi
        eval "S_$i=\"\$rsk_n \$rsk_c \$rsk_m \$rsk_g \$rsk_t\""
        case $SHAPES in *"|$rsk_n $rsk_c $rsk_m $rsk_g $rsk_t|"*) ;; *) SHAPES="$SHAPES|$rsk_n $rsk_c $rsk_m $rsk_g $rsk_t|" ;; esac
        i=$((i + 1))
    done
}

set_shape() { # set_shape "NODES CPUS MEM GPUS TIME": the resources run_sbatch uses
    # shellcheck disable=SC2086  # the shape splits into its five numbers
    set -- $1
    NODES=$1 CPUS=$2 MEM_MB=$3 GPUS=$4 TIME_MIN=$5
}

for_each_shape() { # for_each_shape FUNCTION: calls FUNCTION "SHAPE" for each distinct task shape
    rsk_rest=$SHAPES
    while [ -n "$rsk_rest" ]; do
        rsk_rest=${rsk_rest#|}
        rsk_shape=${rsk_rest%%|*}
        rsk_rest=${rsk_rest#*|}
        [ -z "$rsk_shape" ] || "$1" "$rsk_shape"
    done
}


# batch submit ------------------------------------------------------------------
# One journal intent per task, then one sbatch --array per task shape (array index = task
# index - 1), then one outcome per task. A retry submits only tasks with no evidence of a job.
batch_state() { # sets LEV_I / LJOB_I: the last journal event and job of each task of this batch
    JF=$(rsk_journal_file "$PROJECT")
    [ -f "$JF" ] || return 0
    rsk_prev=$(grep " rid=$RID " "$JF" | head -n 1 || true)
    [ -n "$rsk_prev" ] || return 0
    if [ "$(rsk_field "$rsk_prev" plan)" != "$PLAN_HASH" ]; then
        rsk_fail "$RSK_E_MISMATCH" request-conflict "request id $RID was already used for another plan"
    fi
    eval "$(grep " rid=$RID " "$JF" | awk '
        function kv(key,    i) { for (i = 1; i <= NF; i++) if (index($i, key "=") == 1) return substr($i, length(key) + 2); return "" }
        { i = kv("idx"); if (i !~ /^[0-9]+$/) next; ev[i] = kv("ev"); if (kv("job") ~ /^[0-9_]+$/) job[i] = kv("job") }
        END { for (i in ev) { gsub(/[^a-z-]/, "", ev[i]); printf "LEV_%d=%s LJOB_%d=%s\n", i, ev[i], i, job[i] } }')"
}

batch_todo() { # TODO: task numbers (1-based) still to submit; resolves open intents from evidence
    TODO=''
    NOW=$(rsk_now)
    DONE=0
    JOURNAL_OUT=''
    rsk_evidence=''
    i=1
    while [ "$i" -le "$NT" ]; do
        idx=$((i - 1))
        eval "rsk_ev=\${LEV_$idx:-} rsk_job=\${LJOB_$idx:-} rsk_key=\$K_$i"
        case $rsk_ev in
            accepted | reconciled) DONE=$((DONE + 1)) ;;
            intent)
                if [ -z "$rsk_evidence" ]; then
                    rsk_evidence=" $(squeue -h -r -u "$USER_NAME" -t all -n "$(rsk_job_prefix "$PROJECT")$RID" -o '%i' 2>/dev/null | tr '\n' ' ')"
                fi
                rsk_job=$(printf '%s\n' "$rsk_evidence" | tr ' ' '\n' | grep "_$idx\$" | head -n 1 || true)
                if [ -z "$rsk_job" ] && [ -f "$RUN_DIR/t$idx/started" ]; then
                    rsk_job=$(sed -n 's/.*job=\([0-9_]*\).*/\1/p' "$RUN_DIR/t$idx/started" | head -n 1)
                fi
                if [ -n "$rsk_job" ]; then
                    JOURNAL_OUT="${JOURNAL_OUT}v=1 t=$NOW ev=reconciled rid=$RID plan=$PLAN_HASH task=$rsk_key idx=$idx job=$rsk_job
"
                    eval "LEV_$idx=reconciled LJOB_$idx=\$rsk_job"
                    DONE=$((DONE + 1))
                else
                    JOURNAL_OUT="${JOURNAL_OUT}v=1 t=$NOW ev=abandoned rid=$RID plan=$PLAN_HASH task=$rsk_key idx=$idx code=no-evidence
"
                    TODO="$TODO $i"
                fi
                ;;
            *) TODO="$TODO $i" ;;
        esac
        i=$((i + 1))
    done
}

journal_append() { # journal_append TEXT: several journal lines in one append
    [ -z "$1" ] || printf '%s' "$1" >>"$(rsk_journal_file "$PROJECT")" \
        || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot append to the journal"
}

emit_batch_accepted() { # @@accepted for every task that has a job
    i=1
    while [ "$i" -le "$NT" ]; do
        idx=$((i - 1))
        eval "rsk_job=\${LJOB_$idx:-} rsk_key=\$K_$i"
        [ -z "$rsk_job" ] || rsk_emit accepted "job=$rsk_job" "rid=$RID" "plan=$PLAN_HASH" "task=$rsk_key" "idx=$idx" "replay=$1"
        i=$((i + 1))
    done
}

write_batch_wrapper() { # write_batch_wrapper FILE TASKS: one wrapper, a case per array index
    {
        printf '#!/bin/sh\n# rsk batch wrapper (generated by submit.sh; protocol %s)\n' "$RSK_PROTOCOL"
        printf 'rsk_run=%s/t"${SLURM_ARRAY_TASK_ID:-x}"\n' "$(rsk_sq "$RUN_DIR")"
        printf 'rsk_limit=%s\n' "$((TIME_MIN * 60))"
        cat "$RSK_DIR/wrapper.sh"
        printf 'set --\n'
        for rsk_e in $Q_env; do printf "rsk_arg '%s'; export \"\$rsk_a\"\n" "$rsk_e"; done
        printf 'case ${SLURM_ARRAY_TASK_ID:-x} in\n'
        for i in $2; do
            eval "rsk_e=\$T_env_$i rsk_a=\$T_arg_$i"
            printf '%s)' "$((i - 1))"
            for rsk_x in $rsk_e; do printf " rsk_arg '%s'; export \"\$rsk_a\";" "$rsk_x"; done
            for rsk_x in $rsk_a; do printf " rsk_arg '%s'; set -- \"\$@\" \"\$rsk_a\";" "$rsk_x"; done
            printf ' ;;\n'
        done
        printf '*) echo "rsk: no task for array index ${SLURM_ARRAY_TASK_ID:-}" >&2; exit 97 ;;\nesac\n'
        printf 'rsk_main "$@"\n'
    } >"$1.tmp" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write $1"
    mv "$1.tmp" "$1" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write $1"
}

submit_shape() { # submit_shape SHAPE: one array for the TODO tasks of this shape
    rsk_tasks=''
    rsk_list=''
    for i in $TODO; do
        eval "rsk_s=\$S_$i"
        [ "$rsk_s" = "$1" ] || continue
        rsk_tasks="$rsk_tasks $i"
        rsk_list="$rsk_list,$((i - 1))"
    done
    [ -n "$rsk_tasks" ] || return 0
    set_shape "$1"
    SHAPE_N=$((SHAPE_N + 1))
    NOW=$(rsk_now)
    write_batch_wrapper "$RUN_DIR/job$SHAPE_N.sh" "$rsk_tasks"
    run_sbatch submit --job-name="$(rsk_job_prefix "$PROJECT")$RID" --array="${rsk_list#,}" \
        --output="$RUN_DIR/t%a/stdout" --error="$RUN_DIR/t%a/stderr" "$RUN_DIR/job$SHAPE_N.sh"
    rsk_job=$(printf '%s' "$SB_OUT" | head -n 1 | cut -d';' -f1)
    rsk_lines=''
    if [ "$SB_RC" -eq 0 ] && rsk_is_uint "$rsk_job"; then
        for i in $rsk_tasks; do
            eval "rsk_key=\$K_$i"
            rsk_lines="${rsk_lines}v=1 t=$NOW ev=accepted rid=$RID plan=$PLAN_HASH task=$rsk_key idx=$((i - 1)) job=${rsk_job}_$((i - 1)) res=$NODES,$CPUS,$MEM_MB,$GPUS,$TIME_MIN
"
            eval "LJOB_$((i - 1))=\${rsk_job}_$((i - 1))"
        done
        journal_append "$rsk_lines"
        return 0
    fi
    if rsk_slurm_down "$SB_ERR"; then BATCH_CODE=slurm-unavailable BATCH_RC=$RSK_E_UNAVAILABLE
    else BATCH_CODE=sbatch-failed BATCH_RC=$RSK_E_SBATCH; fi
    for i in $rsk_tasks; do
        eval "rsk_key=\$K_$i"
        rsk_lines="${rsk_lines}v=1 t=$NOW ev=failed rid=$RID plan=$PLAN_HASH task=$rsk_key idx=$((i - 1)) rc=$SB_RC code=$BATCH_CODE msg=$(rsk_b64 "$SB_ERR")
"
    done
    journal_append "$rsk_lines"
    BATCH_ERR=$SB_ERR
}

submit_batch() {
    batch_state
    batch_todo
    journal_append "$JOURNAL_OUT"
    if [ -z "$TODO" ]; then
        emit_batch_accepted 1
        return 0
    fi
    rsk_count=0
    for i in $TODO; do rsk_count=$((rsk_count + 1)); done
    rsk_active=$(count_active)
    NOW=$(rsk_now)
    if [ -n "$P_max_active_jobs" ] && [ $((rsk_active + rsk_count)) -gt "$P_max_active_jobs" ]; then
        rsk_lines=''
        for i in $TODO; do
            eval "rsk_key=\$K_$i"
            rsk_lines="${rsk_lines}v=1 t=$NOW ev=refused rid=$RID plan=$PLAN_HASH task=$rsk_key idx=$((i - 1)) code=active-cap
"
        done
        journal_append "$rsk_lines"
        rsk_fail "$RSK_E_CAP" active-cap "project $PROJECT has $rsk_active active rsk jobs; $rsk_count more would pass the cap $P_max_active_jobs"
    fi
    rsk_dirs=''
    rsk_marks=''
    for i in $TODO; do
        rsk_dirs="$rsk_dirs $RUN_DIR/t$((i - 1))"
        rsk_marks="$rsk_marks $RUN_DIR/t$((i - 1))/started $RUN_DIR/t$((i - 1))/ended"
    done
    # shellcheck disable=SC2086  # one mkdir and one rm for every task (the paths are tokens)
    mkdir -p $rsk_dirs || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot create task directories under $RUN_DIR"
    # shellcheck disable=SC2086
    rm -f $rsk_marks
    rsk_lines=''
    for i in $TODO; do
        eval "rsk_key=\$K_$i"
        rsk_lines="${rsk_lines}v=1 t=$NOW ev=intent rid=$RID plan=$PLAN_HASH task=$rsk_key idx=$((i - 1))
"
    done
    journal_append "$rsk_lines"
    SHAPE_N=0
    BATCH_ERR=''
    for_each_shape submit_shape
    emit_batch_accepted 0
    [ -z "$BATCH_ERR" ] || rsk_fail "$BATCH_RC" "$BATCH_CODE" "sbatch failed for part of the batch: $BATCH_ERR"
}
