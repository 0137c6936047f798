# shellcheck shell=sh
# rsk cluster policy: the rules the cluster enforces whatever the local ledger says, from $RSK_ROOT/policy.conf
# ("key = value" lines, "#" comments; the keys, their meanings and defaults: docs/protocol.md, "The cluster
# policy"). Part of the submit, doctor and info programs; on its own (the "policy" program) it prints the
# effective policy. Its digest is bound into every plan, so a changed policy changes every plan hash.

rsk_policy_digest() { # sets RSK_POLICY_DIGEST and RSK_POLICY_SOURCE: the policy file's sha256, or default-1
    rsk_pf=$RSK_ROOT/policy.conf
    RSK_POLICY_DIGEST='default-1' RSK_POLICY_SOURCE=default
    [ -f "$rsk_pf" ] || return 0
    rsk_hash_file "$rsk_pf"
    RSK_POLICY_DIGEST=$RSK_H RSK_POLICY_SOURCE=file
}

rsk_policy_load() { # sets P_KEY for each key, and RSK_POLICY_DIGEST
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
        case $rsk_pk in
            partitions) P_partitions=$rsk_pv ;; accounts) P_accounts=$rsk_pv ;; qos) P_qos=$rsk_pv ;;
            max_gpus) P_max_gpus=$rsk_pv ;; max_cpus) P_max_cpus=$rsk_pv ;; max_mem_mb) P_max_mem_mb=$rsk_pv ;;
            max_nodes) P_max_nodes=$rsk_pv ;; max_time_min) P_max_time_min=$rsk_pv ;;
            max_active_jobs) P_max_active_jobs=$rsk_pv ;; default_time_min) P_default_time_min=$rsk_pv ;;
            default_mem_mb) P_default_mem_mb=$rsk_pv ;;
        esac
    done <<EOT
$rsk_pl
EOT
}

rsk_allow() { # rsk_allow WHAT VALUE LIST: a reason unless LIST (space separated, or *) holds VALUE
    [ "$3" != '*' ] || return 0
    for rsk_w in $3; do [ "$rsk_w" != "$2" ] || return 0; done
    RSK_REASONS="$RSK_REASONS$1 $2 is not allowed (allowed: $3)
"
}

rsk_ceiling() { # rsk_ceiling WHAT VALUE MAX: a reason when VALUE passes MAX
    if [ -n "$3" ] && [ "$2" -gt "$3" ]; then
        RSK_REASONS="$RSK_REASONS$1 $2 exceeds the ceiling $3
"
    fi
}

# rsk_policy_check PARTITION ACCOUNT NODES CPUS MEM_MB GPUS TIME_MIN QOS: RSK_REASONS, one reason a line (an
# empty account or QOS is always allowed)
rsk_policy_check() {
    RSK_REASONS=''
    rsk_allow partition "$1" "$P_partitions"
    [ -z "$2" ] || rsk_allow account "$2" "$P_accounts"
    [ -z "$8" ] || rsk_allow qos "$8" "$P_qos"
    rsk_ceiling nodes "$3" "$P_max_nodes"
    rsk_ceiling "cpus per node" "$4" "$P_max_cpus"
    rsk_ceiling "memory per node (MB)" "$5" "$P_max_mem_mb"
    rsk_ceiling "gpus per node" "$6" "$P_max_gpus"
    rsk_ceiling "time limit (min)" "$7" "$P_max_time_min"
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

policy_main() { # the "policy" program's entry
    rsk_start
    case ${1:-show} in
        show) rsk_policy_show ;;
        *) rsk_fail "$RSK_E_USAGE" usage "usage: policy show" ;;
    esac
}
