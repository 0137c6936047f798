# shellcheck shell=sh
# rsk reconcile PROJECT (stdin: optional "held" and "since" lines): every task whose last journal event is an intent
# is reconciled from evidence (rsk_evidence_lines, then rsk_script_runs: ADR 0039), left unresolved while Slurm does
# not give the script of a job that could be its own, else abandoned (the lock is held: the writer died before
# sbatch); with since, a job whose script runs a task no open intent names is reported (unknown=). Never
# resubmits (docs/protocol.md, "Other entries").

main() {
    rsk_start
    rsk_read_held
    [ $# -eq 1 ] || rsk_fail "$RSK_E_USAGE" usage "usage: reconcile PROJECT"
    rsk_need_token project "$1"
    project=$1 runs=$RSK_ROOT/runs/$1 jf=$RSK_ROOT/journal/$1.log
    open='' found='' results='' count=0
    rsk_block_start
    rsk_lock "$project"
    [ -f "$jf" ] || jf=/dev/null
    # "rid idx i plan task" of every task whose last event is an intent (exact fields, never patterns; i: idx or 0)
    open=$(awk "$RSK_AWK"'
        {
            r = kv($0, "rid"); e = kv($0, "ev"); i = dash(kv($0, "idx"))
            if (!is_rid(r) || (i != "-" && !is_idx(i)) || e !~ /^(intent|accepted|reconciled|abandoned|failed|refused)$/) next
            k = r " " i
            if (!(k in last)) order[++n] = k
            last[k] = e; plan[k] = kv($0, "plan"); task[k] = kv($0, "task"); num[k] = i == "-" ? 0 : i
        }
        END { for (x = 1; x <= n; x++) { k = order[x]; if (last[k] == "intent") print k, num[k], plan[k], dash(task[k]) } }' "$jf")
    if [ -n "$open" ]; then
        rsk_need_slurm # one read of the queue, each request's evidence gathered once ("@ RID IDX JOB": its first per task)
        count=$(printf '%s\n' "$open" | awk 'END { print NR }')
        found="$({ for rid in $(printf '%s\n' "$open" | awk '!s[$1]++ { print $1 }'); do
            rsk_evidence_lines "$project" "$rid" | awk -v r="$rid" -v n="rsk:$project:$rid" -v d="$runs/$rid" \
                "$RSK_AWK"'evidence($0, n, d) && !(EV_IDX in s) { s[EV_IDX] = 1; print "@", r, EV_IDX, EV_JOB }'
        done; printf '%s\n' "$open"; } | awk '$1 == "@" { job[$2 " " $3] = $4; next } { print $0, (($1 " " $3) in job ? job[$1 " " $3] : "-") }')
"
    fi
    # the account's jobs that no book or journal line holds, since the ledger's oldest unknown outcome, by batch script:
    # for an intent with no evidence, and (with since) for a task whose every journal line a job may have erased
    scripts='' unknown=''
    case $found in *" -
"*) RSK_SINCE=${RSK_SINCE:-0} ;; esac
    if [ -n "$RSK_SINCE" ]; then
        [ -n "$RSK_SLURM" ] || rsk_need_slurm
        known=$(awk "$RSK_AWK"'kv($0, "ev") ~ /^(accepted|reconciled)$/ { printf "%s ", kv($0, "job") }' "$jf")
        scripts=$(rsk_script_runs "$project" "${known:-} $(printf '%s' "$found" | awk '$6 != "-" { printf "%s ", $6 }')")
        # unknown: jobs whose script Slurm does not give, and those whose script runs a task no open intent names: any
        # may be a request's (hidden by a job of the account, or a script of its own that claims it): never adopted
        unknown=$({ printf '%s' "$found"; echo --; printf '%s\n' "$scripts"; } | awk '$0 == "--" { p = 1; next } !p { seen[$1 " " $3]; next }
            $1 == "?" || (NF && !(($1 " " $2) in seen)) { printf "%s%s", s, ($1 == "?" ? $2 : $3); s = "," }')
    fi
    # each open intent: reconciled to its job (the evidence's, else a batch script's), left open while a job Slurm
    # lists may be its own (unknown), else abandoned; its journal line ("J ...") and its answer, in one pass
    out=$({ printf '%s\n' "$scripts"; echo --; printf '%s' "$found"; } | RSK_NONCE=$RSK_NONCE awk -v t="$(rsk_now)" -v u="$unknown" '
        $0 == "--" { p = 1; next } !p { if (NF == 4 && !(($1 " " $2 + 0) in s)) s[$1 " " $2 + 0] = $3; next }
        NF == 6 {
            k = $5 == "-" ? "" : $5; j = $6 != "-" ? $6 : ($1 " " $3 + 0) in s ? s[$1 " " $3 + 0] : ""
            r = j != "" ? "reconciled" : u != "" ? "unresolved" : "abandoned"
            l = "J v=2 t=" t " ev=" r " rid=" $1 " plan=" $4 " idx=" ($2 == "-" ? "" : $2) (k == "" ? "" : " task=" k)
            if (r != "unresolved") print l (r == "reconciled" ? " job=" j : " code=no-evidence")
            print "@@" ENVIRON["RSK_NONCE"] " reconcile rid=" $1 " idx=" $3 " task=" k " plan=" $4 " result=" r " job=" j \
                " unknown=" (r == "unresolved" ? u : "")
        }')
    rsk_jblock "$out"
    rsk_journal_write "$project" || rsk_fail "$RSK_E_ROOT" root-unwritable "cannot write the journal"
    printf '%s\n' "$out" | sed -n '/^@@/p'
    # stale stages: a job killed before its wrapper could publish or set aside its $RSK_OUT leaves out.stage; once Slurm
    # runs it no more (one pass: the active jobs, each stage's marker), partial/, never a result (a step's: left alone)
    stale=0
    [ -n "$RSK_SLURM" ] || rsk_squeue
    if [ "$RSK_SLURM" = up ]; then
        rsk_active_jobs "$project"
        stale=$({ printf '%s\n' "$ACTIVE_JOBS" | tr ',' '\n'; echo --; printf '%s\n' "$runs"/*/t*/out.stage; } \
            | awk "$RSK_AWK"'$0 == "--" { p = 1; next } !p { a[$0]; next } { d = substr($0, 1, length($0) - 10); f = d "/started"
                if ((getline m < f) > 0 && (j = kv(m, "job")) != "" && j !~ /s/ && !(j in a)) print d; close(f) }' \
            | while IFS= read -r d; do [ ! -d "$d/out.stage" ] || { rm -rf "$d/partial" && mv "$d/out.stage" "$d/partial" && echo; }
            done | awk 'END { print NR }')
    fi
    rsk_emit reconciled "open=$count" "stale=$stale" "unknown=$unknown"
}
