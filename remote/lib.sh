# shellcheck shell=sh
# rsk remote library, part of every program (docs/protocol.md: "Programs", "The prelude", "The frame", "Values on
# the wire"). Nothing under the remote root is ever executed; a value from a user travels as "=literal" or base64.

# shellcheck disable=SC2034  # constants used by the entry scripts
RSK_PROTOCOL=2 RSK_RC=0 RSK_NONCE='' RSK_LOCKED='' RSK_T='' RSK_SINCE=''
RSK_SQ='' RSK_SLURM='' RSK_HELD='' # rsk_squeue's answer and up|down ("" before it); the ledger's jobs
# exit codes (docs/protocol.md, "Exit codes")
RSK_E_USAGE=2 RSK_E_POLICY=3 RSK_E_MISMATCH=5 RSK_E_CAP=7 RSK_E_UNAVAILABLE=69 RSK_E_SBATCH=70 RSK_E_ROOT=73 RSK_E_LOCKED=75 RSK_E_MISSING=78

# the frame -------------------------------------------------------------------
rsk_emit() { printf '@@%s' "$RSK_NONCE"; printf ' %s' "$@"; printf '\n'; } # rsk_emit KIND [key=value ...]: one @@ line
rsk_finish() { # the EXIT trap: releases a held lock and closes the output with @@NONCE done
    rsk_status=$?
    [ "$RSK_RC" -ne 0 ] || RSK_RC=$rsk_status
    [ -z "$RSK_LOCKED" ] || exec 9>&-
    [ -z "$RSK_NONCE" ] || printf '@@%s done rc=%s\n' "$RSK_NONCE" "$RSK_RC"
    exit "$RSK_RC"
}
rsk_start() { # every entry's main calls this first: reads the frame line
    trap rsk_finish EXIT
    RSK_USER=$(id -un)
    IFS=' ' read -r rsk_m rsk_v rsk_n || true
    case $rsk_n in *[!0-9a-f]* | '') rsk_n='' ;; esac
    if [ "${rsk_m:-}" != rsk-frame ] || [ "${rsk_v:-}" != "$RSK_PROTOCOL" ] || [ "${#rsk_n}" -ne 32 ]; then
        printf 'rsk: the first line on stdin must be "rsk-frame %s NONCE"\n' "$RSK_PROTOCOL" >&2
        RSK_RC=$RSK_E_USAGE
        exit "$RSK_E_USAGE"
    fi
    RSK_NONCE=$rsk_n
    rsk_trust_commands
}
rsk_fail() { # rsk_fail RC CODE MESSAGE: @@error line (RSK_EACH set: one job's @@missing, in fetch), then exit RC
    RSK_RC=$1
    rsk_emit "${RSK_EACH:-error}" "code=$2" "rc=$1" "msg=$(rsk_b64 "$3")"
    exit "$1"
}
rsk_bad() { rsk_fail "$RSK_E_USAGE" bad-request "the input is cut short"; } # rsk_take (the loader's) found the end early
rsk_need() { # rsk_need CMD...: each command exists on this login node (docs: requirements)
    for rsk_c in "$@"; do
        command -v "$rsk_c" >/dev/null 2>&1 \
            || rsk_fail "$RSK_E_MISSING" missing-command "the login node has no '$rsk_c' (rsk needs it; see rsk doctor)"
    done
}
# The commands rsk reads Slurm and its own files through: one that resolves to a file, or into a directory, the
# account can write, a job could have put there to answer for Slurm. A tripwire, not a fence (docs/security.md).
RSK_TRUSTED='sbatch squeue scontrol sinfo scancel sacct srun awk sed base64 sha256sum flock sort date id'
rsk_trust_commands() {
    [ ! -w / ] || return 0 # an account that can write / can write everything: nothing to tell apart
    for rsk_c in $RSK_TRUSTED; do
        rsk_which "$rsk_c" || continue
        case $RSK_P in /*) ;; *) rsk_fail "$RSK_E_MISSING" untrusted-command "'$rsk_c' is not a file on PATH here ($RSK_P)" ;; esac
        if [ -w "$RSK_P" ] || [ -w "${RSK_P%/*}/" ]; then
            rsk_fail "$RSK_E_MISSING" untrusted-command \
                "'$rsk_c' resolves to $RSK_P, which this account can write: a job could answer for it"
        fi
    done
}
rsk_which() { # rsk_which CMD: sets RSK_P to the file CMD runs, searched on PATH as the shell does, or fails; no fork
    RSK_P='' rsk_rest=$PATH:
    while [ -n "$rsk_rest" ]; do
        rsk_d=${rsk_rest%%:*} rsk_rest=${rsk_rest#*:}
        if [ -f "${rsk_d:-.}/$1" ] && [ -x "${rsk_d:-.}/$1" ]; then RSK_P=${rsk_d:-.}/$1; return 0; fi
    done
    return 1
}

# encoding ------------------------------------------------------------------
rsk_b64() { printf '%s' "$1" | base64 | tr -d '\n'; } # rsk_b64 STRING: base64 on one line
rsk_chunks() { base64 | RSK_NONCE=$RSK_NONCE awk '{ b = b $0; while (length(b) >= 4000) { print "@@" ENVIRON["RSK_NONCE"] " chunk " substr(b, 1, 4000); b = substr(b, 4001) } } END { if (b != "") print "@@" ENVIRON["RSK_NONCE"] " chunk " b }'; } # stdin as @@chunk lines of 4,000 base64 characters
rsk_enc() { # rsk_enc VALUE: sets RSK_E to the wire form of VALUE: "=LITERAL" when it can be one, else base64
    case $1 in *[!A-Za-z0-9._/:@+,-]*) RSK_E=$(rsk_b64 "$1") ;; *) RSK_E="=$1" ;; esac
}
rsk_dec() { # rsk_dec WIRE: sets RSK_V to the value (trailing newlines kept)
    case $1 in "="*) RSK_V=${1#=}; return 0 ;; '') RSK_V=''; return 0 ;; esac
    RSK_V=$(printf '%s' "$1" | base64 -d 2>/dev/null && printf x) \
        || rsk_fail "$RSK_E_USAGE" bad-encoding "a value is not valid base64"
    RSK_V=${RSK_V%x}
}
rsk_sq() { # rsk_sq STRING: the string single-quoted for sh (trailing newlines kept)
    case $1 in *"'"*) ;; *) printf "'%s'" "$1"; return 0 ;; esac
    rsk_q=$(printf '%sx' "$1" | sed "s/'/'\\\\''/g")
    printf "'%s'" "${rsk_q%x}"
}
rsk_hash() { RSK_H=$(printf '%s' "$1" | rsk_sha256); RSK_H=${RSK_H%% *}; } # RSK_H: the sha256 of STRING
rsk_hash_file() { RSK_H=$(rsk_sha256 <"$1"); RSK_H=${RSK_H%% *}; }        # RSK_H: the sha256 of the file's bytes

# validation ----------------------------------------------------------------
rsk_is_uint() { case $1 in '' | *[!0-9]*) return 1 ;; esac; }
rsk_decimal() { # rsk_decimal DIGITS: sets RSK_V to the number in decimal ("08" is 8, never octal)
    RSK_V=$1
    while :; do case $RSK_V in 0?*) RSK_V=${RSK_V#0} ;; *) break ;; esac; done
    [ "${#RSK_V}" -le 9 ] || rsk_fail "$RSK_E_USAGE" bad-number "the number $1 is too large"
}
rsk_need_line() { # rsk_need_line WHAT VALUE: sets RSK_V to VALUE, a line number (read as decimal)
    rsk_is_uint "$2" || rsk_fail "$RSK_E_USAGE" usage "$1 must be a line number"
    rsk_decimal "$2"
}
rsk_need_token() { # rsk_need_token WHAT VALUE: names safe in paths and job names: [A-Za-z0-9._-], 1..64, no leading . or -
    case $2 in '' | .* | -* | *[!A-Za-z0-9._-]*) ;; *) [ "${#2}" -gt 64 ] || return 0 ;; esac
    rsk_fail "$RSK_E_USAGE" "bad-$1" "$1 must be 1-64 characters of A-Z a-z 0-9 . _ - and not start with . or -"
}
rsk_is_job_id() { # a job (123), an array task (123_4) or a lease step (123s4)
    case $1 in '' | *[!0-9_s]* | [!0-9]* | *[!0-9]) return 1 ;; *_*_* | *s*s* | *_*s* | *s*_*) return 1 ;; esac
}
# rsk_need_writable DIR...: each exists and takes a new file, probed in a subshell (a failed redirection would end
# this shell before any error could be reported)
rsk_need_writable() {
    for rsk_dir in "$@"; do
        [ -d "$rsk_dir" ] || mkdir -p "$rsk_dir" 2>/dev/null || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot create $rsk_dir"
        (printf 'probe\n' >"$rsk_dir/.probe.$$") 2>/dev/null || { rm -f "$rsk_dir/.probe.$$" 2>/dev/null || true
            rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write under $rsk_dir (permissions or a full disk)"; }
        rm -f "$rsk_dir/.probe.$$"
    done
}
# rsk_lock PROJECT: the project's exclusive lock until exit (flock holds across login nodes sharing the root: ADR 0012).
# A job of the account can hold it for ever: after 30 s, lock-held (rc 75), well within the client's call (ADR 0056);
# at once when it is not a plain file (a FIFO would block an open for writing; read-write never blocks: ADR 0068)
rsk_lock() {
    rsk_need flock
    rsk_need_writable "$RSK_ROOT/journal"
    rsk_try_lock "$1" 30 || rsk_fail "$RSK_E_LOCKED" lock-held "the lock of project $1 ($RSK_ROOT/journal/$1.lock) has been held for 30 s by another process of the account (another rsk command of the project, or a job), or is not a plain file; rsk cancel works regardless"
}
rsk_try_lock() { { [ ! -e "$RSK_ROOT/journal/$1.lock" ] || [ -f "$RSK_ROOT/journal/$1.lock" ]; } && { command exec 9<>"$RSK_ROOT/journal/$1.lock"; } 2>/dev/null && flock -w "$2" 9 2>/dev/null && RSK_LOCKED=1; }
# The journal, $RSK_ROOT/journal/PROJECT.log: one event a line, appended in sealed blocks (docs/protocol.md,
# "The attempt journal"). rsk_block_start, then rsk_jline for each line, then rsk_journal_write.
rsk_block_start() { RSK_BLOCK='' RSK_T=''; } # the block's time is read when its first line is added
rsk_jline() { # rsk_jline EVENT RID PLAN IDX [key=value ...]: adds one line to RSK_BLOCK (empty values left out)
    [ -n "$RSK_T" ] || RSK_T=$(rsk_now)
    rsk_l="v=2 t=$RSK_T ev=$1 rid=$2 plan=$3 idx=$4"
    shift 4
    for rsk_kv in "$@"; do case $rsk_kv in *=) ;; *) rsk_l="$rsk_l $rsk_kv" ;; esac; done
    RSK_BLOCK="$RSK_BLOCK$rsk_l
"
}
rsk_jblock() { # rsk_jblock TEXT: RSK_BLOCK, the journal lines ("J LINE") of an awk pass's answer, as whole lines
    RSK_BLOCK=$(printf '%s\n' "$1" | sed -n 's/^J //p') && RSK_BLOCK=${RSK_BLOCK:+"$RSK_BLOCK
"}
}
# rsk_journal_write PROJECT: appends RSK_BLOCK as one sealed block (rsk_append; the project lock is held); returns
# nonzero (after an @@warning) when the disk refuses: callers decide whether that is fatal
rsk_journal_write() {
    [ -z "$RSK_BLOCK" ] || rsk_append "$RSK_ROOT/journal/$1.log" "$RSK_BLOCK" || {
        rsk_emit warning code=journal-unwritable "msg=$(rsk_b64 "cannot append to $RSK_ROOT/journal/$1.log")"
        return 1
    }
}
# rsk_job_runs PROJECT: "JOB RID IDX" for each job on stdin (a line each) the project's journal accepted, in one pass
# (job ids compared as whole strings); rsk_job_run PROJECT JOB: RSK_RID and RSK_RUN (the job's run directory) of one
# such job, or fail with not-ours
rsk_job_runs() {
    awk "$RSK_AWK"'NR == FNR { if (is_job($0)) want[$0] = 1; next }
        { e = kv($0, "ev"); r = kv($0, "rid"); i = kv($0, "idx"); j = kv($0, "job") }
        (e == "accepted" || e == "reconciled") && (j in want) && is_rid(r) && i ~ /^[0-9]*$/ { f[j] = r " " i }
        END { for (j in f) print j, f[j] }' - "$RSK_ROOT/journal/$1.log" 2>/dev/null || true
}
rsk_job_run() {
    rsk_is_job_id "$2" || rsk_fail "$RSK_E_USAGE" bad-job "job id must be a number (or ARRAY_INDEX, or a step's LEASEJOBsSEQ)"
    set -- "$1" "$2" "$(printf '%s\n' "$2" | rsk_job_runs "$1")" # "JOB RID IDX" (IDX may be empty)
    [ -n "$3" ] || rsk_fail "$RSK_E_USAGE" not-ours "job $2 was not launched through rsk in project $1"
    rsk_j=${3#* } rsk_i=${3##* } && RSK_RID=${rsk_j%% *} && RSK_RUN="$RSK_ROOT/runs/$1/$RSK_RID${rsk_i:+/t$rsk_i}"
}
# The ledger's word: RSK_HELD, "JOB:RID JOB:RID ", the jobs it holds (the authority for what rsk submitted), and
# RSK_SINCE, when it made its oldest hold whose outcome it does not know
rsk_held() { # rsk_held LIST: RSK_HELD from "JOB:RID,..."
    RSK_HELD=$(printf '%s\n' "$1" | tr ',' '\n' | awk -F: "$RSK_AWK"'NF == 0 { next }
        NF != 2 || !is_job($1) || !is_rid($2) { exit 1 }
        { printf "%s ", $0 }') || rsk_fail "$RSK_E_USAGE" bad-held "held jobs are JOB:REQUEST_ID words"
}
rsk_since() { # rsk_since EPOCH
    if ! rsk_is_uint "$1" || [ "${#1}" -gt 12 ]; then rsk_fail "$RSK_E_USAGE" bad-since "since is a time in epoch seconds"; fi
    RSK_SINCE=$1
}
rsk_read_held() { # RSK_HELD and RSK_SINCE from the optional "held LIST", then "since EPOCH", lines on stdin
    RSK_HELD='' rsk_w='' rsk_l=''
    IFS=' ' read -r rsk_w rsk_l || true
    [ "$rsk_w" != held ] || { rsk_held "$rsk_l"; rsk_w=''; IFS=' ' read -r rsk_w rsk_l || true; }
    [ "$rsk_w" != since ] || rsk_since "$rsk_l"
}

# Slurm (docs/protocol.md, "The prelude") -----------------------------------------
rsk_slurm_down() { # rsk_slurm_down TEXT: true when TEXT says the controller is unreachable
    case $1 in
        *"Unable to contact slurm controller"* | *"Socket timed out"* | *"Connection refused"* \
            | *"Zero Bytes were transmitted"* | *"slurm_load_"*"error"*) return 0 ;;
    esac
    return 1
}
# rsk_squeue: the one reader of Slurm's queue (its line: docs/protocol.md, "The prelude"): RSK_SQ and RSK_SLURM=up,
# or RSK_SQ='' and RSK_SLURM=down. One read, each field ended by a word made for it from the frame's nonce, which
# no job has seen: Slurm takes '|' and line breaks in a name, a comment and a GRES, so only that word tells where
# a field ends; an answer that does not split into whole records is no answer (docs/adr/0041). The pending tasks of
# an array come as one record, "A_[LIST%K]" (SLURM_BITSTR_LEN=0: all of it), K its throttle: a line each, those past
# the places its running tasks leave under K reading JobArrayTaskLimit, the others never (docs/adr/0059).
RSK_SQ_N=0 RSK_SQ_FIELDS='JobArrayID State TimeUsed TimeLimit ReasonList SubmitTime NumNodes NumCPUs MinMemory
tres-per-node tres-per-job tres-per-task tres-per-socket tres-alloc NumTasks Partition Account QOS RestartCnt StdOut
Name Comment'
rsk_squeue() {
    RSK_SQ_N=$((RSK_SQ_N + 1))
    rsk_t=$(printf '%s %s' "$RSK_NONCE" "$RSK_SQ_N" | sha256sum)
    rsk_t=rsk${rsk_t%"${rsk_t#????????????????}"} rsk_o=''
    for rsk_c in $RSK_SQ_FIELDS; do rsk_o=$rsk_o${rsk_o:+,}$rsk_c:$rsk_t; done
    if rsk_q=$(SLURM_BITSTR_LEN=0 SLURM_TIME_FORMAT=%s squeue -a -h -u "$RSK_USER" -t all -O "$rsk_o" 2>/dev/null) \
        && RSK_SQ=$(printf '%s\n' "$rsk_q" | awk -v t="$rsk_t" "$RSK_AWK"'
            { n = split($0 "\n", p, t); v[k + 1] = v[k + 1] p[1]; for (i = 2; i <= n; i++) { if (++k == 22) { one(); k = 0 } v[k + 1] = p[i] } }
            function one(    c, g, x, f) { # a record: fields v[1..22]
                for (f = 2; f <= 22; f++) { sub(/\|.*/, "", v[f]); gsub(/\n/, "?", v[f]) }
                sub(/^\n/, "", v[1]); id[++m] = v[1]; why[m] = v[5]
                c = v[8] ~ /^[0-9]+$/ ? v[8] + 0 : 1; x = tres_count(v[14], "cpu"); if (x > c) c = x
                g = gres_gpus(v[10]) * (v[7] ~ /^[0-9]+$/ ? v[7] : 1)
                x = gres_gpus(v[11]); if (x > g) g = x
                x = gres_gpus(v[12]) * (v[15] ~ /^[0-9]+$/ ? v[15] : c); if (x > g) g = x
                x = gres_gpus(v[13]) * c; if (x > g) g = x
                x = tres_count(v[14], "gres/gpu"); if (x > g) g = x
                if (v[19] + 0 > 0) v[3] = v[4]
                a[m] = v[2] "|" v[3] "|" v[4]; b[m] = v[6] "|" v[7] "|" c "|" v[9] "|" g "|" v[16] "|" v[17] "|" v[18] "|" v[20] "|" v[21] "|" v[22]
                if (v[1] ~ /_[0-9]+$/ && v[2] != "PENDING" && active(v[2])) busy[substr(v[1], 1, index(v[1], "_") - 1)]++
            }
            END {
                if (k || v[1] != "\n") exit 1
                for (i = 1; i <= m; i++) {
                    if (is_job(id[i])) { print id[i] "|" a[i] "|" why[i] "|" b[i]; continue }
                    if (id[i] !~ /^[0-9]+_\[[0-9,:%-]+\]$/) exit 1
                    j = substr(id[i], 1, index(id[i], "_") - 1); x = substr(id[i], length(j) + 3); sub(/\]$/, "", x)
                    thr = index(x, "%"); lim = thr ? substr(x, thr + 1) - busy[j] : 0; sub(/%.*/, "", x); c = split(x, r, ",")
                    w = why[i] == "(JobArrayTaskLimit)" ? "(None)" : why[i] # (a reason Slurm has not yet renewed)
                    for (q = 1; q <= c; q++) { # "I", "I-J" or "I-J:STEP"
                        split(r[q], e, /[-:]/); st = e[3] > 0 ? e[3] : 1
                        for (y = e[1] + 0; y <= (e[2] == "" ? e[1] : e[2]) + 0; y += st)
                            print j "_" y "|" a[i] "|" (thr && a[i] ~ /^PENDING/ && lim-- <= 0 ? "(JobArrayTaskLimit)" : w) "|" b[i]
                    }
                }
            }'); then
        RSK_SLURM=up
    else
        RSK_SQ='' RSK_SLURM=down
    fi
}
rsk_conf() { printf '%s\n' "$1" | sed -n "s/^$2 *= *//p"; } # rsk_conf CONFIG KEY: a value of scontrol show config
rsk_ask() { # rsk_ask CMD [ARG ...]: RSK_A, what the Slurm command says, or fail slurm-unavailable with its first lines
    RSK_A=$("$@" 2>&1) || rsk_fail "$RSK_E_UNAVAILABLE" slurm-unavailable "$1 failed: $(printf '%s' "$RSK_A" | head -n 3 | cut -c1-300)"
}
rsk_need_slurm() { # rsk_need_slurm: a fresh rsk_squeue, or fail: nothing can be decided without Slurm's word
    rsk_squeue
    [ "$RSK_SLURM" = up ] || rsk_fail "$RSK_E_UNAVAILABLE" slurm-unavailable "squeue failed: the controller does not answer"
}
rsk_sq_leases() { # rsk_sq_leases PROJECT: RSK_SQ cut to the lines of the project's leases' jobs, for rsk_lease in a loop
    RSK_SQ=$({ cat "$RSK_ROOT/leases/$1"/*/lease 2>/dev/null; echo --; printf '%s\n' "$RSK_SQ"; } | awk "$RSK_AWK"'
        $0 == "--" { p = 1; next } !p { j[kv($0, "job")]; next } { sq($0) } SQ_ID in j')
}
rsk_active_jobs() { # rsk_active_jobs PROJECT: ACTIVE and ACTIVE_JOBS (J,J,...), the project's jobs its cap counts (lib.awk)
    [ -n "$RSK_SLURM" ] || rsk_squeue
    rsk_a=$(printf '%s\n' "$RSK_HELD" "$RSK_SQ" | awk -v p="rsk:$1:" -v runs="$RSK_ROOT/runs/$1" "$RSK_AWK"'NR == 1 { held_jobs($0, h); next }
        { sq($0) } project_active(p, h, runs) { printf "%s%s", (n++ ? "," : ""), SQ_ID } END { print " " n + 0 }')
    ACTIVE=${rsk_a##* } ACTIVE_JOBS=${rsk_a% *}
}
# rsk_evidence_lines PROJECT RID: what Slurm and the run markers know of the request's jobs, for lib.awk's
# evidence(): squeue's lines, then "M IDX JOB PLAN" from the started markers (what the job wrote in its task's run
# directory tIDX), then "S IDX STEPID PLAN" for the steps queued into a lease
rsk_evidence_lines() {
    rsk_runs="$RSK_ROOT/runs/$1/$2"
    [ -n "$RSK_SLURM" ] || rsk_squeue
    printf '%s\n' "$RSK_SQ"
    set -- "$1" "$2" "$rsk_runs"/t*/started # a glob that matches nothing is skipped (read from there: short names)
    [ ! -f "$3" ] || (cd "$rsk_runs" && awk "$RSK_AWK"'{ i = substr(FILENAME, 2); sub(/\/.*/, "", i) }
        is_job(kv($0, "job")) { print "M", i, kv($0, "job"), dash(kv($0, "plan")) }' t*/started 2>/dev/null) || true
    [ ! -d "$RSK_ROOT/leases/$1" ] || rsk_lease_steps "$1" | awk -v rid="$2" '$3 == rid { print "S", $4, $2, $5 }'
}
# rsk_script_runs PROJECT EXCEPT: "RID IDX JOB PLAN" for each job of the account Slurm lists (ended ones too, until it
# forgets them) since RSK_SINCE that the ledger does not hold and EXCEPT (" JOB ") does not name, whose batch script
# (Slurm's copy: ADR 0039) runs task IDX (task_of) in request RID's run directory of PROJECT, with the plan it names
# ("-": none); "? JOB" for each whose script the controller does not give (it could be one)
rsk_script_runs() {
    [ -n "$RSK_SLURM" ] || rsk_squeue
    for rsk_j in $(printf '%s\n' "$RSK_HELD" "$2" "$RSK_SQ" | awk -v since="${RSK_SINCE:-0}" "$RSK_AWK"'NR == 1 { held_jobs($0, h) }
            NR == 2 { n = split($0, w, " "); for (i = 1; i <= n; i++) h[w[i]] = 1 } NR < 3 { next }
            { sq($0) } SQ_SUBMIT ~ /^[0-9]+$/ && SQ_SUBMIT + 0 >= since + 0 && !(SQ_ID in h) { print SQ_ID }'); do
        if rsk_s=$(scontrol write batch_script "$rsk_j" - 2>&1); then
            printf '%s\n' "$rsk_s" | awk -v j="$rsk_j" -v runs="'$RSK_ROOT/runs/$1/" -v tail="'/t\"\$rsk_ti\"" "$RSK_AWK"'
                d == "" && index($0, "rsk_run=" runs) == 1 && substr($0, length($0) - length(tail) + 1) == tail {
                    d = substr($0, 9 + length(runs), length($0) - 8 - length(runs) - length(tail)) }
                p == "" && index($0, "rsk_plan=") == 1 { p = substr($0, 10) }
                ti == "" && index($0, "rsk_ti=") == 1 { ti = $0 }
                END { if (is_rid(d)) print (i = task_of(j, ti)) == "" ? "? " j : d " " i " " j " " (p ~ /^[0-9a-f]+$/ ? p : "-") }'
        else # no batch script: not sbatch's (salloc, srun) or gone since the queue was read, unless Slurm is down
            ! rsk_slurm_down "$rsk_s" || printf '? %s\n' "$rsk_j"
        fi
    done
}

# leases (docs/leases.md, "On the cluster") ------------------------------------------
# rsk_lease PROJECT NAME [JOB RID]: the one reader of a lease: LDIR, L (its file's line, "" for none), L_job and L_rid
# (the file's, or JOB and RID: the ledger's, which no job of the account can rewrite), L_ctl (its controller's line, ""
# unless it speaks for L_job), L_sq (L_job's state while it is active AND named rsk:PROJECT:RID, or is the ledger's JOB
# whatever its name, else "": a reused job id is never taken for the lease from the file) and L_state (closed or ended
# without an allocation, pending while it waits for one, else what its controller says, starting before it says)
rsk_lease() {
    LDIR=$RSK_ROOT/leases/$1/$2 L='' L_ctl='' L_sq=''
    [ ! -f "$LDIR/lease" ] || IFS= read -r L <"$LDIR/lease" || true
    [ ! -f "$LDIR/ctl" ] || IFS= read -r L_ctl <"$LDIR/ctl" || true
    rsk_get "$L" rid; L_rid=${4:-$RSK_F}
    rsk_get "$L" job; L_job=${3:-$RSK_F}
    rsk_get "$L_ctl" job
    [ "$RSK_F" = "$L_job" ] || L_ctl=''
    [ -n "$RSK_SLURM" ] || rsk_squeue
    ! rsk_is_uint "$L_job" || L_sq=$(printf '%s\n' "$RSK_SQ" | awk -v j="$L_job" -v n="rsk:$1:$L_rid" -v held="${3:+1}" "$RSK_AWK"'
        { sq($0) } SQ_ID == j && (held || SQ_NAME == n) && active(SQ_STATE) { print SQ_STATE; exit }')
    rsk_get "$L_ctl" state
    case $L_sq in
        '') if [ -f "$LDIR/closed" ]; then L_state=closed; else L_state=ended; fi ;;
        PENDING) L_state=pending ;;
        *) L_state=${RSK_F:-starting} ;;
    esac
}
# rsk_unqueue LDIR SEQ WHY: a queued step leaves the queue for end/, never to start. Moving its .step file
# is the claim; the controller claims the same way (q/ -> run/), so one of the two wins
rsk_unqueue() {
    mv "$1/q/$2.step" "$1/end/$2.step" 2>/dev/null || return 1
    printf '%s\n' "$3" >"$1/end/$2.why"
    mv "$1/q/$2.sh" "$1/end/$2.sh" 2>/dev/null || true
}
# rsk_lease_steps PROJECT: "WHERE(q|run|end) STEPID RID IDX PLAN LEASE SEQ TIME NODE START WHY RC GPUS ALLOC(the job
# that started it)", "-" for unknown, a step of the project's leases. Listed q/, run/, end/ in that order, an entry
# gone from where it was listed read where it went: no step missed nor listed twice.
rsk_lease_steps() {
    for rsk_d in "$RSK_ROOT/leases/$1"/*/; do
        for rsk_f in "$rsk_d"q/*.step "$rsk_d"run/*.step "$rsk_d"end/*.step; do # (one moved on since is read where it went)
            case $rsk_f in *"/*.step") ;; *) printf '%s\n' "$rsk_f" ;; esac
        done
    done | awk "$RSK_AWK"'
        function one(f,    l) { l = ""; if ((getline l < f) <= 0) l = ""; close(f); return l }
        {
            n = split($0, p, "/"); where = p[n - 1]; lease = p[n - 2]; seq = p[n]; sub(/\.step$/, "", seq)
            dir = substr($0, 1, length($0) - length(p[n - 1] "/" p[n]))
            s = one($0)
            if (s == "" && where == "q") { where = "run"; s = one(dir "run/" seq ".step") }
            if (s == "" && where == "run") { where = "end"; s = one(dir "end/" seq ".step") }
            j = kv(s, "job")
            if (j !~ /^[0-9]+s[0-9]+$/ || !is_rid(kv(s, "rid")) || kv(s, "idx") !~ /^[0-9]+$/) next
            b = dir where "/" seq; at = one(b ".at")
            if (!(j in out)) order[++m] = j
            out[j] = where " " j " " kv(s, "rid") " " kv(s, "idx") " " dash(kv(s, "plan")) " " lease " " kv(s, "seq") " " \
                dash(kv(s, "time")) " " dash(kv(at, "node")) " " dash(kv(at, "start")) " " dash(clean(one(b ".why"))) " " \
                dash(clean(one(b ".rc"))) " " dash(kv(s, "gpus")) " " dash(kv(at, "job"))
        }
        END { for (i = 1; i <= m; i++) print out[order[i]] }'
}
