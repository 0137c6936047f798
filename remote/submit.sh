# shellcheck shell=sh
# rsk submit: plan a request ("submit plan"), or plan it, wait for rsk's word and submit that very plan ("submit
# launch"); the request, the answers and the steps after the go: docs/protocol.md, "Requests (submit)".

# request: the scalar keys as " key=VALUE " words in Q (wire values hold no spaces), the env values in Q_env; the
# lines themselves in REQ (the arg, script and task lines are read there, by resolve_tasks)
SCALARS=' project request_id name workdir path hostkey code partition account qos nodes cpus mem_mb gpus time_min max_running script lease lease_open drain_min overrun budget_min signal_s chain_of link0 attempt_of '

read_request() {
    # ahead of the request, each at most once and in this order: "facts" (a broker's copy of the cluster's facts, or
    # "-": print them), "held" (the ledger's jobs: rsk_held) and "since" (its oldest unknown outcome: rsk_since)
    FACTS_GIVEN='' FACTS_WANTED='' rq_order='facts held since'
    while IFS=' ' read -r rq_magic rq_version rq_x || rsk_fail "$RSK_E_USAGE" bad-request "empty request"; do
        case " $rq_order " in *" $rq_magic "*) rq_order=${rq_order#*"$rq_magic"} ;; *) break ;; esac
        if [ "$rq_magic" != facts ]; then "rsk_$rq_magic" "$rq_version${rq_x:+ $rq_x}" # (one word: checked there)
        elif [ "$rq_version" = - ]; then FACTS_WANTED=1; else facts_given "$rq_version" "${rq_x% *}" "${rq_x##* }"; fi
    done
    [ "$rq_magic" = rsk-request ] || rsk_fail "$RSK_E_USAGE" bad-request "not an rsk request"
    [ "$rq_version" = "$RSK_PROTOCOL" ] || rsk_fail "$RSK_E_USAGE" bad-protocol \
        "request protocol $rq_version is not the protocol of this program ($RSK_PROTOCOL)"
    rsk_is_uint "$rq_x" || rsk_fail "$RSK_E_USAGE" bad-request "the request line gives no length: rsk-request $RSK_PROTOCOL BYTES"
    rsk_take "$rq_x"; REQ=$RSK_TAKEN # read to the byte as the loader read the program, so nothing after it is eaten
    # one pass checks every line: "ENV|KIND| Q" (KIND: batch with task lines, else script or argv, else ""), or "!CODE MSG"
    rq=$(printf '%s' "$REQ" | awk -v scalars="$SCALARS" '
        function no(code, msg) { print "!" code " " msg; bad = 1; exit }
        NF != 2 { no("bad-request", "request line '\''" $1 "'\'' is not KEY VALUE") }
        $2 ~ /^=/ ? substr($2, 2) ~ /[^A-Za-z0-9._\/:@+,-]/ : $2 ~ /[^A-Za-z0-9+\/=]/ { no("bad-encoding", "the value of " $1 " is neither a literal nor base64") }
        $1 == "env" { e = e " " $2; next }
        $1 == "arg" { a = "a"; next }
        $1 ~ /^t(ask|arg|env|nodes|cpus|mem_mb|gpus|time_min|needs)$/ { t = "t"; next }
        !index(scalars, " " $1 " ") { no("bad-request", "unknown request key '\''" $1 "'\''") }
        $1 in q { no("bad-request", "request key '\''" $1 "'\'' given twice") }
        { q[$1] = 1; s = s $1 "=" $2 " " }
        END { if (bad) exit; if (t && (a || ("script" in q))) no("bad-request", "a batch gives each task its own command")
              print e "|" (t ? "batch" : ("script" in q) ? "script" : a ? "argv" : "") "| " s }')
    case $rq in "!"*) rq=${rq#!}; rsk_fail "$RSK_E_USAGE" "${rq%% *}" "${rq#* }" ;; esac
    Q_env=${rq%%|*} rq=${rq#*|} # (the longer part last: dash cuts a string's front in time quadratic in its length)
    KIND=${rq%%|*} Q=${rq#*|}
}

q() { # q KEY: sets RSK_W to the wire value of a scalar key ("" when not given)
    case $Q in *" $1="*) RSK_W=${Q#*" $1="}; RSK_W=${RSK_W%% *} ;; *) RSK_W='' ;; esac
}

qdec() { q "$1"; rsk_dec "$RSK_W"; } # qdec KEY: sets RSK_V to the decoded value

num() { # num WHAT KEY DEFAULT: sets RSK_V to a whole number, read as decimal
    q "$2"
    if [ -z "$RSK_W" ]; then RSK_V=$3; return 0; fi
    case $RSK_W in "="*) ;; *) rsk_fail "$RSK_E_USAGE" "bad-$1" "$1 must be a whole number" ;; esac
    rsk_is_uint "${RSK_W#=}" || rsk_fail "$RSK_E_USAGE" "bad-$1" "$1 must be a whole number"
    rsk_decimal "${RSK_W#=}"
}

slurm_name() { # slurm_name KEY: sets RSK_V to a partition/account/qos name or ""
    qdec "$1"
    case $RSK_V in *[!A-Za-z0-9._-]* | -*) rsk_fail "$RSK_E_USAGE" "bad-$1" "$1 '$RSK_V' is not a valid name" ;; esac
}

# the environment names a plan may not set: rsk's, Slurm's, PATH (the plan's), those that choose which GPUs a job
# sees (Slurm sets them). Read by env_name_ok and rsk_export; rsk.request.inputs holds the list word for word.
RESERVED_ENV='SLURM_* SLURMD_* SBATCH_* SALLOC_* SRUN_* RSK_* rsk_* PATH *VISIBLE_DEVICES CUDA_DEVICE_ORDER GPU_DEVICE_ORDINAL ZE_AFFINITY_MASK ZE_ENABLE_PCI_ID_DEVICE_ORDER ZE_FLAT_DEVICE_HIERARCHY ONEAPI_DEVICE_SELECTOR SYCL_DEVICE_FILTER SYCL_DEVICE_ALLOWLIST'

env_name_ok() { # env_name_ok NAME=VALUE: refuses malformed names and those of RESERVED_ENV
    case ${1%%=*} in
        '' | [0-9]* | *[!A-Za-z0-9_]*) rsk_fail "$RSK_E_USAGE" bad-env "environment entries are NAME=VALUE with NAME of A-Z a-z 0-9 _" ;;
    esac
    set -f
    for rsk_p in $RESERVED_ENV; do
        # shellcheck disable=SC2254  # the words of RESERVED_ENV are patterns
        case ${1%%=*} in $rsk_p) set +f; rsk_fail "$RSK_E_USAGE" bad-env "environment name ${1%%=*} belongs to rsk or Slurm (PATH: use the plan's path; GPUs: ask for them)" ;; esac
    done
    set +f
    case $1 in *=*) ;; *) rsk_fail "$RSK_E_USAGE" bad-env "environment entries are NAME=VALUE" ;; esac
}

# resolution ----------------------------------------------------------------
# The cluster's facts, kept by a broker for a minute ("facts CLUSTER PARTS ARRAYS" or "facts -": docs/protocol.md, ADR
# 0038); the plan binds the lines it used, and Slurm is still asked at every plan (sbatch --test-only) and every submit.
cluster_facts() { # sets CLUSTER (ClusterName), PARTS, DEFAULT_PARTITION and BLOCK (a job array's tasks: docs/adr/0058)
    if [ -z "$FACTS_GIVEN" ]; then
        rsk_out=$(scontrol show config 2>&1) || {
            rsk_fail "$RSK_E_UNAVAILABLE" slurm-unavailable "the Slurm controller does not answer: $(printf '%s' "$rsk_out" | cut -c1-400 | head -n 3)"
        }
        CLUSTER=$(rsk_conf "$rsk_out" ClusterName) ARRAY_MAX=$(rsk_conf "$rsk_out" MaxArraySize)
        [ -n "$CLUSTER" ] || CLUSTER=unknown
        rsk_is_uint "$ARRAY_MAX" || ARRAY_MAX=1001 # (Slurm's default)
        # the partitions and their nodes in one read, "PARTITION|TIMELIMIT|CPUS|MEMORY|GRES|NODES" a line for
        # each group of alike nodes (-e: only nodes whose resources are the same share a line), kept for fits
        PARTS=$(sinfo -h -e -o '%P|%l|%c|%m|%G|%D' 2>/dev/null || true)
        if [ -n "$FACTS_WANTED" ] && [ -n "$PARTS" ]; then # (sinfo's silence is never kept)
            rsk_enc "$CLUSTER"
            rsk_emit facts "cluster=$RSK_E" "parts=$(rsk_b64 "$PARTS")" "arrays=$ARRAY_MAX"
        fi
    fi
    BLOCK=$(awk -v m="$ARRAY_MAX" 'BEGIN { print 10 ^ (length(m + 0) - 1) }') # the largest power of ten <= MaxArraySize
    DEFAULT_PARTITION=$(printf '%s\n' "$PARTS" | awk -F'|' '$1 ~ /\*$/ { print substr($1, 1, length($1) - 1); exit }') # sinfo's "*"
}

