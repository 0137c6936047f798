# status.awk (status.sh), behind RSK_AWK: joins stdin's sections (a line of the ledger's jobs, squeue's lines, "-- acct"
# sacct's, "-- markers" the ended markers and results, "-- steps" the leases and their steps) with the journal (jf, last).
function add(key, j) {
    if (!(key in job)) order[++n] = key
    job[key] = j; t_sub[key] = kv($0, "t"); k_rid[key] = rid; k_task[key] = task; k_idx[key] = idx; k_res[key] = kv($0, "res")
    k_lease[key] = kv($0, "lease"); k_needs[key] = kv($0, "needs"); k_dir[key] = runs "/" rid (idx != "" ? "/t" idx : "")
}
BEGIN {
    nonce = ENVIRON["RSK_NONCE"] # (from the environment: any user of the node can read a command line)
    srand(); now = srand()
}
NR == 1 { held_jobs($0, h_rid); next } # (a line, never an argument: 10,000 of them pass the kernel's limit on one)
FILENAME != jf && $0 == "-- " (part == "" ? "acct" : part == "acct" ? "markers" : "steps") && part != "steps" { part = substr($0, 4); next }
FILENAME != jf && part == "" { # squeue (rsk_squeue's lines)
    sq($0)
    if (index(SQ_NAME, prefix) != 1 && !(SQ_ID in h_rid) && !sq_under(runs)) next
    sq_state[SQ_ID] = SQ_STATE; sq_elapsed[SQ_ID] = secs(SQ_ELAPSED); sq_limit[SQ_ID] = secs(SQ_LIMIT); sq_where[SQ_ID] = clean(SQ_WHERE)
    sq_sh[SQ_ID] = sq_shape(); sq_part[SQ_ID] = clean(SQ_PART); sq_acct[SQ_ID] = clean(SQ_ACCOUNT); sq_qos[SQ_ID] = clean(SQ_QOS)
    # Slurm writes its output under the request's run directory: the request's job, whatever the journal lost
    if (sq_under(runs)) {
        o = substr(SQ_OUT, length(runs) + 2); sub(/\/.*/, "", o)
        if (is_rid(o)) { o_rid[SQ_ID] = o; o_idx[SQ_ID] = task_of(SQ_ID, SQ_OUT) }
    }
    next
}
FILENAME != jf && part == "acct" { # (no job name: a name can hold a line break, and so a forged line; jobs are known by id)
    split($0, f, "|")
    if (!is_job(f[1]) || (f[1] in ac_state)) next
    a = f[2]; sub(/ .*/, "", a); ac_state[f[1]] = a; split(f[3], ec, ":"); ac_exit[f[1]] = ec[1]
    ac_el[f[1]] = f[4] ~ /^[0-9]+$/ ? f[4] : ""; ac_lim[f[1]] = f[5] ~ /^[0-9]+$/ ? f[5] * 60 : ""
    next
}
FILENAME != jf && part == "markers" {
    sp = index($0, " "); file = sp ? substr($0, 1, sp - 1) : $0; body = sp ? substr($0, sp + 1) : ""
    dir = file; sub(/\/[^\/]*$/, "", dir)
    if (file ~ /\/result\/\.rsk-manifest$/) { sub(/\/result$/, "", dir); m_result[dir] = 1 }
    else { m_rc[dir] = kv(body, "rc"); m_sig[dir] = kv(body, "sig"); m_el[dir] = kv(body, "elapsed"); m_lim[dir] = kv(body, "limit"); m_stop[dir] = kv(body, "stop") }
    next
}
FILENAME != jf { # the leases, then their steps (rsk_lease_steps)
    split($0, f, " "); for (i in f) if (f[i] == "-") f[i] = ""
    if (f[1] == "L") { l_st[f[2]] = f[3]; l_job[f[2]] = f[4]; next }
    # a step: where it is in its lease's queue, and its lease's state (ended for a step that an earlier
    # allocation of the lease started: it went with that allocation)
    s = f[2]; st_q[s] = f[1]; st_lease[s] = l_st[f[6]]; st_node[s] = f[9]; st_why[s] = f[11]; st_ret[s] = f[12] != ""
    if (f[1] == "run" && f[14] != l_job[f[6]]) st_lease[s] = "ended"
    st_age[s] = f[10] ~ /^[0-9]+$/ ? now - f[10] : ""; st_limit[s] = f[8] ~ /^[0-9]+$/ ? f[8] * 60 : ""
    next
}
FNR <= upto + 0 { # the journal up to its line count before squeue ran (nj: its line number)
    if (++nj > after + 0 && after != "") print "@@" nonce " journal n=" nj " " $0
    ev = kv($0, "ev"); rid = kv($0, "rid"); task = kv($0, "task"); idx = kv($0, "idx"); j = kv($0, "job")
    if (!is_rid(rid) || (idx != "" && !is_idx(idx))) next
    key = rid SUBSEP idx
    if ((ev == "accepted" || ev == "reconciled") && is_job(j)) add(key, j)
    else if (ev == "step-started" && j ~ /^[0-9]+s[0-9]+$/) {
        # a lease's controller started it: counted, and listed even when nothing accepted it (rsk compares
        # every step with what its ledger allowed)
        starts[j]++
        if (!(key in job)) add(key, j)
        else if (job[key] != j && !((key SUBSEP j) in job)) add(key SUBSEP j, j)
    } else if (ev == "cancel-requested" || ev == "cancelled") cancel[j] = 1
}
END {
    if (after != "") print "@@" nonce " cursor lines=" nj + 0
    for (i = 1; i <= n; i++) { key = order[i]; listed[job[key]] = 1; if (job[key] ~ /_/) listed[substr(job[key], 1, index(job[key], "_") - 1)] = 1 }
    for (j in h_rid) if (!(j in listed)) { key = "held" SUBSEP j; order[++n] = key; job[key] = j; k_rid[key] = h_rid[j]; listed[j] = 1 }
    # (an array of one task: squeue may give its task as the array's own id, which the journal lists as A_I)
    for (j in o_rid) if (!(j in listed)) {
        key = "out" SUBSEP j; order[++n] = key; job[key] = j; k_rid[key] = o_rid[j]; k_idx[key] = o_idx[j]
        k_dir[key] = runs "/" o_rid[j] "/t" o_idx[j]
    }
    for (i = 1; i <= n; i++) { # (a held job has no run directory: d is "", which no marker has)
        key = order[i]; j = job[key]; d = k_dir[key]
        printf "@@%s job rid=%s task=%s idx=%s job=%s sq=%s sq_elapsed=%s sq_limit=%s where=%s ac=%s ac_exit=%s ac_elapsed=%s ac_limit=%s st=%s st_lease=%s st_node=%s st_age=%s st_limit=%s st_why=%s st_ret=%d rc=%s sig=%s elapsed=%s limit=%s cancel=%d submitted=%s res=%s sq_shape=%s sq_part=%s sq_account=%s sq_qos=%s needs=%s stop=%s result=%d lease=%s held=%d starts=%d\n", \
            nonce, k_rid[key], clean(k_task[key]), k_idx[key], j, sq_state[j], sq_elapsed[j], sq_limit[j], sq_where[j], \
            ac_state[j], ac_exit[j], ac_el[j], ac_lim[j], st_q[j], clean(st_lease[j]), clean(st_node[j]), st_age[j], \
            st_limit[j], clean(st_why[j]), st_ret[j], clean(m_rc[d]), clean(m_sig[d]), clean(m_el[d]), clean(m_lim[d]), \
            (j in cancel), clean(t_sub[key]), clean(k_res[key]), sq_sh[j], sq_part[j], sq_acct[j], sq_qos[j], \
            clean(k_needs[key]), clean(m_stop[d]), (d in m_result), clean(k_lease[key]), (j in h_rid), starts[j]
    }
}
