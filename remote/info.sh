# shellcheck shell=sh
# rsk info: what the cluster offers, one @@partition line per partition, then the policy

main() {
    rsk_start
    rsk_need sinfo
    out=$(sinfo -h -o '%P|%a|%l|%D|%c|%m|%G' 2>&1) \
        || rsk_fail "$RSK_E_UNAVAILABLE" slurm-unavailable "sinfo failed: $(printf '%s' "$out" | head -n 3 | cut -c1-300)"
    printf '%s\n' "$out" | while IFS='|' read -r name avail limit nodes cpus mem gres; do
        [ -n "$name" ] || continue
        default=0
        case $name in *'*') default=1 name=${name%'*'} ;; esac
        rsk_emit partition "name=$name" "default=$default" "state=$avail" "time=$limit" "nodes=$nodes" \
            "cpus=$cpus" "mem_mb=$mem" "gres=$(rsk_b64 "$gres")"
    done
    rsk_policy_show
}