facts_given() { # facts_given CLUSTER PARTS ARRAYS: the facts a broker kept (wire values; MaxArraySize), checked for their shape
    rsk_dec "$1"; CLUSTER=$RSK_V
    rsk_dec "$2"; PARTS=$RSK_V ARRAY_MAX=$3
    case $CLUSTER in '' | *[!A-Za-z0-9._-]*) rsk_fail "$RSK_E_USAGE" bad-facts "the cluster's name in the facts is malformed" ;; esac
    rsk_is_uint "$ARRAY_MAX" || rsk_fail "$RSK_E_USAGE" bad-facts "the facts give no MaxArraySize"
    [ -n "$PARTS" ] || rsk_fail "$RSK_E_USAGE" bad-facts "the facts name no partition"
    printf '%s\n' "$PARTS" | awk -F'|' 'NF != 6 { exit 1 }' \
        || rsk_fail "$RSK_E_USAGE" bad-facts "a partition line of the facts is malformed"
    FACTS_GIVEN=1
}

# partition_facts: FACTS_USED, the lines of PARTS for PARTITION as the plan binds them (fields joined by ",",
# lines by "/", so that they travel as a literal where they can); fits reads the same lines
partition_facts() {
    FACTS_USED=$(printf '%s\n' "$PARTS" | awk -F'|' -v OFS=, -v p="$PARTITION" \
        '$1 == p || $1 == p "*" { $1 = p; out = out (out == "" ? "" : "/") $0 } END { print out }')
}

