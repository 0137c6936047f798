#!/bin/sh
# shellcheck disable=SC2016,SC2154  # job scripts are written with $ left for the job; eval sets task variables
# rsk submit: plan a request, or submit it when its plan still has the expected hash.
#
#   submit.sh plan                      < REQUEST   resolve, check policy, sbatch --test-only,
#                                                   print the canonical plan and @@plan HASH
#   submit.sh submit --rs-expect HASH   < REQUEST   recompute the plan; refuse unless it hashes
#                                                   to HASH; journal intent; sbatch; journal outcome
#
# REQUEST is "rsk-request 1", then "KEY BASE64" lines, then "end" (docs/protocol.md).
set -eu
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=policy.sh
. "$(dirname "$0")/policy.sh"
# shellcheck source=batch.sh
. "$(dirname "$0")/batch.sh"

usage() {
    rsk_fail "$RSK_E_USAGE" usage "usage: submit.sh plan | submit.sh submit --rs-expect HASH (request on stdin)"
}

# request -------------------------------------------------------------------
read_request() {
    IFS=' ' read -r rq_magic rq_version || rsk_fail "$RSK_E_USAGE" bad-request "empty request"
    [ "$rq_magic" = rsk-request ] || rsk_fail "$RSK_E_USAGE" bad-request "not an rsk request"
    [ "$rq_version" = 1 ] || rsk_fail "$RSK_E_USAGE" bad-protocol \
        "request protocol $rq_version is not supported by these scripts (protocol $RSK_PROTOCOL)"
    Q_project='' Q_request_id='' Q_name='' Q_workdir='' Q_partition='' Q_account='' Q_qos=''
    Q_nodes='' Q_cpus='' Q_mem_mb='' Q_gpus='' Q_time_min='' Q_env='' Q_arg='' Q_script=''
    NT=0 # batch tasks: T_key_I, T_arg_I, T_env_I and T_<resource>_I for I in 1..NT
    rq_end=0
    while IFS=' ' read -r rq_k rq_v; do
        case $rq_v in
            "="*) rsk_is_literal "${rq_v#=}" || rsk_fail "$RSK_E_USAGE" bad-encoding "literal value of $rq_k has unsafe characters" ;;
            *[!A-Za-z0-9+/=]*) rsk_fail "$RSK_E_USAGE" bad-encoding "value of $rq_k is not base64" ;;
        esac
        case $rq_k in
            end) rq_end=1; break ;;
            env) Q_env="$Q_env $rq_v" ;;
            arg) Q_arg="$Q_arg $rq_v" ;;
            project | request_id | name | workdir | partition | account | qos | nodes | cpus \
                | mem_mb | gpus | time_min | script)
                eval "Q_$rq_k=\$rq_v" ;; # rq_k is one of the fixed names matched above
            task)
                NT=$((NT + 1))
                [ "$NT" -le 10000 ] || rsk_fail "$RSK_E_USAGE" bad-request "a batch has at most 10000 tasks"
                eval "T_key_$NT=\$rq_v T_arg_$NT='' T_env_$NT='' T_nodes_$NT='' T_cpus_$NT='' T_mem_mb_$NT='' T_gpus_$NT='' T_time_min_$NT=''"
                ;;
            targ | tenv | tnodes | tcpus | tmem_mb | tgpus | ttime_min)
                [ "$NT" -gt 0 ] || rsk_fail "$RSK_E_USAGE" bad-request "$rq_k before any task line"
                rq_f=${rq_k#t}
                case $rq_k in
                    targ | tenv) eval "T_${rq_f}_$NT=\"\$T_${rq_f}_$NT \$rq_v\"" ;;
                    *) eval "T_${rq_f}_$NT=\$rq_v" ;;
                esac
                ;; # NT is a number and rq_f one of the fixed names matched above
            requester) ;;
            *) rsk_fail "$RSK_E_USAGE" bad-request "unknown request key '$rq_k'" ;;
        esac
    done
    [ "$rq_end" = 1 ] || rsk_fail "$RSK_E_USAGE" bad-request "request is truncated (no end line)"
}

decode_uint() { # decode_uint WHAT B64 DEFAULT: sets RSK_V to a whole number
    if [ -z "$2" ]; then RSK_V=$3; return 0; fi
    rsk_unb64 "$2"
    rsk_is_uint "$RSK_V" || rsk_fail "$RSK_E_USAGE" "bad-$1" "$1 must be a whole number"
    RSK_V=$((RSK_V + 0))
}

