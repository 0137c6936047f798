# shellcheck shell=sh
# rsk cluster policy: the rules the cluster enforces whatever the local ledger says, from $RSK_ROOT/policy.conf
# (docs/protocol.md, "The cluster policy"). Part of submit, doctor and info; on its own (the "policy" program) it
# prints the effective policy. Its digest is bound into every plan: a changed policy changes every plan hash.
RSK_POLICY_KEYS='partitions accounts qos max_gpus max_cpus max_mem_mb max_nodes max_time_min max_active_jobs default_time_min default_mem_mb'
rsk_policy_digest() { # sets RSK_POLICY_DIGEST and RSK_POLICY_SOURCE: the policy file's sha256, or default-1
    RSK_POLICY_DIGEST='default-1' RSK_POLICY_SOURCE=default
    [ -f "$RSK_ROOT/policy.conf" ] || return 0
    rsk_hash_file "$RSK_ROOT/policy.conf"
    RSK_POLICY_DIGEST=$RSK_H RSK_POLICY_SOURCE=file
}
rsk_policy_load() { # sets P_KEY for each key, RSK_POLICY_DIGEST, and RSK_PL: the values in the keys' order, "|" between
    rsk_policy_digest
    rsk_pf=$RSK_ROOT/policy.conf
    [ "$RSK_POLICY_SOURCE" = file ] || rsk_pf=/dev/null
    # one pass over the defaults and the file (numbers in decimal), or "!MESSAGE" for its first bad line
    RSK_PL=$(awk -v keys="$RSK_POLICY_KEYS" -v defaults='*|*|*||||||100|60|1024' '
        BEGIN { n = split(keys, k, " "); split(defaults, d, "|"); for (i = 1; i <= n; i++) v[k[i]] = d[i] }
        { sub(/#.*/, "") } !index($0, "=") { next }
        {
            key = substr($0, 1, index($0, "=") - 1); val = substr($0, index($0, "=") + 1)
            gsub(/[ \t]/, "", key); gsub(/^[ \t]+|[ \t]+$/, "", val)
            if (!(key in v)) { bad = "unknown key '"'"'" key "'"'"'"; exit }
            if (index(val, "|")) { bad = key " holds a |"; exit }
            if (key ~ /^(max|default)_/ && val != "") {
                if (val !~ /^[0-9]+$/) { bad = key " must be a whole number, not '"'"'" val "'"'"'"; exit }
                sub(/^0+/, "", val); if (val == "") val = 0
                if (length(val) > 9) { bad = key " is too large"; exit }
            }
            v[key] = val
        }
        END { if (bad != "") { print "!" bad; exit } for (i = 1; i <= n; i++) printf "%s%s", v[k[i]], (i < n ? "|" : "\n") }' "$rsk_pf")
    case $RSK_PL in "!"*) rsk_fail "$RSK_E_POLICY" bad-policy "policy.conf: ${RSK_PL#!}" ;; esac
    IFS='|' read -r P_partitions P_accounts P_qos P_max_gpus P_max_cpus P_max_mem_mb P_max_nodes P_max_time_min \
        P_max_active_jobs P_default_time_min P_default_mem_mb <<EOT
$RSK_PL
EOT
}
rsk_allow() { # rsk_allow WHAT VALUE LIST: a reason unless LIST (space separated, or *) holds VALUE
    [ "$3" != '*' ] || return 0
    for rsk_w in $3; do [ "$rsk_w" != "$2" ] || return 0; done
    RSK_REASONS="$RSK_REASONS$1 $2 is not allowed (allowed: $3)
"
}
rsk_ceiling() { # rsk_ceiling WHAT VALUE MAX: a reason when VALUE passes MAX
    [ -z "$3" ] || [ "$2" -le "$3" ] || RSK_REASONS="$RSK_REASONS$1 $2 exceeds the ceiling $3
"
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
        "max_active_jobs=$P_max_active_jobs" "default_time_min=$P_default_time_min" "default_mem_mb=$P_default_mem_mb"
    printf '%s' "$RSK_REASONS" | while IFS= read -r rsk_r; do
        rsk_emit policy-reason "msg=$(rsk_b64 "$rsk_r")"
    done
}
rsk_policy_show() {
    rsk_policy_load
    rsk_v="$RSK_PL|"
    for rsk_k in $RSK_POLICY_KEYS; do
        rsk_emit policy-rule "key=$rsk_k" "value=$(rsk_b64 "${rsk_v%%|*}")"
        rsk_v=${rsk_v#*|}
    done
    rsk_emit policy "source=$RSK_POLICY_SOURCE" "digest=$RSK_POLICY_DIGEST"
}

policy_main() { # the "policy" program's entry
    rsk_start
    [ "${1:-show}" = show ] || rsk_fail "$RSK_E_USAGE" usage "usage: policy show"
    rsk_policy_show
}