resolve() {
    qdec project; PROJECT=$RSK_V
    rsk_need_token project "$PROJECT"
    qdec request_id; RID=$RSK_V
    [ -z "$RID" ] || rsk_need_token request-id "$RID"
    qdec name; NAME=${RSK_V:-job}
    rsk_need_token name "$NAME"
    slurm_name partition; PARTITION=${RSK_V:-$DEFAULT_PARTITION}
    [ -n "$PARTITION" ] || rsk_fail "$RSK_E_USAGE" no-partition "no partition given and the cluster has no default partition"
    slurm_name account; ACCOUNT=$RSK_V
    slurm_name qos; QOS=$RSK_V
    num nodes nodes 1; NODES=$RSK_V
    num cpus cpus 1; CPUS=$RSK_V
    num mem mem_mb "$P_default_mem_mb"; MEM_MB=$RSK_V
    num gpus gpus 0; GPUS=$RSK_V
    num time time_min "$P_default_time_min"; TIME_MIN=$RSK_V
    num budget budget_min ''; BUDGET_MIN=$RSK_V
    num signal signal_s ''; SIGNAL_S=$RSK_V
    [ -z "$BUDGET_MIN$SIGNAL_S" ] || { [ -n "$BUDGET_MIN" ] && [ -n "$SIGNAL_S" ]; } \
        || rsk_fail "$RSK_E_USAGE" bad-chain "a chain gives both its budget and its signal margin"
    qdec chain_of; CHAIN_OF=$RSK_V
    num link0 link0 0; LINK0=$RSK_V
    qdec attempt_of; ATTEMPT_OF=$RSK_V
    if [ -n "$ATTEMPT_OF" ]; then # `rsk retry`: an attempt B.aN runs again in B's work directory
        rsk_need_token attempt-of "$ATTEMPT_OF"
        case $RID in "$ATTEMPT_OF".a[1-9]*) ;; *) rsk_fail "$RSK_E_USAGE" bad-attempt "an attempt of $ATTEMPT_OF is named $ATTEMPT_OF.aN" ;; esac
    fi
    if [ -n "$CHAIN_OF" ]; then # an extension: its links go on from the chain's, in the chain's work directory
        rsk_need_token chain-of "$CHAIN_OF"
        [ -n "$BUDGET_MIN" ] || rsk_fail "$RSK_E_USAGE" bad-chain "only a chain extends a chain"
    fi
    if [ "$NODES" -lt 1 ] || [ "$CPUS" -lt 1 ] || [ "$MEM_MB" -lt 1 ] || [ "$TIME_MIN" -lt 1 ]; then
        rsk_fail "$RSK_E_USAGE" bad-resources "nodes, cpus, memory and time must be at least 1"
    fi
    qdec path; JOBPATH=${RSK_V:-/usr/local/bin:/usr/bin:/bin}
    qdec hostkey; HOSTKEY=$RSK_V
    qdec code; CODE=$RSK_V CODE_DIR=''
    qdec workdir; WORKDIR=$RSK_V
    if [ -n "$CODE" ]; then
        case $CODE in *[!0-9a-f]*) rsk_fail "$RSK_E_USAGE" bad-code "the code digest is hex" ;; esac
        [ -z "$WORKDIR" ] || rsk_fail "$RSK_E_USAGE" bad-code "a job with --code runs in a copy of the snapshot: no --workdir"
        CODE_DIR=$RSK_ROOT/code/$PROJECT/snap/$CODE
        RSK_H=''
        [ ! -f "$CODE_DIR/.rsk-manifest" ] || rsk_hash_file "$CODE_DIR/.rsk-manifest"
        [ "$RSK_H" = "$CODE" ] || rsk_fail "$RSK_E_USAGE" code-missing "the code snapshot $CODE is not on the cluster (or was changed)"
        WORKDIR=$CODE_DIR
    fi
    # shellcheck disable=SC2088  # a literal ~/ sent by the client, expanded here
    case $WORKDIR in
        '' | '~') WORKDIR=$HOME ;;
        '~/'*) WORKDIR=$HOME/${WORKDIR#'~/'} ;;
        /*) ;;
        *) rsk_fail "$RSK_E_USAGE" bad-workdir "the working directory must be absolute or start with ~/" ;;
    esac
    # the plan binds the directory the job will really run in: symlinks resolved now
    rsk_wd=$WORKDIR
    WORKDIR=$(cd "$WORKDIR" 2>/dev/null && pwd -P) \
        || rsk_fail "$RSK_E_USAGE" workdir-missing "the working directory $rsk_wd does not exist on the cluster"
    for rsk_e in $Q_env; do rsk_dec "$rsk_e"; env_name_ok "$RSK_V"; done
    place
    [ "$PLACE" != open ] || KIND=lease
    [ -n "$KIND" ] || rsk_fail "$RSK_E_USAGE" no-command "the request has no command"
    [ -z "$BUDGET_MIN" ] || [ "$KIND" = batch ] || rsk_fail "$RSK_E_USAGE" bad-chain "a chain's links are its tasks"
    num max-running max_running ''; MAX_RUNNING=$RSK_V # Slurm's throttle on the batch's arrays, in all (docs/adr/0059)
    [ -z "$MAX_RUNNING" ] || { [ "$KIND" = batch ] && [ "$PLACE" = slurm ] && [ "$MAX_RUNNING" -ge 1 ]; } \
        || rsk_fail "$RSK_E_USAGE" bad-max-running "max running is at least 1, and a batch's of jobs of their own"
    resolve_tasks
    CAPPED=0 # the jobs of their own it queues that can run at once, which the active cap counts (a lease's steps: none)
    [ "$PLACE" = step ] || { CAPPED=$(arrays '*'); CAPPED=${CAPPED##*"
"}; }
    # a lease starts each step as soon as it fits: it would run a workflow's or a chain's tasks ignoring their needs
    [ -z "$DAG" ] || [ "$PLACE" != step ] || rsk_fail "$RSK_E_USAGE" bad-request \
        "a lease's steps start as they fit, not after one another: run a workflow or a chain without --lease"
}

# resolve_tasks: every task's shape and plan lines, in one awk pass over the request's lines (a job of its own is
# task 0: its command the request's script, then its arguments). Sets NT, DAG (1 for a workflow or a chain), SHAPES
# (the distinct "NODES CPUS MEM GPUS TIME", a line each) and TASKOUT: "P <plan line>" (the env, arg and script lines,
# then the tasks'), "S IDX NODES CPUS MEM GPUS TIME", "W IDX <job-script case line>" and "D IDX LEVEL NEEDS" lines
# (NEEDS: "IDX:ok|any,..." or "-"). A need names an earlier task: no cycle.
resolve_tasks() {
    DAG=''
    TASKOUT=$(printf '%s' "$REQ" | awk -v dn="$NODES" -v dc="$CPUS" -v dm="$MEM_MB" -v dg="$GPUS" -v dt="$TIME_MIN" \
        -v budget="$BUDGET_MIN" '
        function err(code, msg) { print "!" code " " msg; failed = 1; exit }
        function head() { if (!h++) printf "%s%s%s", pe, pa, ps } # the plan lines of the request: its env, arg, script
        function num(v, what, def) {
            if (v == "") return def
            if (v !~ /^=[0-9]+$/ || length(v) > 10) err("bad-" what, "task " key ": " what " must be a whole number")
            return substr(v, 2) + 0
        }
        function flush(    i) {
            if (n == 0) return
            if (args == "") err("no-command", "task " key " has no command")
            nn = num(r["tnodes"], "nodes", dn); cc = num(r["tcpus"], "cpus", dc); mm = num(r["tmem_mb"], "mem", dm)
            gg = num(r["tgpus"], "gpus", dg); tt = num(r["ttime_min"], "time", dt)
            if (nn < 1 || cc < 1 || mm < 1 || tt < 1) err("bad-resources", "task " key ": resources must be at least 1")
            dl = ""; lv = 0; v = r["tneeds"]
            if (v != "" && v !~ /^=[A-Za-z0-9_][A-Za-z0-9._-]*:(ok|any|notok)(,[A-Za-z0-9_][A-Za-z0-9._-]*:(ok|any|notok))*$/)
                err("bad-needs", "task " key ": needs are KEY:ok, KEY:any or KEY:notok, comma separated")
            k = split(substr(v, 2), nd, ",")
            for (i = 1; i <= k; i++) {
                w = nd[i]; sub(/:[a-z]+$/, "", w)
                if (!(w in at)) err("bad-needs", "task " key " needs " w ", which is not an earlier task")
                if (lvl[w] >= lv) lv = lvl[w] + 1
                dl = dl (dl == "" ? "" : ",") at[w] substr(nd[i], length(w) + 1)
            }
            # a chain: the same command in every link, each after every earlier link stopped, within the budget
            if (budget != "") {
                if (n == 1) { cmd = envs args; shp = nn " " cc " " mm " " gg; want = "" }
                else if (envs args != cmd || nn " " cc " " mm " " gg != shp) err("bad-chain", "the links of a chain run one command on one shape")
                if (dl != want) err("bad-chain", "link " key " must need every earlier link to have stopped")
                want = want (want == "" ? "" : ",") (n - 1) ":notok"; spent += tt
                if (spent > budget + 0) err("bad-chain", "the links of a chain run longer than its budget")
            }
            at[key] = n - 1; lvl[key] = lv
            print "P task =" key
            print "P tres =" nn "," cc "," mm "," gg "," tt
            if (v != "") print "P tneeds " v
            printf "%s", envs
            printf "%s", args
            print "S " n - 1 " " nn " " cc " " mm " " gg " " tt
            print "W " n - 1 " " n - 1 ")" wrap " ;;"
            print "D " n - 1 " " lv " " (dl == "" ? "-" : dl)
        }
        $1 == "env" { pe = pe "P env " $2 "\n"; next }
        $1 == "arg" { pa = pa "P arg " $2 "\n"; wa = wa " rsk_arg '\''" $2 "'\''; set -- \"$@\" \"$rsk_a\";"; next }
        $1 == "script" { ps = "P script " $2 "\n"; ws = " rsk_arg '\''" $2 "'\''; rsk_script \"$rsk_a\"; set -- \"$rsk_run/user.sbatch\";"; next }
        $1 !~ /^t(ask|arg|env|nodes|cpus|mem_mb|gpus|time_min|needs)$/ { next }
        $1 == "task" {
            head(); flush()
            if (++n > 10000) err("bad-request", "a batch has at most 10000 tasks")
            key = substr($2, 2)
            if ($2 !~ /^=/ || key !~ /^[A-Za-z0-9_][A-Za-z0-9._-]*$/ || length(key) > 64)
                err("bad-task-key", "task keys are 1-64 characters of A-Z a-z 0-9 . _ - and do not start with . or -")
            if (key in seen) err("bad-task-key", "task key " key " appears twice")
            seen[key] = 1; envs = ""; args = ""; wrap = ""; split("", r)
            next
        }
        n == 0 { err("bad-request", $1 " before any task line") }
        $1 == "tenv" { envs = envs "P tenv " $2 "\n"; wrap = wrap " rsk_arg '\''" $2 "'\''; rsk_export;"; next }
        $1 == "targ" { args = args "P targ " $2 "\n"; wrap = wrap " rsk_arg '\''" $2 "'\''; set -- \"$@\" \"$rsk_a\";"; next }
        { if ($1 in r) err("bad-request", "task " key ": " $1 " given twice"); r[$1] = $2 }
        END { if (failed) exit; if (n) flush(); else { head(); print "S 0 " dn " " dc " " dm " " dg " " dt; print "W 0 0)" ws wa " ;;" } }')
    case $TASKOUT in "!"* | *"
!"*) rsk_e=${TASKOUT##*"
"} && rsk_e=${rsk_e#!} && rsk_fail "$RSK_E_USAGE" "${rsk_e%% *}" "${rsk_e#* }" ;; esac # a fault: the last line
    NT=$(printf '%s\n' "$TASKOUT" | grep -c '^S ')
    SHAPES=$(printf '%s\n' "$TASKOUT" | sed -n 's/^S [0-9]* //p' | sort -u)
    case $TASKOUT in *"
P tneeds "*) DAG=1 ;; esac
}

# placement ------------------------------------------------------------------
# place: where the request's jobs run, decided here only (docs/leases.md, ADR 0043). PLACE is slurm (jobs of their
# own), open (the job of the lease LEASE it opens, which runs its controller) or step (queued into the lease LEASE,
# bound to its job LEASE_JOB, the lease file's facts as L_*)
place() {
    qdec lease; LEASE=$RSK_V PLACE=step
    qdec lease_open
    if [ -n "$RSK_V" ]; then
        if [ -n "$LEASE$KIND$CODE" ]; then
            rsk_fail "$RSK_E_USAGE" bad-request "a lease runs rsk's controller: no command, script, tasks, code or lease of its own"
        fi
        LEASE=$RSK_V PLACE=open
    fi
    [ -n "$LEASE" ] || PLACE=slurm
    num drain drain_min 5; DRAIN_MIN=$RSK_V
    qdec overrun; OVERRUN=${RSK_V:-refuse}
    LEASE_JOB='' LDIR=''
    if [ "$PLACE" != open ]; then
        q drain_min; rsk_d=$RSK_W
        q overrun
        [ -z "$rsk_d$RSK_W" ] || rsk_fail "$RSK_E_USAGE" bad-request "drain and overrun are settings of a lease being opened"
    fi
    [ -n "$LEASE" ] || return 0
    rsk_need_token lease "$LEASE"
    if [ "$PLACE" = open ]; then
        LDIR=$RSK_ROOT/leases/$PROJECT/$LEASE
        [ "$DRAIN_MIN" -lt "$TIME_MIN" ] || rsk_fail "$RSK_E_USAGE" bad-lease \
            "a lease of $TIME_MIN min that starts no step in its last $DRAIN_MIN min could run no step: give --time longer than --drain (or --drain 0)"
        # only the submit-lease program carries the controller (a plain launch does not ship it)
        [ -n "${RSK_CONTROLLER:-}" ] || rsk_fail "$RSK_E_USAGE" bad-request "opening a lease takes the submit-lease program"
        case $OVERRUN in refuse | clip) ;; *) rsk_fail "$RSK_E_USAGE" bad-overrun "overrun is refuse or clip" ;; esac
        return 0
    fi
    rsk_lease "$PROJECT" "$LEASE"
    [ -n "$L" ] || rsk_fail "$RSK_E_USAGE" no-lease "project $PROJECT has no lease $LEASE on this cluster (rsk lease open $LEASE)"
    LEASE_JOB=$L_job
    rsk_get "$L" partition; L_partition=$RSK_F; rsk_get "$L" account; L_account=$RSK_F; rsk_get "$L" qos; L_qos=$RSK_F
    rsk_get "$L" nodes; L_nodes=$RSK_F; rsk_get "$L" cpus; L_cpus=$RSK_F; rsk_get "$L" mem; L_mem=$RSK_F
    rsk_get "$L" gpus; L_gpus=$RSK_F; rsk_get "$L" time; L_time=$RSK_F; rsk_get "$L" overrun; L_overrun=$RSK_F
    for rsk_v in "$LEASE_JOB" "$L_nodes" "$L_cpus" "$L_mem" "$L_gpus" "$L_time"; do
        rsk_is_uint "$rsk_v" || rsk_fail "$RSK_E_USAGE" bad-lease "the lease file of $LEASE is damaged (rsk lease open $LEASE again)"
    done
    case $L_partition$L_account$L_qos in *[!A-Za-z0-9._-]*) rsk_fail "$RSK_E_USAGE" bad-lease "the lease file of $LEASE is damaged" ;; esac
    case $L_overrun in refuse | clip) ;; *) rsk_fail "$RSK_E_USAGE" bad-lease "the lease file of $LEASE is damaged" ;; esac
    for rsk_k in partition account qos; do
        q "$rsk_k"
        [ -z "$RSK_W" ] || rsk_fail "$RSK_E_USAGE" bad-request "a step runs in its lease's allocation: no $rsk_k of its own"
    done
    PARTITION=$L_partition ACCOUNT=$L_account QOS=$L_qos
    q mem_mb; [ -n "$RSK_W" ] || [ "$MEM_MB" -le "$L_mem" ] || MEM_MB=$L_mem
    # a step without --time runs until its lease ends, however much of it is left (not refused below)
    q time_min; STEP_TIME=$RSK_W; [ -n "$RSK_W" ] || [ "$TIME_MIN" -le "$L_time" ] || TIME_MIN=$L_time
}

# outlives: a step that can never fit its lease is refused (fits); with overrun refuse, so is one whose --time
# would outlive a lease that has started (its controller's ctl file says when it ends)
outlives() {
    fits
    rsk_get "$L_ctl" end
    if [ "$L_overrun" = refuse ] && [ -n "$STEP_TIME" ] && rsk_is_uint "$RSK_F"; then
        rsk_left=$((RSK_F - $(awk 'BEGIN { srand(); print srand() }')))
        [ $((TIME_MIN * 60)) -le "$rsk_left" ] || rsk_fail "$RSK_E_SBATCH" outlives-lease \
            "this step's $TIME_MIN min would outlive lease $LEASE ($((rsk_left / 60)) min left); ask for less --time"
    fi
}

# check_lease: the lease holds (or waits for) its allocation and carries its identity, as Slurm says now
# (rsk_lease): a step's is still the job its plan bound, and can hold the step; a lease name is one live lease
check_lease() {
    [ "$PLACE" != slurm ] || return 0
    rsk_lease "$PROJECT" "$LEASE"
    if [ "$PLACE" = open ]; then
        [ "$L_rid" = "$RID" ] || [ -z "$L_sq" ] || rsk_fail "$RSK_E_USAGE" lease-exists \
            "project $PROJECT already holds a live lease $LEASE (job $L_job); close it or use another name"
        # its own request again after Slurm ended its job: never a replay of a lease that takes no steps
        [ "$L_rid" != "$RID" ] || [ -n "$L_sq" ] || [ -z "$L_job" ] || rsk_fail "$RSK_E_USAGE" lease-ended \
            "lease $LEASE of request $RID (job $L_job) has ended; open it again with a new request id (or none)"
        return 0
    fi
    [ -n "$L_sq" ] || L_job=''
    [ "$L_job" = "$LEASE_JOB" ] || rsk_fail "$RSK_E_USAGE" lease-ended \
        "lease $LEASE (job $LEASE_JOB) has ended; open it again (its queued steps carry over) or launch without --lease"
    for_shapes outlives
}

# the canonical plan: "KEY VALUE" lines in a fixed order; its sha256 is the plan hash
plan_put() { # plan_put KEY VALUE [KEY VALUE ...]: each value encoded here
    while [ $# -gt 1 ]; do
        rsk_enc "$2"
        PLAN="$PLAN$1 $RSK_E
"
        shift 2
    done
}

build_plan() {
    PLAN=''
    plan_put protocol "$RSK_PROTOCOL" cluster "$CLUSTER" user "$USER_NAME" root "$ROOT_REAL" hostkey "$HOSTKEY" \
        scripts "$RSK_SCRIPTS" policy "$RSK_POLICY_DIGEST" project "$PROJECT" name "$NAME" kind "$KIND" \
        workdir "$WORKDIR" code "$CODE" path "$JOBPATH" partition "$PARTITION" facts "$FACTS_USED" account "$ACCOUNT" qos "$QOS" \
        nodes "$NODES" cpus "$CPUS" mem_mb "$MEM_MB" gpus "$GPUS" time_min "$TIME_MIN"
    [ -z "$MAX_RUNNING" ] || plan_put max_running "$MAX_RUNNING"
    [ -z "$BUDGET_MIN" ] || plan_put budget_min "$BUDGET_MIN" signal_s "$SIGNAL_S"
    [ -z "$CHAIN_OF" ] || plan_put chain_of "$CHAIN_OF" link0 "$LINK0"
    [ -z "$ATTEMPT_OF" ] || plan_put attempt_of "$ATTEMPT_OF"
    case $PLACE in
        open) plan_put lease_open "$LEASE" drain_min "$DRAIN_MIN" overrun "$OVERRUN" ;;
        step) plan_put lease "$LEASE" lease_job "$LEASE_JOB" ;;
    esac
    rsk_p=$(printf '%s\n' "$TASKOUT" | sed -n 's/^P //p') # env, arg, script, then each task's lines
    [ -z "$rsk_p" ] || PLAN="$PLAN$rsk_p
"
    rsk_hash "$PLAN"
    PLAN_HASH=$RSK_H
}

# run_sbatch test-only|submit [ARGS]: sbatch with the plan's resources (submit: the job script JOB on stdin) from an
# empty environment, so no SBATCH_* variable of the login session changes the allocation; sets SB_RC, SB_OUT
# (all output), SB_JOB. --no-requeue: a requeued job would run its limit again, and Slurm count the last run only
run_sbatch() {
    rsk_mode=$1
    shift
    set -- --partition="$PARTITION" --nodes="$NODES" --ntasks-per-node=1 \
        --cpus-per-task="$CPUS" --mem="$MEM_MB" --time="$TIME_MIN" --chdir="$WORKDIR" --export=ALL --no-requeue "$@"
    [ -z "$ACCOUNT" ] || set -- --account="$ACCOUNT" "$@"
    [ -z "$QOS" ] || set -- --qos="$QOS" "$@"
    [ "$GPUS" -eq 0 ] || set -- --gres="gpu:$GPUS" "$@"
    [ -z "$SIGNAL_S" ] || set -- --signal="B:USR1@$SIGNAL_S" "$@"
    set -- "$SBATCH" "$@"
    [ -z "${SLURM_CONF:-}" ] || set -- "SLURM_CONF=$SLURM_CONF" "$@"
    set -- env -i "PATH=$PATH" "HOME=$HOME" "USER=$USER_NAME" "LOGNAME=$USER_NAME" SLURM_TIME_FORMAT=%s "$@"
    if [ "$rsk_mode" = test-only ]; then
        SB_OUT=$("$@" --test-only --wrap true 2>&1) && SB_RC=0 || SB_RC=$?
    else
        SB_OUT=$(printf '%s' "$JOB" | "$@" --parsable 2>&1) && SB_RC=0 || SB_RC=$?
    fi
    # --parsable: the last line is JOBID or JOBID;CLUSTER (read in the shell: no fork)
    SB_JOB=${SB_OUT##*"
"}
    SB_JOB=${SB_JOB%%;*}
    rsk_is_uint "$SB_JOB" || SB_JOB=''
    [ "$SB_RC" -eq 0 ] || SB_JOB=''
    SB_CODE=sbatch-failed SB_ERRC=$RSK_E_SBATCH # the one classifier of sbatch failures
    if rsk_slurm_down "$SB_OUT"; then SB_CODE=slurm-unavailable SB_ERRC=$RSK_E_UNAVAILABLE; fi
}

for_shapes() { # for_shapes FUNCTION: FUNCTION for each distinct shape (SHAPES), with the resources run_sbatch uses set
    while IFS=' ' read -r NODES CPUS MEM_MB GPUS TIME_MIN; do
        [ -z "$NODES" ] || "$1"
    done <<EOT
$SHAPES
EOT
}

# fits: the shape fits what its place can ever hold, or the plan fails naming the limit: one node of a step's lease
# (its file), or the partition (sinfo's PARTS: --test-only accepts a job over the partition's time limit that then
# pends forever, PartitionTimeLimit)
fits() {
    rsk_caps=$PARTS rsk_of="the partition's" rsk_node="its largest node's"
    [ "$PLACE" != step ] || rsk_caps="$PARTITION|$L_time:00|$L_cpus|$L_mem|gpu:$L_gpus|1" rsk_of="the lease's" rsk_node="the lease's"
    rsk_why=$(printf '%s\n' "$rsk_caps" | awk -F'|' -v part="$PARTITION" -v t="$TIME_MIN" -v c="$CPUS" \
        -v m="$MEM_MB" -v g="$GPUS" -v n="$NODES" -v of="$rsk_of" -v node="$rsk_node" "$RSK_AWK"'
        $1 == part || $1 == part "*" { nodes += $6; l = secs($2); if (l != "") lim = l; x = $3 + 0; if (x > cpu) cpu = x
          x = $4 + 0; if (x > mem) mem = x; x = gres_gpus($5); if (x > gpu) gpu = x }
        END {
            if (!nodes) exit
            if (lim != "" && t * 60 > lim) printf "time limit %d min is over %s %d min; ", t, of, lim / 60
            if (n > nodes) printf (of ~ /lease/ ? "a step runs on one node of its lease (asked %d); " : "%d nodes are more than " of " %d; "), n, nodes
            if (c > cpu) printf "%d CPUs per node are more than %s %d; ", c, node, cpu
            if (m > mem) printf "%d MB per node is more than %s %d MB; ", m, node, mem
            if (g > gpu) printf "%d GPUs per node are more than %s %d; ", g, node, gpu
        }')
    [ -n "$rsk_why" ] || return 0
    [ "$PLACE" != step ] || rsk_fail "$RSK_E_SBATCH" step-never-fits "this step can never run in lease $LEASE: ${rsk_why%; }"
    rsk_fail "$RSK_E_SBATCH" slurm-rejected "partition $PARTITION can never run this: ${rsk_why%; }"
}

test_only() { # sbatch --test-only for one shape; fails the plan if Slurm refuses
    fits # first: Slurm's own refusal of a shape no node can hold does not say which resource it is
    run_sbatch test-only
    if [ "$SB_RC" -ne 0 ]; then
        [ "$SB_CODE" = slurm-unavailable ] || SB_CODE=slurm-rejected
        # name the valid choices: the partitions, with their time limits and GRES
        rsk_parts=$(printf '%s\n' "$PARTS" | awk -F'|' '!seen[$1]++ { printf "%s%s (time %s, gres %s)", s, $1, $2, $5; s = ", " }')
        rsk_fail "$SB_ERRC" "$SB_CODE" "$(printf '%s' "$SB_OUT" | head -n 5 | cut -c1-400); partitions: $rsk_parts"
    fi
    ESTIMATE=${ESTIMATE:-$SB_OUT} # what Slurm says of the first shape (rsk.wire.answers reads its start and nodes)
}

# request_facts: one awk pass over the request's evidence (Slurm's queue, RSK_SQ as read last, and more) and its
# journal lines. STATES: "IDX STATE JOB PLAN" a task (STATE as @@prior, or none). A request withdrawn, or with a job
# or open intent of another plan, is refused (resolve_open).
request_facts() {
    rsk_jf="$RSK_ROOT/journal/$PROJECT.log"
    [ -n "$RID" ] && [ -f "$rsk_jf" ] || rsk_jf=/dev/null
    STATES=$(if [ -n "$RID" ]; then rsk_evidence_lines "$PROJECT" "$RID"; fi \
        | awk -v nt="$NT" -v rid="$RID" -v n="rsk:$PROJECT:$RID" -v runs="$RSK_ROOT/runs/$PROJECT" -v me="$PLAN_HASH" \
            -v jf="$rsk_jf" "$RSK_AWK"'
        FILENAME == jf { # the journal, the request'"'"'s lines: compared as whole strings (a request id is never a pattern)
            e = kv($0, "ev")
            if (kv($0, "rid") != rid || e !~ /^[a-z-]+$/) next
            i = kv($0, "idx") + 0
            if (e == "withdrawn") gone[i] = 1
            if (e !~ /^(intent|accepted|reconciled|abandoned|failed|refused)$/) next
            st[i] = e
            if (e ~ /^(intent|accepted|reconciled)$/) plan[i] = dash(kv($0, "plan"))
            if (e ~ /^(accepted|reconciled)$/ && kv($0, "job") != "") job[i] = kv($0, "job")
            next
        }
        evidence($0, n, runs "/" rid) && !(EV_IDX in ejob) { ejob[EV_IDX] = EV_JOB; if (EV_PLAN != "-") eplan[EV_IDX] = EV_PLAN }
        END {
            if (rid != "") for (i = 0; i < nt; i++) {
                pl = (i in plan) ? plan[i] : "-"
                if (i in gone) { print "!withdrawn"; exit }
                if (st[i] ~ /^(accepted|reconciled)$/ && (i in job)) s = i " done " job[i]
                else if (i in ejob) { s = i " found " ejob[i]; if (i in eplan) pl = eplan[i] }
                else if (st[i] == "intent") s = i " open -"
                else { print i, "none", "-", pl; continue }
                if (pl != "-" && pl != me) { print "!" pl; exit }
                print s, pl
            }
        }' - "$rsk_jf")
    case "
$STATES" in # the awk's last line, "!withdrawn" or "!PLAN" (a value of the journal may hold a "!" too)
        *"
!withdrawn") rsk_fail "$RSK_E_USAGE" request-withdrawn \
            "request id $RID was a workflow withdrawn when its submission failed; launch it again with a new request id" ;;
        *"
!"*) rsk_fail "$RSK_E_MISMATCH" request-conflict "request id $RID was already used for another plan (${STATES##*!})" ;;
    esac
    resolve_open
}

# resolve_open: STATES' tasks whose intent has no outcome and no evidence, and, while the ledger holds the request
# with no known outcome (RSK_SINCE: a lost answer), every task with no job (its journal lines may all be erased),
# are "found" when an active job of the account Slurm took since the ledger's hold, that no book holds, runs a batch
# script in the task's run directory (Slurm's copy of the script, which no job can change: a job that renamed itself
# and erased its markers and journal lines is its job still, ADR 0039); while the controller does not give a job's
# script, that job could be it: nothing is decided then (intent-unresolved)
resolve_open() {
    rsk_look=open
    [ -z "$RSK_SINCE" ] || rsk_look='open|none'
    case $STATES in *" open "*) ;; *" none "*) [ -n "$RSK_SINCE" ] || return 0 ;; *) return 0 ;; esac
    rsk_scripts=$(rsk_script_runs "$PROJECT" "$(printf '%s\n' "$STATES" | awk '$3 != "-" { printf "%s ", $3 }')")
    STATES=$({ printf '%s\n--\n' "$rsk_scripts"; printf '%s\n' "$STATES"; } | awk -v rid="$RID" -v look="^($rsk_look)$" '
        !q && $0 == "--" { q = 1; next }
        !q { if ($1 == "?") u = u " " $2; else if ($1 == rid) s[$2] = $3; next }
        $2 ~ look && (($1 + 0) in s) { print $1, "found", s[$1 + 0], $4; next }
        $2 ~ look && u != "" { print "!" substr(u, 2); exit }
        { print }')
    case $STATES in *"!"*)
        rsk_u=${STATES#*!}
        rsk_fail "$RSK_E_MISMATCH" intent-unresolved "request id $RID has an intent with no outcome, and the controller did not give the batch script of job(s) $rsk_u of this account, submitted since: one may be its job. Try again when Slurm answers, or wait for them to end or cancel them" ;;
    esac
}

# plan mode -------------------------------------------------------------------
do_plan() {
    # one read of Slurm's queue for the active count and the request's evidence (a step's lease read it just now)
    [ "$RSK_SLURM" = up ] || rsk_need_slurm
    printf '%s' "$PLAN" | sed "s/^/@@$RSK_NONCE planline /" # the plan's lines as they are (KEY VALUE, a line each)
    rsk_emit plan "$PLAN_HASH"
    rsk_policy_check "$SHAPES" "$PARTITION" "$ACCOUNT" "$QOS" "$CAPPED"
    rsk_policy_emit
    request_facts
    rsk_active_jobs "$PROJECT"
    rsk_emit active "count=$ACTIVE" "cap=$P_max_active_jobs" "jobs=$ACTIVE_JOBS" "at_once=$CAPPED"
    printf '%s\n' "$STATES" | RSK_NONCE=$RSK_NONCE awk '$2 ~ /^(done|found|open)$/ { # (the nonce: not on a command line)
        print "@@" ENVIRON["RSK_NONCE"] " prior idx=" $1 " state=" $2 " job=" ($3 == "-" ? "" : $3) " plan=" ($4 == "-" ? "" : $4) }'
    [ "$RSK_VERDICT" = allow ] || rsk_fail "$RSK_E_POLICY" policy-refused "the cluster policy refuses this request"
    check_lease
    [ "$PLACE" != step ] || { rsk_emit estimate "lease=$LEASE"; return 0; }
    ESTIMATE=''
    for_shapes test_only
    rsk_emit estimate "said=$(rsk_b64 "$(printf '%s' "$ESTIMATE" | head -n 5 | cut -c1-400)")"
}

# launch mode: the plan is out, and rsk's ledger decides while this waits. Only "go HASH NONCE [replay]" goes
# on (do_submit checks the hash), framed by the new NONCE; anything else, or the end of input, ends it here.
await_go() {
    rsk_emit await "plan=$PLAN_HASH"
    IFS=' ' read -r rsk_g rsk_h rsk_n rsk_m rsk_x <&3 || true
    exec 3<&-
    case ${rsk_n:-} in *[!0-9a-f]* | '') rsk_n='' ;; esac
    case ${rsk_m:-} in '' | replay) ;; *) rsk_n='' ;; esac
    if [ "${rsk_g:-}" != go ] || [ -n "${rsk_x:-}" ] || [ "${#rsk_n}" -ne 32 ]; then
        exit 0 # not allowed (a card, a denial) or rsk went away: nothing is journaled, nothing submitted
    fi
    RSK_NONCE=$rsk_n
    EXPECT=${rsk_h:-}
    REPLAY=${rsk_m:-} # "go HASH NONCE replay": rsk decided nothing, because the plan showed every job submitted
}

# policy_unchanged: a policy changed since the plan (its digest is bound in the plan) is a mismatch; the same
# digest is the same file, so the rules read for the plan stand
policy_unchanged() {
    rsk_digest=$RSK_POLICY_DIGEST
    rsk_policy_digest
    [ "$RSK_POLICY_DIGEST" = "$rsk_digest" ] \
        || rsk_fail "$RSK_E_MISMATCH" plan-mismatch "the cluster's policy changed since the plan was made (now $RSK_POLICY_DIGEST)"
}

# job_text IDXS [STEP]: the job script sbatch reads on stdin for these task indices of the current shape (an array's:
# task ARR_OFF + its index, task_of), or, with STEP (its step id), the script a lease's controller runs as that step
job_text() {
    printf "#!/bin/sh\nrsk_sig=''; trap rsk_sig=TERM TERM; trap rsk_sig=INT INT; trap rsk_sig=USR1 USR1 # kept from the start\n# rsk job: project %s, request %s, plan %s\n" "$PROJECT" "$RID" "$PLAN_HASH"
    if [ -n "${2:-}" ]; then printf 'rsk_ti=%s\nrsk_step=%s\n' "$1" "$2"; else printf 'rsk_ti=$((%s + ${SLURM_ARRAY_TASK_ID:-0}))\n' "$ARR_OFF"; fi
    printf 'rsk_run=%s/t"$rsk_ti"\n' "$(rsk_sq "$RUN_DIR")"
    printf 'rsk_limit=%s\nrsk_plan=%s\nrsk_path=%s\n' "$((TIME_MIN * 60))" "$PLAN_HASH" "$(rsk_sq "$JOBPATH")"
    printf 'rsk_code=%s\nrsk_code_digest=%s\n' "$(rsk_sq "$CODE_DIR")" "$CODE"
    # the request's work directory: a chain's links share the chain's, a retry's attempt the batch's
    printf 'rsk_work=%s\n' "$(rsk_sq "$RSK_ROOT/runs/$PROJECT/${CHAIN_OF:-${ATTEMPT_OF:-$RID}}/work")"
    [ -z "$BUDGET_MIN" ] || printf 'rsk_links=%s\nrsk_budget=%s\nrsk_link0=%s\nrsk_chain=%s\n' "$NT" \
        "$((BUDGET_MIN * 60))" "$LINK0" "$(rsk_sq "$RSK_ROOT/runs/$PROJECT/${CHAIN_OF:-$RID}")"
    printf '%s\n' "$RSK_WRAPPER"
    # shellcheck disable=SC2086  # RESERVED_ENV's words, as one case pattern
    rsk_pats=$(set -f && printf '%s | ' $RESERVED_ENV)
    printf 'rsk_export() { case ${rsk_a%%%%=*} in %s"") echo "rsk: refusing environment name ${rsk_a%%%%=*}" >&2; exit 2 ;; esac; export "$rsk_a"; }\n' \
        "$rsk_pats"
    printf 'rsk_clean_env\nset --\n'
    for rsk_e in $Q_env; do printf "rsk_arg '%s'; rsk_export\n" "$rsk_e"; done
    if [ "$KIND" = lease ]; then
        printf 'rsk_root=%s\nrsk_ldir=%s\nrsk_project=%s\nrsk_lease=%s\n' "$(rsk_sq "$ROOT_REAL")" "$(rsk_sq "$LDIR")" \
            "$PROJECT" "$LEASE"
        printf 'rsk_lgpus=%s\nrsk_lcpus=%s\nrsk_lmem=%s\nrsk_drain=%s\nrsk_overrun=%s\nrsk_srun=%s\n' "$GPUS" "$CPUS" \
            "$MEM_MB" "$DRAIN_MIN" "$OVERRUN" "$(rsk_sq "$(command -v srun)")"
        printf 'RSK_AWK=%s\n%s\n' "$(rsk_sq "$RSK_AWK")" "$RSK_CONTROLLER" # the awk library, kv.sh, the controller
        printf 'rsk_main rsk_lease_supervise\n'
        return 0
    fi
    printf 'case $rsk_ti in\n'
    printf '%s\n' "$TASKOUT" | awk -v keep="$1" 'BEGIN { n = split(keep, w, " "); for (i = 1; i <= n; i++) k[w[i]] = 1 }
        $1 == "W" && ($2 in k) { sub(/^W [0-9]+ /, ""); print; if (!--n) exit }'
    printf '*) echo "rsk: no task for index $rsk_ti" >&2; exit 97 ;;\nesac\n'
    printf 'rsk_main "$@"\n'
}

# after the go: submit -----------------------------------------------------------
# arrays TODO: the tasks TODO (" I I ...", "*": all) as the job arrays that submit them, in order, a line each
# "N|SHAPE|NEEDS|OFFSET|AFTER|ARRAY|IDXS" (ARRAY: sbatch's --array, the IDXS less OFFSET, and %THROTTLE), then a
# last line with how many of them can run at once, the cap's count; how and why: docs/adr/0058 and 0059
arrays() {
    printf '%s\n' "$TASKOUT" | awk -v todo="$1" -v b="$BLOCK" -v k="$MAX_RUNNING" '
        BEGIN { n = split(todo, w, " "); for (i = 1; i <= n; i++) want[w[i]] = 1 }
        $1 == "S" && (todo == "*" || ($2 in want)) { t[++nt] = $2; sh[$2] = $3 " " $4 " " $5 " " $6 " " $7 }
        $1 == "D" { lv[$2] = $3; nd[$2] = $4; if ($3 > top) top = $3 }
        END { # tasks alike (level, shape, needs) in a block of b indices share an array; arrays by level, then first task
            for (x = 1; x <= nt; x++) { i = t[x]; g = lv[i] + 0 "|" sh[i] "|" (i in nd ? nd[i] : "-") "|" int(i / b) * b
                if (!(g in at)) { at[g] = ++na; key[na] = g; lvl[na] = lv[i] + 0 }; a = at[g]; m[a, ++sz[a]] = i }
            for (l = 0; l <= top; l++) for (a = 1; a <= na; a++) if (lvl[a] == l) { o[++no] = a; th[no] = 1 }
            for (left = k - no; left > 0 && more != "no";) { # the throttles: what K leaves, one a round to arrays not full
                more = "no"; for (x = 1; x <= no && left > 0; x++) if (th[x] < sz[o[x]]) { th[x]++; left--; more = "" } }
            for (x = 1; x <= no; x++) { a = o[x]; split(key[a], f, "|"); once += k == "" ? sz[a] : th[x]
                printf "%d|%s|%s|%d|%s|", x, f[2], f[3], f[4], (k != "" && x > k ? x - k : "-") # (fewer K: lanes)
                for (y = 1; y <= sz[a]; y++) printf "%s%d", (y > 1 ? "," : ""), m[a, y] - f[4]
                printf "%s|", (k == "" ? "" : "%" th[x]); for (y = 1; y <= sz[a]; y++) printf " %d", m[a, y]; print ""
            }
            print once + 0
        }'
}

# submit_groups ARRAYS: each of ARRAYS' lines placed here: a sbatch (for a batch, the job array) after the jobs its tasks
# need and its lane's array before it, or a step's queue entries. A workflow is whole or not at all: when an sbatch
# fails, every job of the request is cancelled, withdrawn
submit_groups() {
    # a workflow's jobs the journal gives the request that Slurm lists under another name (a line a job forged, or a job
    # that renamed itself): never its own, to wait for or to cancel; the workflow is not submitted, but withdrawn
    rsk_other=' '
    [ -z "$DAG" ] || rsk_other=" $({ printf '%s\n--\n' "$RSK_SQ"; printf '%s' "$DONE"; } | awk -v me="rsk:$PROJECT:$RID" \
        "$RSK_AWK"'$0 == "--" { d = 1; next } !d { sq($0); if (SQ_NAME != me) x[SQ_ID] = 1; next } ($2 in x) { printf "%s ", $2 }')"
    [ "$rsk_other" = ' ' ] || FAIL_CODE=evidence-mismatch FAIL_RC=$RSK_E_MISMATCH \
        FAIL_MSG="job(s)$rsk_other, which the journal gives this workflow, are not its own: Slurm names them otherwise"
    rsk_arrs=' '
    while IFS='|' read -r rsk_x rsk_shape rsk_needs ARR_OFF rsk_after ARR_LIST rsk_idxs; do
        if [ -z "$rsk_idxs" ] || { [ -n "$FAIL_CODE" ] && [ -n "$DAG" ]; }; then continue; fi
        DEP='' # the jobs they need (afterok:J, ...), then the array before them in their lane
        [ "$rsk_needs" = - ] || DEP=$(printf '%s' "$DONE" | awk -v needs="$rsk_needs" '{ job[$1] = $2 } END {
            n = split(needs, w, ","); for (i = 1; i <= n; i++) { split(w[i], x, ":"); if (x[1] in job) d = d ",after" x[2] ":" job[x[1]] }
            print substr(d, 2) }')
        case $rsk_arrs in *" $rsk_after:"[0-9]*) rsk_p=${rsk_arrs#*" $rsk_after:"} DEP=${DEP:+$DEP,}afterany:${rsk_p%% *} ;; esac
        # shellcheck disable=SC2086  # the shape: five numbers, the resources run_sbatch uses
        set -- $rsk_shape && NODES=$1 CPUS=$2 MEM_MB=$3 GPUS=$4 TIME_MIN=$5
        rsk_block_start
        if [ "$PLACE" = step ]; then queue_idxs "$rsk_idxs"; else sbatch_idxs "$rsk_idxs"; fi
        rsk_arrs="$rsk_arrs$rsk_x:$SB_JOB "
        # a journal that cannot take the outcome loses nothing: the job carries rsk:PROJECT:RID, a queue entry is its
        # own evidence (rsk_evidence_lines)
        rsk_journal_write "$PROJECT" || true
    done <<EOT
$1
EOT
    if [ -z "$DAG" ] || [ -z "$FAIL_CODE" ] || [ -z "$DONE" ]; then return 0; fi
    rsk_gone=$(printf '%s' "$DONE" | awk -v other="$rsk_other" 'NF && !index(other, " " $2 " ")')
    # shellcheck disable=SC2046  # job ids
    scancel $(printf '%s\n' "$rsk_gone" | awk '{ sub(/_.*/, "", $2); if (!s[$2]++) print $2 }') 2>/dev/null || true
    rsk_block_start
    jlines withdrawn '' "$rsk_gone" code=workflow-incomplete
    rsk_journal_write "$PROJECT" || true
}

