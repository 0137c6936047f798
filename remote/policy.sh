# shellcheck shell=sh
# rsk cluster policy: the rules the cluster itself enforces, whatever the local ledger says.
# The policy file is $RSK_ROOT/policy.conf, "key = value" lines, "#" comments:
#   partitions        allowed partitions, space separated, or *           default *
#   accounts          allowed accounts (an empty account is always ok), or *  default *
#   qos               allowed QOS names (an empty QOS is always ok), or *  default *
#   max_gpus          GPUs per node, per job                               default none
#   max_cpus          CPUs per node, per job                               default none
#   max_mem_mb        memory per node in MB, per job                       default none
#   max_nodes         nodes per job                                        default none
#   max_time_min      time limit per job, minutes                          default none
#   max_active_jobs   pending + running rsk jobs per project               default 100
#   default_time_min  time limit when a request gives none                 default 60
#   default_mem_mb    memory per node when a request gives none            default 1024
# Part of the submit and doctor programs; on its own (the "policy" program) it prints the effective
# policy. Its digest is bound into every plan, so a changed policy changes every plan hash.

rsk_policy_file() { printf '%s/policy.conf' "$RSK_ROOT"; }

rsk_policy_digest() { # sets RSK_POLICY_DIGEST and RSK_POLICY_SOURCE: the policy file's sha256, or default-1
    rsk_pf=$RSK_ROOT/policy.conf
    RSK_POLICY_DIGEST='default-1' RSK_POLICY_SOURCE=default
    [ -f "$rsk_pf" ] || return 0
    rsk_hash_file "$rsk_pf"
    RSK_POLICY_DIGEST=$RSK_H RSK_POLICY_SOURCE=file
}

rsk_policy_load() { # sets P_* and RSK_POLICY_DIGEST
    P_partitions='*' P_accounts='*' P_qos='*' P_max_gpus='' P_max_cpus='' P_max_mem_mb='' P_max_nodes=''
    P_max_time_min='' P_max_active_jobs=100 P_default_time_min=60 P_default_mem_mb=1024
    rsk_policy_digest
    [ "$RSK_POLICY_SOURCE" = file ] || return 0
    # one pass: "KEY VALUE" a line (numbers in decimal), or "! MESSAGE" for the first bad line
    rsk_pl=$(awk '{ sub(/#.*/, "") } !index($0, "=") { next } {
        k = substr($0, 1, index($0, "=") - 1); v = substr($0, index($0, "=") + 1)
        gsub(/[ \t]/, "", k); gsub(/^[ \t]+|[ \t]+$/, "", v)
        if (k !~ /^(partitions|accounts|qos|max_(gpus|cpus|mem_mb|nodes|time_min|active_jobs)|default_(time_min|mem_mb))$/) {
            print "! unknown key '"'"'" k "'"'"'"; exit }
        if (k ~ /^(max|default)_/ && v != "") {
            if (v !~ /^[0-9]+$/) { print "! " k " must be a whole number, not '"'"'" v "'"'"'"; exit }
            sub(/^0+/, "", v); if (v == "") v = 0
            if (length(v) > 9) { print "! " k " is too large"; exit } }
        print k, v }' "$rsk_pf")
    while IFS=' ' read -r rsk_pk rsk_pv; do
        [ "$rsk_pk" != ! ] || rsk_fail "$RSK_E_POLICY" bad-policy "policy.conf: $rsk_pv"
        rsk_policy_set "$rsk_pk" "$rsk_pv"
    done <<EOT
$rsk_pl
EOT
}

rsk_policy_set() { # rsk_policy_set KEY VALUE (KEY is one of the names above)
    case $1 in
        partitions) P_partitions=$2 ;; accounts) P_accounts=$2 ;; qos) P_qos=$2 ;;
        max_gpus) P_max_gpus=$2 ;; max_cpus) P_max_cpus=$2 ;; max_mem_mb) P_max_mem_mb=$2 ;;
        max_nodes) P_max_nodes=$2 ;; max_time_min) P_max_time_min=$2 ;;
        max_active_jobs) P_max_active_jobs=$2 ;; default_time_min) P_default_time_min=$2 ;;
        default_mem_mb) P_default_mem_mb=$2 ;;
    esac
}

rsk_in_list() { # rsk_in_list WORD LIST: LIST is space separated or *
    [ "$2" = '*' ] && return 0
    for rsk_w in $2; do
        [ "$rsk_w" = "$1" ] && return 0
    done
    return 1
}

# rsk_policy_check PARTITION ACCOUNT NODES CPUS MEM_MB GPUS TIME_MIN QOS
# sets RSK_REASONS (one reason a line; policy_all turns them into the verdict)
rsk_policy_check() {
    RSK_REASONS=''
    rsk_in_list "$1" "$P_partitions" || RSK_REASONS="${RSK_REASONS}partition $1 is not allowed (allowed: $P_partitions)
"
    if [ -n "$2" ] && ! rsk_in_list "$2" "$P_accounts"; then
        RSK_REASONS="${RSK_REASONS}account $2 is not allowed (allowed: $P_accounts)
"
    fi
    if [ -n "$8" ] && ! rsk_in_list "$8" "$P_qos"; then
        RSK_REASONS="${RSK_REASONS}qos $8 is not allowed (allowed: $P_qos)
"
    fi
    rsk_ceiling nodes "$3" "$P_max_nodes"
    rsk_ceiling "cpus per node" "$4" "$P_max_cpus"
    rsk_ceiling "memory per node (MB)" "$5" "$P_max_mem_mb"
    rsk_ceiling "gpus per node" "$6" "$P_max_gpus"
    rsk_ceiling "time limit (min)" "$7" "$P_max_time_min"
}

rsk_ceiling() { # rsk_ceiling WHAT VALUE MAX
    if [ -n "$3" ] && [ "$2" -gt "$3" ]; then
        RSK_REASONS="${RSK_REASONS}$1 $2 exceeds the ceiling $3
"
    fi
}

rsk_policy_emit() { # @@policy lines: the verdict and each reason
    rsk_emit policy "verdict=$RSK_VERDICT" "source=$RSK_POLICY_SOURCE" "digest=$RSK_POLICY_DIGEST" \
        "max_active_jobs=$P_max_active_jobs" "default_time_min=$P_default_time_min" \
        "default_mem_mb=$P_default_mem_mb"
    printf '%s' "$RSK_REASONS" | while IFS= read -r rsk_r; do
        rsk_emit policy-reason "msg=$(rsk_b64 "$rsk_r")"
    done
}

rsk_policy_show() {
    rsk_policy_load
    for rsk_kv in "partitions=$P_partitions" "accounts=$P_accounts" "qos=$P_qos" "max_gpus=$P_max_gpus" \
        "max_cpus=$P_max_cpus" "max_mem_mb=$P_max_mem_mb" "max_nodes=$P_max_nodes" "max_time_min=$P_max_time_min" \
        "max_active_jobs=$P_max_active_jobs" "default_time_min=$P_default_time_min" "default_mem_mb=$P_default_mem_mb"; do
        rsk_emit policy-rule "key=${rsk_kv%%=*}" "value=$(rsk_b64 "${rsk_kv#*=}")"
    done
    rsk_emit policy "source=$RSK_POLICY_SOURCE" "digest=$RSK_POLICY_DIGEST"
}

# the "policy" program's entry
policy_main() {
    rsk_start
    case ${1:-show} in
        show) rsk_policy_show ;;
        *) rsk_fail "$RSK_E_USAGE" usage "usage: policy show" ;;
    esac
}