decode_name() { # decode_name WHAT B64: sets RSK_V to a partition/account/qos name or ""
    RSK_V=''
    [ -n "$2" ] || return 0
    rsk_unb64 "$2"
    case $RSK_V in *[!A-Za-z0-9._-]* | -*) rsk_fail "$RSK_E_USAGE" "bad-$1" "$1 '$RSK_V' is not a valid name" ;; esac
}

# resolution ----------------------------------------------------------------
cluster_facts() { # sets CLUSTER (ClusterName) and DEFAULT_PARTITION
    rsk_out=$(scontrol show config 2>&1) || {
        if rsk_slurm_down "$rsk_out"; then
            rsk_fail "$RSK_E_UNAVAILABLE" slurm-unavailable "the Slurm controller does not answer: $(printf '%s' "$rsk_out" | head -c 400)"
        fi
        rsk_fail "$RSK_E_UNAVAILABLE" slurm-unavailable "scontrol failed: $(printf '%s' "$rsk_out" | head -c 400)"
    }
    CLUSTER=$(printf '%s\n' "$rsk_out" | sed -n 's/^ClusterName *= *//p' | head -n 1)
    [ -n "$CLUSTER" ] || CLUSTER=unknown
    DEFAULT_PARTITION=$(sinfo -h -o '%P' 2>/dev/null | sed -n 's/\*$//p' | head -n 1)
}

