# shellcheck shell=sh
# rsk gpus: the cluster's own view of its GPUs. One @@N node line per node that has GPUs (name, state,
# partitions, GRES and GRES in use, both B64), then one @@N held line per GPU share a running job holds
# on a node (job id, job name B64, node, GRES with IDX B64, start time).

main() {
    rsk_start
    rsk_need scontrol
    nodes=$(scontrol -o show node -d 2>&1) \
        || rsk_fail "$RSK_E_UNAVAILABLE" slurm-unavailable "scontrol failed: $(printf '%s' "$nodes" | head -n 3 | cut -c1-300)"
    # one line per node: NAME|STATE|PARTITIONS|GRES|GRESUSED, only nodes whose GRES has a gpu
    printf '%s\n' "$nodes" | awk '
        {
            name = ""; state = ""; parts = ""; gres = ""; used = ""
            for (i = 1; i <= NF; i++) {
                k = $i; sub(/=.*/, "", k); v = substr($i, length(k) + 2)
                if (k == "NodeName") name = v
                else if (k == "State") state = v
                else if (k == "Partitions") parts = v
                else if (k == "Gres") gres = v
                else if (k == "GresUsed") used = v
            }
            if (name != "" && gres ~ /(^|,)gpu/) print name "|" state "|" parts "|" gres "|" used
        }' | while IFS='|' read -r name state parts gres used; do
        rsk_emit node "name=$name" "state=$state" "partitions=$parts" "gres=$(rsk_b64 "$gres")" \
            "used=$(rsk_b64 "$used")"
    done
    jobs=$(scontrol -o show job -d 2>&1) \
        || rsk_fail "$RSK_E_UNAVAILABLE" slurm-unavailable "scontrol failed: $(printf '%s' "$jobs" | head -n 3 | cut -c1-300)"
    # one line per node of a running job that holds GPUs there: JOB|NAME|NODE|GRES|START
    printf '%s\n' "$jobs" | awk '
        {
            id = ""; aid = ""; tid = ""; name = ""; st = ""; start = ""; node = ""; n = 0
            for (i = 1; i <= NF; i++) {
                k = $i; sub(/=.*/, "", k); v = substr($i, length(k) + 2)
                if (k == "JobId") id = v
                else if (k == "ArrayJobId") aid = v
                else if (k == "ArrayTaskId") tid = v
                else if (k == "JobName") name = v
                else if (k == "JobState") st = v
                else if (k == "StartTime") start = v
                else if (k == "Nodes") node = v
                else if (k == "GRES" && v ~ /^gpu/ && node != "") { n++; hn[n] = node; hg[n] = v }
            }
            if (st != "RUNNING") next
            if (aid != "" && tid != "" && tid ~ /^[0-9]+$/) id = aid "_" tid
            for (j = 1; j <= n; j++) print id "|" name "|" hn[j] "|" hg[j] "|" start
        }' | while IFS='|' read -r job name node gres start; do
        rsk_emit held "job=$job" "name=$(rsk_b64 "$name")" "node=$node" "gres=$(rsk_b64 "$gres")" "start=$start"
    done
}
