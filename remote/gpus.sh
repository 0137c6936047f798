# shellcheck shell=sh
# rsk gpus: the cluster's own view of its GPUs: @@node per node with GPUs, @@held per GPU share a running job holds

main() {
    rsk_start
    rsk_need scontrol
    rsk_ask scontrol -o show node -d
    nodes=$RSK_A
    rsk_ask env SLURM_TIME_FORMAT=%s scontrol -a -o show job -d # times in epoch seconds (UTC), as rsk_squeue reads them
    # one pass over both: "node|NAME|STATE|PARTITIONS|GRES|GRESUSED" for each node whose GRES has GPUs, then
    # "held|JOB|NODE|GRES|START|NAME" for each node of a running job that holds GPUs there (a job's
    # record names its nodes, each followed by the GRES it holds on them; the name, which a job sets, last)
    printf '%s\n%s\n' "$nodes" "$RSK_A" | awk "$RSK_AWK"'
        {
            split("", v); n = 0
            for (i = 1; i <= NF; i++) {
                k = $i; sub(/=.*/, "", k); v[k] = substr($i, length(k) + 2)
                if (k == "GRES" && gpu_gres(v[k]) && v["Nodes"] != "") { n++; hn[n] = v["Nodes"]; hg[n] = v[k] }
            }
            if ("NodeName" in v && gpu_gres(v["Gres"])) print "node|" v["NodeName"] "|" v["State"] "|" v["Partitions"] "|" v["Gres"] "|" v["GresUsed"]
            if (!("JobId" in v) || v["JobState"] != "RUNNING") next
            id = v["JobId"]
            if (v["ArrayJobId"] != "" && v["ArrayTaskId"] ~ /^[0-9]+$/) id = v["ArrayJobId"] "_" v["ArrayTaskId"]
            for (j = 1; j <= n; j++) print "held|" id "|" hn[j] "|" hg[j] "|" v["StartTime"] "|" v["JobName"]
        }' | while IFS='|' read -r kind a b c d e; do
        case $kind in
            node) rsk_emit node "name=$a" "state=$b" "partitions=$c" "gres=$(rsk_b64 "$d")" "used=$(rsk_b64 "$e")" ;;
            held) rsk_emit held "job=$a" "name=$(rsk_b64 "$e")" "node=$b" "gres=$(rsk_b64 "$c")" "start=$d" ;;
        esac
    done
}