resolve() {
    rsk_unb64 "$Q_project"; PROJECT=$RSK_V
    rsk_need_token project "$PROJECT"
    RID=''
    if [ -n "$Q_request_id" ]; then
        rsk_unb64 "$Q_request_id"; RID=$RSK_V
        rsk_need_token request-id "$RID"
    fi
    rsk_unb64 "$Q_name"; NAME=$RSK_V
    [ -n "$NAME" ] || NAME=job
    rsk_need_token name "$NAME"
    decode_name partition "$Q_partition"; PARTITION=$RSK_V
    [ -n "$PARTITION" ] || PARTITION=$DEFAULT_PARTITION
    [ -n "$PARTITION" ] || rsk_fail "$RSK_E_USAGE" no-partition "no partition given and the cluster has no default partition"
    decode_name account "$Q_account"; ACCOUNT=$RSK_V
    decode_name qos "$Q_qos"; QOS=$RSK_V
    decode_uint nodes "$Q_nodes" 1; NODES=$RSK_V
    decode_uint cpus "$Q_cpus" 1; CPUS=$RSK_V
    decode_uint mem "$Q_mem_mb" "$P_default_mem_mb"; MEM_MB=$RSK_V
    decode_uint gpus "$Q_gpus" 0; GPUS=$RSK_V
    decode_uint time "$Q_time_min" "$P_default_time_min"; TIME_MIN=$RSK_V
    if [ "$NODES" -lt 1 ] || [ "$CPUS" -lt 1 ] || [ "$MEM_MB" -lt 1 ] || [ "$TIME_MIN" -lt 1 ]; then
        rsk_fail "$RSK_E_USAGE" bad-resources "nodes, cpus, memory and time must be at least 1"
    fi
    rsk_unb64 "$Q_workdir"; WORKDIR=$RSK_V
    # shellcheck disable=SC2088  # a literal ~/ sent by the client, expanded here
    case $WORKDIR in
        '' | '~') WORKDIR=$HOME ;;
        '~/'*) WORKDIR=$HOME/${WORKDIR#'~/'} ;;
        /*) ;;
        *) rsk_fail "$RSK_E_USAGE" bad-workdir "the working directory must be absolute or start with ~/" ;;
    esac
    [ -d "$WORKDIR" ] || rsk_fail "$RSK_E_USAGE" workdir-missing "the working directory $WORKDIR does not exist on the cluster"
    if [ "$NT" -gt 0 ]; then
        KIND='batch'
        if [ -n "$Q_arg" ] || [ -n "$Q_script" ]; then
            rsk_fail "$RSK_E_USAGE" bad-request "a batch gives each task its own command"
        fi
        resolve_tasks
    elif [ -n "$Q_script" ]; then KIND=script; else KIND=argv; fi
    [ -n "$Q_arg" ] || [ -n "$Q_script" ] || [ "$NT" -gt 0 ] || rsk_fail "$RSK_E_USAGE" no-command "the request has no command"
    for rsk_e in $Q_env; do
        rsk_unb64 "$rsk_e"
        case ${RSK_V%%=*} in
            '' | [0-9]* | *[!A-Za-z0-9_]*) rsk_fail "$RSK_E_USAGE" bad-env "environment entries are NAME=VALUE with NAME of A-Z a-z 0-9 _" ;;
        esac
        case $RSK_V in *=*) ;; *) rsk_fail "$RSK_E_USAGE" bad-env "environment entries are NAME=VALUE" ;; esac
    done
}

# the canonical plan: "KEY BASE64" lines in a fixed order; its sha256 is the plan hash
plan_add() { PLAN="$PLAN$1 $2
"; }

plan_put() { rsk_enc "$2"; plan_add "$1" "$RSK_E"; } # plan_put KEY VALUE: encoded here

build_plan() {
    PLAN=''
    plan_put protocol "$RSK_PROTOCOL"
    plan_put cluster "$CLUSTER"
    plan_put user "$USER_NAME"
    plan_put scripts "$RSK_SCRIPTS_DIGEST"
    plan_put policy "$RSK_POLICY_DIGEST"
    plan_put project "$PROJECT"
    plan_put name "$NAME"
    plan_put kind "$KIND"
    plan_put workdir "$WORKDIR"
    plan_put partition "$PARTITION"
    plan_put account "$ACCOUNT"
    plan_put qos "$QOS"
    plan_put nodes "$NODES"
    plan_put cpus "$CPUS"
    plan_put mem_mb "$MEM_MB"
    plan_put gpus "$GPUS"
    plan_put time_min "$TIME_MIN"
    for rsk_e in $Q_env; do plan_add env "$rsk_e"; done
    for rsk_a in $Q_arg; do plan_add arg "$rsk_a"; done
    [ -z "$Q_script" ] || plan_add script "$Q_script"
    i=1
    while [ "$i" -le "$NT" ]; do
        eval "rsk_k=\$T_key_$i rsk_s=\$S_$i rsk_e=\$T_env_$i rsk_a=\$T_arg_$i"
        plan_add task "$rsk_k"
        rsk_old_ifs=$IFS
        IFS=' '
        # shellcheck disable=SC2086  # the shape splits into its five numbers
        set -- $rsk_s
        IFS=$rsk_old_ifs
        plan_put tres "$1,$2,$3,$4,$5"
        for rsk_x in $rsk_e; do plan_add tenv "$rsk_x"; done
        for rsk_x in $rsk_a; do plan_add targ "$rsk_x"; done
        i=$((i + 1))
    done
    PLAN_HASH=$(printf '%s' "$PLAN" | rsk_sha256)
}


# Runs sbatch with the plan's resources. $1: test-only | submit; remaining args appended.
run_sbatch() {
    rsk_mode=$1
    shift
    set -- --partition="$PARTITION" --nodes="$NODES" --ntasks-per-node=1 \
        --cpus-per-task="$CPUS" --mem="$MEM_MB" --time="$TIME_MIN" --chdir="$WORKDIR" "$@"
    [ -z "$ACCOUNT" ] || set -- --account="$ACCOUNT" "$@"
    [ -z "$QOS" ] || set -- --qos="$QOS" "$@"
    [ "$GPUS" -eq 0 ] || set -- --gres="gpu:$GPUS" "$@"
    if [ "$rsk_mode" = test-only ]; then
        SB_OUT=$(sbatch --test-only "$@" --wrap true 2>&1) && SB_RC=0 || SB_RC=$?
    else
        SB_OUT=$(sbatch --parsable "$@" 2>"$RUN_DIR/sbatch.err") && SB_RC=0 || SB_RC=$?
        SB_ERR=$(head -c 2000 "$RUN_DIR/sbatch.err" 2>/dev/null || true)
    fi
}

emit_plan() {
    printf '%s' "$PLAN" | while IFS=' ' read -r rsk_k rsk_v; do
        rsk_emit planline "$rsk_k" "$rsk_v"
    done
    rsk_emit plan "$PLAN_HASH"
}

# plan mode -------------------------------------------------------------------
policy_all() { # RSK_VERDICT and RSK_REASONS over the whole request (each task shape of a batch)
    if [ "$KIND" != batch ]; then
        rsk_policy_check "$PARTITION" "$ACCOUNT" "$NODES" "$CPUS" "$MEM_MB" "$GPUS" "$TIME_MIN"
        return 0
    fi
    ALL_REASONS=''
    for_each_shape policy_shape
    RSK_REASONS=$(printf '%s' "$ALL_REASONS" | awk '!seen[$0]++')
    if [ -z "$RSK_REASONS" ]; then RSK_VERDICT=allow; else RSK_VERDICT=refuse; RSK_REASONS="$RSK_REASONS
"; fi
}

policy_shape() {
    set_shape "$1"
    rsk_policy_check "$PARTITION" "$ACCOUNT" "$NODES" "$CPUS" "$MEM_MB" "$GPUS" "$TIME_MIN"
    ALL_REASONS="$ALL_REASONS$RSK_REASONS"
}

test_only() { # sbatch --test-only with the current resources; fails the plan if Slurm refuses
    run_sbatch test-only
    if [ "$SB_RC" -ne 0 ]; then
        if rsk_slurm_down "$SB_OUT"; then
            rsk_fail "$RSK_E_UNAVAILABLE" slurm-unavailable "$(printf '%s' "$SB_OUT" | head -c 1000)"
        fi
        rsk_fail "$RSK_E_SBATCH" slurm-rejected "$(printf '%s' "$SB_OUT" | head -c 1000)"
    fi
    if [ -z "${ESTIMATE:-}" ]; then
        rsk_start_at=$(printf '%s\n' "$SB_OUT" | sed -n 's/.* to start at \([0-9T:-]*\) using.*/\1/p' | head -n 1)
        rsk_nodes=$(printf '%s\n' "$SB_OUT" | sed -n 's/.* on nodes \([^ ]*\) in partition.*/\1/p' | head -n 1)
        ESTIMATE="start=${rsk_start_at:-unknown} nodes=$(rsk_b64 "$rsk_nodes")"
    fi
}