# sbatch_idxs IDXS: one sbatch for these tasks of the current shape, after DEP if set; for a batch, the job array
# ARR_LIST, whose index I runs task ARR_OFF + I and writes in its run directory: t%a, or tB%Da past the first block of
# BLOCK = 10^D tasks (Slurm pads %Da to D digits)
sbatch_idxs() {
    JOB=$(job_text "$1")
    rsk_t=0 rsk_idxs=$1 rsk_arr='' # (rsk_arr: "_" for a batch, whose tasks are the array's, JOB_INDEX)
    # the job carries its identity (name) and its plan (comment): evidence that needs no journal
    set -- --job-name="rsk:$PROJECT:$RID" --comment="rsk-plan:$PLAN_HASH"
    [ -z "$DEP" ] || set -- "$@" --dependency="$DEP" --kill-on-invalid-dep=yes
    if [ "$KIND" = batch ]; then
        rsk_t=%a rsk_arr=_
        [ "$ARR_OFF" -eq 0 ] || rsk_t=$((ARR_OFF / BLOCK))%$((${#BLOCK} - 1))a
        set -- "$@" --array="$ARR_LIST"
    fi
    run_sbatch submit "$@" --output="$RUN_DIR/t$rsk_t/stdout" --error="$RUN_DIR/t$rsk_t/stderr"
    if [ -z "$SB_JOB" ]; then
        jlines failed "$rsk_idxs" '' "rc=$SB_RC" "code=$SB_CODE" "msg=$(rsk_b64 "$(printf '%s' "$SB_OUT" | head -n 20 | cut -c1-400)")"
        FAIL_CODE=$SB_CODE FAIL_RC=$SB_ERRC FAIL_MSG="sbatch failed: $SB_OUT"
        return 0
    fi
    rsk_new=$(printf '%s' "$rsk_idxs" | awk -v j="$SB_JOB" -v a="$rsk_arr" -v o="$ARR_OFF" \
        '{ for (i = 1; i <= NF; i++) print $i, j (a == "" ? "" : "_" $i - o) } END { print "." }') rsk_new=${rsk_new%.}
    placed
}

# queue_idxs IDXS: each of these tasks becomes a queue entry of the lease, a step (under the project lock): its script
# (q/SEQ.sh), then its line (q/SEQ.step, the commit point); the controller starts it when it fits
queue_idxs() {
    rsk_seq=$(cat "$LDIR/seq" 2>/dev/null || echo 0)
    rsk_is_uint "$rsk_seq" || rsk_seq=0
    rsk_decimal "$rsk_seq"; rsk_seq=$RSK_V
    rsk_new=''
    for rsk_i in $1; do
        rsk_seq=$((rsk_seq + 1))
        printf '%s\n' "$rsk_seq" >"$LDIR/seq.tmp" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write $LDIR/seq"
        mv "$LDIR/seq.tmp" "$LDIR/seq"
        rsk_sn=$(printf '%06d' "$rsk_seq")
        rsk_sid="${LEASE_JOB}s$rsk_seq"
        JOB=$(job_text "$rsk_i" "$rsk_sid") # and the task's key (a single job has none)
        rsk_key=$(printf '%s\n' "$TASKOUT" | awk -v i="$rsk_i" '$1 == "P" && $2 == "task" && n++ == i { print substr($3, 2); exit }')
        { printf '%s\n' "$JOB" >"$LDIR/q/$rsk_sn.sh.tmp" && mv "$LDIR/q/$rsk_sn.sh.tmp" "$LDIR/q/$rsk_sn.sh" \
            && printf 'seq=%s job=%s rid=%s idx=%s task=%s plan=%s gpus=%s cpus=%s mem=%s time=%s\n' "$rsk_sn" "$rsk_sid" \
                "$RID" "$rsk_i" "$rsk_key" "$PLAN_HASH" "$GPUS" "$CPUS" "$MEM_MB" "$TIME_MIN" >"$LDIR/q/$rsk_sn.step.tmp" \
            && mv "$LDIR/q/$rsk_sn.step.tmp" "$LDIR/q/$rsk_sn.step"; } \
            || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write the queue of lease $LEASE"
        rsk_new="$rsk_new$rsk_i $rsk_sid
"
    done
    placed
}

# placed: the tasks of the group have their jobs (rsk_new, "IDX JOB" lines), on Slurm or in a lease: journaled alike
placed() {
    jlines accepted '' "$rsk_new" "res=$NODES,$CPUS,$MEM_MB,$GPUS,$TIME_MIN" ${LEASE:+"lease=$LEASE"}
    DONE="$DONE$rsk_new"
}

# jlines EVENT "IDXS" JOBS [key=value ...]: one journal line per task index (added to RSK_BLOCK), with its task key,
# its needs and its job (JOBS: "IDX JOB" lines; IDXS '': those of JOBS, by index), and the key=values. EVENT
# "answer": the @@accepted line of each instead, printed
jlines() {
    jl_ev=$1 jl_idxs=$2 jl_jobs=$3
    shift 3
    [ -n "$jl_idxs$jl_jobs" ] || return 0
    [ -n "$RSK_T" ] || RSK_T=$(rsk_now)
    jl_out=$({ printf '%s\n--\n' "$TASKOUT"; printf '%s' "$jl_jobs"; } | RSK_NONCE=$RSK_NONCE awk -v ev="$jl_ev" \
        -v rid="$RID" -v nt="$NT" -v plan="$PLAN_HASH" -v idxs="$jl_idxs" -v t="$RSK_T" -v extra="$*" '
        BEGIN { nonce = ENVIRON["RSK_NONCE"] } # (from the environment: any user of the node can read a command line)
        $0 == "--" { d = 1; next }
        d { job[$1] = $2; next }
        $1 == "P" && $2 == "task" { key[n++] = substr($3, 2) }
        $1 == "D" && $4 != "-" { needs[$2] = $4 }
        END {
            if (idxs == "") { for (i = 0; i < nt; i++) if (i in job) ix[++m] = i } else m = split(idxs, ix, " ")
            if (extra != "") more = " " extra
            for (j = 1; j <= m; j++) {
                i = ix[j]
                if (ev == "answer") print "@@" nonce " accepted job=" job[i] " rid=" rid " plan=" plan " idx=" i " task=" key[i] more
                else print "v=2 t=" t " ev=" ev " rid=" rid " plan=" plan " idx=" i ((i in key) ? " task=" key[i] : "") \
                    ((i in needs) ? " needs=" needs[i] : "") ((i in job) ? " job=" job[i] : "") more
            }
        }')
    if [ "$jl_ev" = answer ]; then printf '%s\n' "$jl_out"; else RSK_BLOCK="$RSK_BLOCK$jl_out
"; fi
}

do_submit() {
    [ "$PLAN_HASH" = "$EXPECT" ] \
        || rsk_fail "$RSK_E_MISMATCH" plan-mismatch "the plan changed: expected $EXPECT, the cluster computes $PLAN_HASH"
    [ -n "$RID" ] || rsk_fail "$RSK_E_USAGE" no-request-id "submit needs a request id"
    rsk_policy_check "$SHAPES" "$PARTITION" "$ACCOUNT" "$QOS" "$CAPPED"
    [ "$RSK_VERDICT" = allow ] || { rsk_policy_emit; rsk_fail "$RSK_E_POLICY" policy-refused "the cluster policy refuses this request"; }
    RUN_DIR=$RSK_ROOT/runs/$PROJECT/$RID
    make_dirs
    rsk_need_writable "$RSK_ROOT/runs/$PROJECT"
    rsk_lock "$PROJECT" # (which finds the journal's directory writable first)
    rsk_need_slurm # read again under the lock: what the plan saw may have changed since
    request_facts
    # a task with a job (done; found: journaled reconciled) is replayed, any other is to do (open: journaled abandoned,
    # for the lock is ours: the process that wrote the intent is gone, and no job exists)
    DONE=$(printf '%s\n' "$STATES" | awk '$2 ~ /^(done|found)$/ { print $1, $3 } END { print "." }') DONE=${DONE%.}
    TODO=$(printf '%s\n' "$STATES" | awk 'NF && $2 !~ /^(done|found)$/ { printf " %s", $1 }')
    rsk_block_start
    jlines reconciled '' "$(printf '%s\n' "$STATES" | awk '$2 == "found" { print $1, $3 }')"
    jlines abandoned "$(printf '%s\n' "$STATES" | awk '$2 == "open" { printf " %s", $1 }')" '' code=no-evidence
    rsk_journal_write "$PROJECT" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write the journal"
    # a replay was allowed without a decision, on what the plan showed submitted: anything left now, nobody decided
    [ -z "$TODO" ] || [ -z "$REPLAY" ] || rsk_fail "$RSK_E_MISMATCH" replay-changed \
        "the request's jobs no longer all show as submitted; launch it again, and the ledger decides"
    FAIL_CODE='' rsk_replay=1
    if [ -n "$TODO" ]; then
        rsk_replay=0
        check_lease
        clear_markers
        rsk_block_start
        rsk_arr=$(arrays "$TODO") && rsk_n=${rsk_arr##*"
"} # how many of them can run at once
        rsk_active_jobs "$PROJECT" # (a step runs in its lease's allocation: only jobs of their own count)
        if [ "$PLACE" != step ] && [ -n "$P_max_active_jobs" ] && [ $((ACTIVE + rsk_n)) -gt "$P_max_active_jobs" ]; then
            jlines refused "$TODO" '' code=active-cap
            rsk_journal_write "$PROJECT" || true
            rsk_fail "$RSK_E_CAP" active-cap "project $PROJECT has $ACTIVE active rsk jobs; $rsk_n more would pass the cap $P_max_active_jobs"
        fi
        jlines intent "$TODO" ''
        # no intent on disk, no sbatch and no queue entry: what was never journaled must never run
        rsk_journal_write "$PROJECT" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write the journal (a full disk?)"
        submit_groups "${rsk_arr%"
"*}"
    fi
    [ "$PLACE" != open ] || [ -z "$DONE" ] || write_lease_file
    jlines answer '' "$DONE" "replay=$rsk_replay" # every task that has a job
    [ -z "$FAIL_CODE" ] || rsk_fail "$FAIL_RC" "$FAIL_CODE" "$(printf '%s' "$FAIL_MSG" | head -n 5 | cut -c1-400)"
}

make_dirs() { # a lease's queue, and every task's run directory tI (made in RUN_DIR: short names; rsk_lock makes journal/)
    # shellcheck disable=SC2046  # t0 t1 ...: words
    { mkdir -p "$RUN_DIR" ${LDIR:+"$LDIR/q" "$LDIR/run" "$LDIR/end"} \
        && (cd "$RUN_DIR" && mkdir -p $(awk -v n="$NT" 'BEGIN { for (i = 0; i < n; i++) print "t" i }')); } 2>/dev/null \
        || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot create the run directories under $RUN_DIR"
}

clear_markers() { # the markers an earlier attempt left in the run directories of the tasks to do (no job), in one rm
    # shellcheck disable=SC2046  # tI/started tI/ended: words
    (cd "$RUN_DIR" && rm -f $(printf '%s' "$TODO" | awk '{ for (i = 1; i <= NF; i++) print "t" $i "/started", "t" $i "/ended" }'))
}

# write_lease_file: what was opened (the controller's allocation, what steps may ask of it); a lease opened again
# under the same name takes over the steps still queued in its directory
write_lease_file() {
    rsk_lj=$(printf '%s\n' "$DONE" | awk 'NF { print $2; exit }')
    rsk_lease "$PROJECT" "$LEASE"
    [ "$L_job" != "$rsk_lj" ] || return 0
    rm -f "$LDIR/drain" "$LDIR/closed"
    printf 'job=%s rid=%s plan=%s partition=%s account=%s qos=%s nodes=%s cpus=%s mem=%s gpus=%s time=%s drain=%s overrun=%s\n' \
        "$rsk_lj" "$RID" "$PLAN_HASH" "$PARTITION" "$ACCOUNT" "$QOS" "$NODES" "$CPUS" "$MEM_MB" "$GPUS" "$TIME_MIN" \
        "$DRAIN_MIN" "$OVERRUN" >"$LDIR/lease.tmp" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write $LDIR/lease"
    mv "$LDIR/lease.tmp" "$LDIR/lease"
}

main() {
    rsk_start
    MODE=${1:-}
    EXPECT='' REPLAY='' SB_JOB='' # (SB_JOB: the last sbatch's job; a step's queue entries have none)
    case $MODE:$# in
        plan:1 | launch:1) ;;
        *) rsk_fail "$RSK_E_USAGE" usage "usage: submit plan | submit launch (request on stdin)" ;;
    esac
    rsk_need sbatch squeue scontrol sinfo base64 awk
    rsk_which sbatch || rsk_fail "$RSK_E_MISSING" missing-command "the login node has no 'sbatch' on PATH"
    SBATCH=$RSK_P USER_NAME=$RSK_USER
    [ -d "$RSK_ROOT" ] || mkdir -p "$RSK_ROOT" 2>/dev/null || true
    ROOT_REAL=$(cd "$RSK_ROOT" 2>/dev/null && pwd -P) || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot use the remote root $RSK_ROOT"
    read_request
    # launch mode keeps the client's answer on fd 3; nothing before it may read (or wait on) that input
    [ "$MODE" != launch ] || exec 3<&0 </dev/null
    rsk_policy_load
    cluster_facts
    resolve
    partition_facts
    build_plan
    case $MODE in
        plan) do_plan ;;
        *) do_plan && await_go && policy_unchanged && do_submit ;;
    esac
}
