# shellcheck shell=sh
# rsk doctor (cluster side): one @@check line per check of what the login node needs (INSTALL.md)

check() { rsk_emit check "name=$1" "result=$2" "msg=$(rsk_b64 "$3")" "hint=$(rsk_b64 "${4:-}")"; } # check NAME RESULT MESSAGE [HINT]

main() {
    rsk_start
    missing=''
    for c in sbatch squeue scontrol sinfo scancel base64 awk sed flock; do
        command -v "$c" >/dev/null 2>&1 || missing="$missing $c"
    done
    if [ -z "$missing" ]; then check commands pass "sbatch squeue scontrol sinfo scancel base64 awk sed flock found"
    else check commands fail "missing:$missing" "install Slurm's client commands, coreutils and util-linux (flock) on the login node"; fi
    if command -v sha256sum >/dev/null 2>&1 || command -v shasum >/dev/null 2>&1; then check sha256 pass "found"
    else check sha256 fail "neither sha256sum nor shasum" "install coreutils"; fi
    check version pass "$(sinfo -V 2>&1 | head -n 1)"
    if out=$(scontrol ping 2>&1) && printf '%s' "$out" | grep -q UP; then check controller pass "$(printf '%s' "$out" | tr '\n' ' ')"
    else check controller fail "$(printf '%s' "$out" | cut -c1-300 | head -n 3)" "the Slurm controller does not answer; ask the cluster admins"; fi
    conf=$(scontrol show config 2>/dev/null || true)
    if out=$(sacct -n -X -S now-1minute -o JobID 2>&1); then check sacct pass "sacct answers: charges settle on Slurm's accounting, even after squeue forgets a job"
    else check sacct unavailable "no accounting ($(printf '%s' "$out" | cut -c1-160 | head -n 1)): charges settle on squeue's word while it lists a job" \
        "rsk's run markers describe outcomes but never lower a charge; keep a broker running, or run rsk status, so each job's end is seen in time"; fi
    age=$(rsk_conf "$conf" MinJobAge)
    check min-job-age pass "MinJobAge = ${age:-unknown}: squeue lists a finished job this long; a charge whose end no rsk command or broker saw by then stays at its worst case where there is no accounting"
    # GPUs: without ConstrainDevices (cgroup.conf, with TaskPlugin task/cgroup) a job can reach every GPU of its node
    devices=$(rsk_conf "$conf" ConstrainDevices) cg=$(rsk_conf "$conf" SLURM_CONF)
    cg="${cg%/*}/cgroup.conf"
    [ -n "$devices" ] || devices=$(sed -n 's/^[[:space:]]*[Cc]onstrain[Dd]evices[[:space:]]*=[[:space:]]*//p' "$cg" 2>/dev/null | tail -n 1)
    case $devices:$(rsk_conf "$conf" TaskPlugin) in
        [Yy]es:*cgroup*) check devices pass "ConstrainDevices = yes: a job reaches only the GPUs Slurm allocated it" ;;
        *) check devices warn "the cluster does not constrain devices (ConstrainDevices = ${devices:-unset}): a job can use GPUs it was not allocated, and nobody is charged for them" \
            "ask the cluster admins for ConstrainDevices=yes in cgroup.conf and TaskPlugin=task/cgroup" ;;
    esac
    # a job's processes: only cgroups end every process a job started (linuxproc loses those that setsid away)
    case ${pt:=$(rsk_conf "$conf" ProctrackType)} in
        *cgroup*) check proctrack pass "ProctrackType = $pt: a job's processes end with the job" ;;
        *) check proctrack warn "ProctrackType = ${pt:-unset}: a job's processes that leave its process tree (setsid, a double fork) outlive the job and run uncharged" \
            "ask the cluster admins for ProctrackType=proctrack/cgroup" ;;
    esac
    if (rsk_policy_load) >/dev/null 2>&1; then rsk_policy_load; check policy pass "$RSK_POLICY_SOURCE policy ($RSK_ROOT/policy.conf), digest $RSK_POLICY_DIGEST"
    else check policy fail "$RSK_ROOT/policy.conf is invalid" "rsk info shows what is wrong with it"; fi
    parts=$(sinfo -h -o '%P %a %D %G' 2>/dev/null | tr '\n' ';')
    if [ -n "$parts" ]; then check partitions pass "$parts"; else check partitions fail "sinfo shows no partitions" ""; fi
    if (rsk_need_writable "$RSK_ROOT/journal") >/dev/null 2>&1; then check remote-root pass "$RSK_ROOT is writable"
    else check remote-root fail "$RSK_ROOT/journal is not writable" "fix permissions or free space under the remote root"; fi
    if out=$(sbatch --test-only --time=1 --mem=64 --wrap true 2>&1); then check test-only pass "$(printf '%s' "$out" | cut -c1-200 | head -n 3)"
    else check test-only fail "$(printf '%s' "$out" | cut -c1-300 | head -n 3)" "a small job cannot be scheduled; check partitions and limits"; fi
}