test_only_shape() { set_shape "$1"; test_only; }

do_plan() {
    emit_plan
    policy_all
    rsk_policy_emit
    rsk_emit active "count=$(count_active)" "cap=$P_max_active_jobs"
    [ "$RSK_VERDICT" = allow ] || rsk_fail "$RSK_E_POLICY" policy-refused "the cluster policy refuses this request"
    ESTIMATE=''
    if [ "$KIND" = batch ]; then for_each_shape test_only_shape; else test_only; fi
    # shellcheck disable=SC2086  # ESTIMATE holds two key=value words
    rsk_emit estimate $ESTIMATE
}

count_active() { # pending or running rsk jobs of this project (by job name)
    squeue -h -r -u "$USER_NAME" -t PD,R,CG,S,CF -o '%j' 2>/dev/null \
        | grep -c "^$(rsk_job_prefix "$PROJECT")" || true
}

# submit mode -------------------------------------------------------------------
# The wrapper decodes the command at run time, so no shell ever interprets user data,
# and records start and end markers so outcomes are known after Slurm forgets the job.
write_wrapper() {
    {
        printf '#!/bin/sh\n# rsk job wrapper (generated by submit.sh; protocol %s)\n' "$RSK_PROTOCOL"
        printf 'rsk_run=%s\n' "$(rsk_sq "$RUN_DIR")"
        printf 'rsk_limit=%s\n' "$((TIME_MIN * 60))"
        cat "$RSK_DIR/wrapper.sh"
        printf 'set --\n'
        for rsk_e in $Q_env; do printf "rsk_arg '%s'; export \"\$rsk_a\"\n" "$rsk_e"; done
        if [ "$KIND" = script ]; then
            printf "rsk_arg '%s'; printf '%%s' \"\$rsk_a\" >\"\$rsk_run/user.sbatch\"\n" "$Q_script"
            # the user's script runs with its own #! line (sh when it has none)
            printf 'chmod 0700 "$rsk_run/user.sbatch"; set -- "$rsk_run/user.sbatch"\n'
        fi
        for rsk_a in $Q_arg; do printf "rsk_arg '%s'; set -- \"\$@\" \"\$rsk_a\"\n" "$rsk_a"; done
        printf 'rsk_main "$@"\n'
    } >"$RUN_DIR/job.sh.tmp" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write the job script under $RUN_DIR"
    mv "$RUN_DIR/job.sh.tmp" "$RUN_DIR/job.sh" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write the job script under $RUN_DIR"
}


