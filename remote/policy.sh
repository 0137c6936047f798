# shellcheck shell=sh
# rsk cluster policy: the rules the cluster enforces whatever the local ledger says, from $RSK_ROOT/policy.conf
# (docs/protocol.md, "The cluster policy"). Part of submit, doctor and info (which prints the effective policy).
# Its digest is bound into every plan: a changed policy changes every plan hash.
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
# rsk_policy_check SHAPES PARTITION ACCOUNT QOS JOBS: RSK_VERDICT, and RSK_REASONS (a line each, each once) over every
# shape of SHAPES ("NODES CPUS MEM_MB GPUS TIME_MIN" a line) and the JOBS it queues at once against the active cap
# (a batch over the cap could never be submitted); an empty account or QOS is always allowed
rsk_policy_check() {
    RSK_REASONS=$(printf '%s\n' "$1" | awk -v part="$2" -v acct="$3" -v qos="$4" -v jobs="$5" -v cap="$P_max_active_jobs" -v parts="$P_partitions" \
        -v accts="$P_accounts" -v qoss="$P_qos" -v mn="$P_max_nodes" -v mc="$P_max_cpus" -v mm="$P_max_mem_mb" \
        -v mg="$P_max_gpus" -v mt="$P_max_time_min" '
        function say(r) { if (!(r in seen)) print r; seen[r] = 1 }
        function allow(what, v, list,    l) { l = " " list " "; gsub(/[ \t]+/, " ", l)
            if (v != "" && list != "*" && !index(l, " " v " ")) say(what " " v " is not allowed (allowed: " list ")") }
        function ceil(what, v, max) { if (max != "" && v + 0 > max + 0) say(what " " v " exceeds the ceiling " max) }
        BEGIN { if (cap != "" && jobs + 0 > cap + 0) say(jobs " jobs queued at once exceed the cap of " cap " active jobs: give --max-running K (K <= " cap "), still one launch") }
        NF { allow("partition", part, parts); allow("account", acct, accts); allow("qos", qos, qoss); ceil("nodes", $1, mn)
            ceil("cpus per node", $2, mc); ceil("memory per node (MB)", $3, mm); ceil("gpus per node", $4, mg)
            ceil("time limit (min)", $5, mt) }')
    if [ -z "$RSK_REASONS" ]; then RSK_VERDICT=allow; else RSK_VERDICT=refuse RSK_REASONS="$RSK_REASONS
"; fi
}
rsk_policy_emit() { # @@policy lines: the verdict and each reason
    rsk_emit policy "verdict=$RSK_VERDICT" "source=$RSK_POLICY_SOURCE" "digest=$RSK_POLICY_DIGEST" # (the cap: @@active)
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
