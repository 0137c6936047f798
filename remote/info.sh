# shellcheck shell=sh
# rsk info: what the cluster offers, one @@partition line per partition, then the policy

main() {
    rsk_start
    rsk_need sinfo
    rsk_ask sinfo -h -o '%P|%a|%l|%D|%c|%m|%G'
    printf '%s\n' "$RSK_A" | while IFS='|' read -r name avail limit nodes cpus mem gres; do
        [ -n "$name" ] || continue
        default=0
        case $name in *'*') default=1 name=${name%'*'} ;; esac
        rsk_emit partition "name=$name" "default=$default" "state=$avail" "time=$limit" "nodes=$nodes" \
            "cpus=$cpus" "mem_mb=$mem" "gres=$(rsk_b64 "$gres")"
    done
    rsk_policy_show
}
