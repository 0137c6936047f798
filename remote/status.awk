# status.awk: joins the journal (main input), squeue (file sqf), run markers (file mkf) and sacct
# (file acf, empty where accounting is off).
# Used by status.sh; see the comment there for the output.
function secs(t,    d, n, p, i, s) {
    if (t == "" || t ~ /UNLIMITED|INVALID|NOT_SET|N\/A/) return ""
    d = 0
    if (index(t, "-")) { d = substr(t, 1, index(t, "-") - 1); t = substr(t, index(t, "-") + 1) }
    n = split(t, p, ":")
    s = 0
    for (i = 1; i <= n; i++) s = s * 60 + p[i]
    if (n == 2 && d == 0) s = p[1] * 60 + p[2]
    return d * 86400 + s
}
function kv(line, key,    i, n, w) {
    n = split(line, w, " ")
    for (i = 1; i <= n; i++) if (index(w[i], key "=") == 1) return substr(w[i], length(key) + 2)
    return ""
}
function clean(s) { gsub(/[ \t]/, "_", s); return s }
BEGIN {
    FS = " "
    while ((getline line < sqf) > 0) {
        split(line, f, "|")
        if (index(f[2], prefix) != 1) continue
        sq_state[f[1]] = f[3]; sq_elapsed[f[1]] = secs(f[4]); sq_limit[f[1]] = secs(f[5]); sq_where[f[1]] = clean(f[6])
    }
    while ((getline line < acf) > 0) {
        split(line, f, "|")
        if (index(f[2], prefix) != 1) continue
        ac_state[f[1]] = f[3]; split(f[4], ec, ":"); ac_exit[f[1]] = ec[1]
    }
    while ((getline line < mkf) > 0) {
        sp = index(line, " "); file = substr(line, 1, sp - 1); body = substr(line, sp + 1)
        dir = file; sub(/\/[^\/]*$/, "", dir)
        if (file ~ /\/started$/) { m_started[dir] = kv(body, "t") }
        else { m_rc[dir] = kv(body, "rc"); m_sig[dir] = kv(body, "sig"); m_el[dir] = kv(body, "elapsed"); m_lim[dir] = kv(body, "limit") }
    }
}
{
    if (after != "" && NR > after + 0) print "@@journal n=" NR " " $0
    ev = kv($0, "ev"); rid = kv($0, "rid"); task = kv($0, "task"); idx = kv($0, "idx")
    key = rid SUBSEP task
    if (ev == "accepted" || ev == "reconciled") {
        if (!(key in job)) order[++n] = key
        job[key] = kv($0, "job"); t_sub[key] = kv($0, "t"); k_rid[key] = rid; k_task[key] = task; k_res[key] = kv($0, "res")
        k_dir[key] = runs "/" rid (idx != "" ? "/t" idx : "")
    } else if (ev == "cancel-requested" || ev == "cancelled") {
        cancel[kv($0, "job")] = 1
    }
}
END {
    if (after != "") print "@@cursor lines=" NR
    for (i = 1; i <= n; i++) {
        key = order[i]; j = job[key]; d = k_dir[key]
        st = (j in sq_state) ? sq_state[j] : ""
        rc = (d in m_rc) ? m_rc[d] : ""; sig = (d in m_sig) ? m_sig[d] : ""
        elapsed = (j in sq_elapsed) ? sq_elapsed[j] : ((d in m_el) ? m_el[d] : "")
        limit = (j in sq_limit) ? sq_limit[j] : ((d in m_lim) ? m_lim[d] : "")
        if (st ~ /^(PENDING|CONFIGURING|REQUEUED|REQUEUE_HOLD|REQUEUE_FED|RESV_DEL_HOLD|SUSPENDED|STOPPED)$/) state = "pending"
        else if (st ~ /^(RUNNING|COMPLETING|SIGNALING|STAGE_OUT|RESIZING)$/) state = "running"
        else if (st == "TIMEOUT" || st == "DEADLINE") state = "timed-out"
        else if (st == "CANCELLED" || st == "PREEMPTED") state = "cancelled"
        else if (rc != "") {
            if (sig != "none" && sig != "") state = (limit != "" && elapsed + 5 >= limit + 0) ? "timed-out" : "cancelled"
            else state = (rc == 0) ? "succeeded" : "failed"
        }
        else if (st == "" && (j in ac_state)) {
            a = ac_state[j]; sub(/ .*/, "", a); rc = ac_exit[j]
            if (a == "COMPLETED") state = "succeeded"
            else if (a == "TIMEOUT" || a == "DEADLINE") state = "timed-out"
            else if (a == "CANCELLED" || a == "PREEMPTED") state = "cancelled"
            else if (a == "NODE_FAIL" || a == "BOOT_FAIL") state = "lost"
            else if (a ~ /^(PENDING|REQUEUED|SUSPENDED)$/) state = "pending"
            else if (a == "RUNNING") state = "running"
            else state = "failed"
        }
        else if (st == "COMPLETED") state = "succeeded"
        else if (st ~ /^(FAILED|OUT_OF_MEMORY|BOOT_FAIL)$/) state = "failed"
        else if (st == "NODE_FAIL") state = "lost"
        else if (slurm == "down") state = "unknown"
        else if (j in cancel) state = "cancelled"
        else state = "lost"
        printf "@@job rid=%s task=%s job=%s state=%s exit=%s sig=%s elapsed=%s limit=%s where=%s submitted=%s res=%s\n", \
            k_rid[key], k_task[key], j, state, rc, sig, elapsed, limit, (j in sq_where) ? sq_where[j] : "", t_sub[key], k_res[key]
    }
}
