# rsk awk library: functions only, shipped in every program's header as RSK_AWK behind active(STATE) (written by
# rsk.wire.bundle from rsk.wire.states.ACTIVE) and put ahead of each awk program (awk "$RSK_AWK"'...'), so each fact
# below is read in one place on the cluster (docs/protocol.md, "The prelude"; docs/adr/0026).
function kv(line, key,    i, n, w) { # the value of key=value among the words of line ("" when absent)
    n = split(line, w, " ")
    for (i = 1; i <= n; i++) if (index(w[i], key "=") == 1) return substr(w[i], length(key) + 2)
    return ""
}
function seal(line) { return match(line, / h=[0-9a-f]+$/) ? substr(line, RSTART + 3) : "" } # a journal seal
function clean(s) { gsub(/[^A-Za-z0-9_.,:()\[\]+-]/, "_", s); return s } # one word, of what a job may write
function dash(v) { return v == "" ? "-" : v } # a word for an empty value, so fields keep their places
function is_rid(s) { return s ~ /^[A-Za-z0-9_][A-Za-z0-9._-]*$/ } # request ids and task keys
function is_idx(s) { return s ~ /^[0-9]+$/ && length(s) < 6 && s + 0 <= 10000 } # a task's index: a batch has 10,000
function is_job(s) { return s ~ /^[0-9]+(_[0-9]+|s[0-9]+)?$/ } # a job, an array task, a lease's step
# one line of rsk_squeue (its comment in lib.sh): what a job can set (out, name, comment) comes last
function sq(line,    f) {
    split(line, f, "|")
    SQ_ID = f[1]; SQ_STATE = f[2]; SQ_ELAPSED = f[3]; SQ_LIMIT = f[4]; SQ_WHERE = f[5]; SQ_SUBMIT = f[6]
    SQ_NODES = f[7]; SQ_CPUS = f[8]; SQ_MEM = f[9]; SQ_GPUS = f[10]; SQ_PART = f[11]; SQ_ACCOUNT = f[12]; SQ_QOS = f[13]
    SQ_OUT = f[14]; SQ_NAME = f[15]; SQ_COMMENT = f[16]
}
# after sq(): what Slurm holds for the job, "NODES,CPUS,MEM_MB,GPUS" (CPUS and GPUS in all, MEM_MB a node), "" where
# Slurm gives no numbers: its owner can raise a pending job's GRES, CPUs and memory past its plan (docs/adr/0041)
function sq_shape(    m, u) {
    if (SQ_NODES !~ /^[0-9]+$/ || SQ_CPUS !~ /^[0-9]+$/ || SQ_GPUS !~ /^[0-9]+$/) return ""
    m = SQ_MEM; u = m; sub(/^[0-9.]+/, "", u); m = substr(m, 1, length(m) - length(u)) + 0
    if (u == "K") m = m / 1024; else if (u == "G") m = m * 1024; else if (u == "T") m = m * 1048576
    return SQ_NODES "," SQ_CPUS "," int(m) "," SQ_GPUS
}
# the count of one TRES in squeue's tres-alloc ("cpu=4,mem=1000M,node=1,gres/gpu=2"), 0 when absent
function tres_count(s, key,    n, w, i) {
    n = split(s, w, ",")
    for (i = 1; i <= n; i++) if (index(w[i], key "=") == 1 && substr(w[i], length(key) + 2) ~ /^[0-9]+$/) return substr(w[i], length(key) + 2) + 0
    return 0
}
# the job of line sq() read writes under dir (Slurm's stdout path, "DIR/tN/stdout" or "DIR/t%a/stdout"): Slurm's
# word of where rsk sent it, which no rename, marker or journal edit of the job changes (docs/adr/0039)
function sq_under(dir) { return dir != "" && index(SQ_OUT, dir "/") == 1 }
# the ledger's jobs (" JOB:RID ...", rsk_held) as h[JOB] = RID: each looked up by id, whatever the queue's length
function held_jobs(s, h,    n, w, i) { n = split(s, w, " "); for (i = 1; i <= n; i++) h[substr(w[i], 1, index(w[i], ":") - 1)] = substr(w[i], index(w[i], ":") + 1) }
# after sq(): one of the project's active rsk jobs, the cap's count: named rsk:PROJECT: (p), held by the ledger
# (h: held_jobs, found by id whatever its name) or written by Slurm under the project's runs, active, and able to run:
# a task its array's throttle holds waits (rsk_squeue says so: JobArrayTaskLimit), and does not count (docs/adr/0059)
function project_active(p, h, runs) {
    return (index(SQ_NAME, p) == 1 || (SQ_ID in h) || sq_under(runs)) && active(SQ_STATE) && SQ_WHERE != "(JobArrayTaskLimit)"
}
# the task index of job j (A_K: task K of array A) from what Slurm keeps of where it runs, w: its stdout path (an
# array after a sweep's first writes ".../tB%Da/...", block B of 10^D tasks: B*10^D + K; ".../t%a/...": K) or its
# batch script's line "rsk_ti=$((O + ${SLURM_ARRAY_TASK_ID:-0}))" (O + K); task 0 of its own; "": none (ADR 0058, 0068)
function task_of(j, w,    k) {
    k = j ~ /_/ ? substr(j, index(j, "_") + 1) + 0 : 0
    if (match(w, /^rsk_ti=\$\(\([0-9]+ /)) k += substr(w, 11, RLENGTH - 11)
    else if (match(w, /\/t[0-9]*%[0-9]*a\//) && RLENGTH > 5) # "/tB%Da/": D one digit, 1 to 4 (a block of 10 to 10^4)
        k = match(w, /\/t[0-9]+%[1-4]a\//) ? k + substr(w, RSTART + 2, RLENGTH - 6) * 10 ^ substr(w, RSTART + RLENGTH - 3, 1) : ""
    return is_idx(k) ? k : ""
}
# one line of rsk_evidence_lines for the request named n (rsk:PROJECT:RID) whose run directory is d: 1 with EV_IDX,
# EV_JOB and EV_PLAN set (the plan from the job's comment rsk-plan:HASH, its started marker or its queue entry, "-"
# when the job does not say), else 0. Slurm's job is the request's by its name, or by where Slurm writes its output
# (sq_under: what a job that renamed itself cannot hide); a marker's and a queued step's lines name their task.
function evidence(line, n, d,    w) {
    if (line ~ /^[0-9]/) { sq(line); if (SQ_NAME != n && !sq_under(d)) return 0
        if ((EV_IDX = task_of(SQ_ID, SQ_OUT)) == "") return 0; EV_JOB = SQ_ID; EV_PLAN = SQ_COMMENT ~ /^rsk-plan:[0-9a-f]+$/ ? substr(SQ_COMMENT, 10) : "-"; return 1 }
    split(line, w, " ") # "M IDX JOB PLAN" (a started marker), "S IDX STEPID PLAN" (a step queued into a lease)
    if ((w[1] != "M" && w[1] != "S") || !is_idx(w[2]) || !is_job(w[3])) return 0
    EV_IDX = w[2] + 0; EV_JOB = w[3]; EV_PLAN = w[4] ~ /^[0-9a-f]+$/ ? w[4] : "-"; return 1
}
function secs(t,    dd, n, p, i, s) { # a Slurm duration ([D-]HH:MM:SS, MM:SS, ...) in seconds, "" for none
    if (t == "" || t ~ /UNLIMITED|INVALID|NOT_SET|N\/A/) return ""
    dd = 0; s = 0
    if (index(t, "-")) { dd = substr(t, 1, index(t, "-") - 1); t = substr(t, index(t, "-") + 1) }
    n = split(t, p, ":")
    for (i = 1; i <= n; i++) s = s * 60 + p[i]
    return dd * 86400 + s
}
# GRES, the one reader (Slurm's "gpu:N", "gpu:TYPE:N(IDX:..)", "gres/gpu:N", lists of them) and writer
function gpu_gres(g) { return g ~ /(^|,)gpu/ } # names GPUs
function gpu_share(idx,    n, x) { n = split(idx, x, ","); return "gpu:" n "(IDX:" idx ")" } # GPUs 0,2 as gpus says
function gres_gpus(g,    n, x, i, k, f, c) { # how many GPUs a node's GRES holds
    n = split(g, x, ","); c = 0
    for (i = 1; i <= n; i++) { sub(/^gres[:\/]/, "", x[i]); if (x[i] ~ /^gpu/) { sub(/\(.*/, "", x[i]); k = split(x[i], f, ":"); if (f[k] ~ /^[0-9]+$/) c += f[k] } }
    return c
}