# Looks at the journal for RID: replays an accepted request, refuses a conflict, and
# resolves an intent that has no outcome from Slurm's evidence.
check_idempotency() {
    JF=$(rsk_journal_file "$PROJECT")
    [ -f "$JF" ] || return 0
    rsk_last=$(grep " rid=$RID " "$JF" | tail -n 1 || true)
    [ -n "$rsk_last" ] || return 0
    rsk_prev_plan=$(rsk_field "$rsk_last" plan)
    case $(rsk_field "$rsk_last" ev) in
        accepted | reconciled)
            if [ "$rsk_prev_plan" != "$PLAN_HASH" ]; then
                rsk_fail "$RSK_E_MISMATCH" request-conflict \
                    "request id $RID was already used for another plan ($rsk_prev_plan)"
            fi
            rsk_emit accepted "job=$(rsk_field "$rsk_last" job)" "rid=$RID" "plan=$PLAN_HASH" replay=1
            exit 0
            ;;
        intent)
            rsk_job=$(rsk_find_job "$PROJECT" "$RID" "$RUN_DIR")
            if [ -n "$rsk_job" ]; then
                rsk_journal "$PROJECT" reconciled "$RID" "$rsk_prev_plan" "job=$rsk_job"
                if [ "$rsk_prev_plan" != "$PLAN_HASH" ]; then
                    rsk_fail "$RSK_E_MISMATCH" request-conflict \
                        "request id $RID was already used for another plan ($rsk_prev_plan)"
                fi
                rsk_emit accepted "job=$rsk_job" "rid=$RID" "plan=$PLAN_HASH" replay=1 reconciled=1
                exit 0
            fi
            # the lock is ours, so the process that wrote the intent is gone and no job exists
            rsk_journal "$PROJECT" abandoned "$RID" "$rsk_prev_plan" code=no-evidence
            ;;
    esac
}

do_submit() {
    [ "$PLAN_HASH" = "$EXPECT" ] || {
        rsk_emit mismatch "expected=$EXPECT" "actual=$PLAN_HASH"
        rsk_fail "$RSK_E_MISMATCH" plan-mismatch "the plan changed: expected $EXPECT, the cluster computes $PLAN_HASH"
    }
    [ -n "$RID" ] || rsk_fail "$RSK_E_USAGE" no-request-id "submit needs a request id"
    policy_all
    [ "$RSK_VERDICT" = allow ] || { rsk_policy_emit; rsk_fail "$RSK_E_POLICY" policy-refused "the cluster policy refuses this request"; }
    rsk_need_writable "$RSK_ROOT/journal" "$RSK_ROOT/runs/$PROJECT"
    rsk_lock "$RSK_ROOT/journal/$PROJECT.lock"
    RUN_DIR=$RSK_ROOT/runs/$PROJECT/$RID
    if [ "$KIND" = batch ]; then
        submit_batch
        return 0
    fi
    check_idempotency
    rsk_active=$(count_active)
    if [ -n "$P_max_active_jobs" ] && [ "$rsk_active" -ge "$P_max_active_jobs" ]; then
        rsk_journal "$PROJECT" refused "$RID" "$PLAN_HASH" code=active-cap
        rsk_fail "$RSK_E_CAP" active-cap "project $PROJECT has $rsk_active active rsk jobs; the cap is $P_max_active_jobs"
    fi
    mkdir -p "$RUN_DIR" 2>/dev/null || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot create $RUN_DIR"
    rm -f "$RUN_DIR/started" "$RUN_DIR/ended"
    write_wrapper
    rsk_journal "$PROJECT" intent "$RID" "$PLAN_HASH"
    run_sbatch submit --job-name="$(rsk_job_prefix "$PROJECT")$RID" \
        --output="$RUN_DIR/stdout" --error="$RUN_DIR/stderr" "$RUN_DIR/job.sh"
    rsk_job=$(printf '%s' "$SB_OUT" | head -n 1 | cut -d';' -f1)
    if [ "$SB_RC" -eq 0 ] && rsk_is_uint "$rsk_job"; then
        rsk_journal "$PROJECT" accepted "$RID" "$PLAN_HASH" "job=$rsk_job" "res=$NODES,$CPUS,$MEM_MB,$GPUS,$TIME_MIN"
        rsk_emit accepted "job=$rsk_job" "rid=$RID" "plan=$PLAN_HASH" replay=0
        return 0
    fi
    if rsk_slurm_down "$SB_ERR"; then rsk_code=slurm-unavailable rsk_rc=$RSK_E_UNAVAILABLE
    else rsk_code=sbatch-failed rsk_rc=$RSK_E_SBATCH; fi
    rsk_journal "$PROJECT" failed "$RID" "$PLAN_HASH" "rc=$SB_RC" "code=$rsk_code" "msg=$(rsk_b64 "$SB_ERR")"
    rsk_fail "$rsk_rc" "$rsk_code" "sbatch failed (rc=$SB_RC): $SB_ERR"
}

main() {
    rsk_start
    MODE=${1:-}
    EXPECT=''
    case $MODE in
        plan) [ $# -eq 1 ] || usage ;;
        submit)
            if [ $# -ne 3 ] || [ "$2" != --rs-expect ]; then usage; fi
            EXPECT=$3
            ;;
        *) usage ;;
    esac
    USER_NAME=$(id -un)
    read_request
    rsk_policy_load
    cluster_facts
    resolve
    build_plan
    if [ "$MODE" = plan ]; then do_plan; else do_submit; fi
}

main "$@"
