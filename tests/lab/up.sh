#!/bin/sh
# Bring up the rsk lab cluster on this machine (Debian 12, as root): a real Slurm with
# munge, two slurmd "nodes" with fake GPUs, and an sshd on 127.0.0.1 for an
# unprivileged cluster user. Idempotent: a second run leaves a healthy cluster.
#
# Environment (all optional):
#   RSK_LAB_DIR    state directory (keys, sshd config)       default /var/lib/rsk-lab
#   RSK_LAB_USER   the unprivileged cluster user             default rsklab
#   RSK_LAB_PORT   sshd port on 127.0.0.1                    default 2222
#   RSK_LAB_JUMP_PORT  a second sshd used as a jump host     default 2223
set -eu

LAB_DIR=${RSK_LAB_DIR:-/var/lib/rsk-lab}
LAB_USER=${RSK_LAB_USER:-rsklab}
LAB_PORT=${RSK_LAB_PORT:-2222}
JUMP_PORT=${RSK_LAB_JUMP_PORT:-2223}
HOST=$(hostname)
SLURM_ETC=/etc/slurm

say() { printf 'lab: %s\n' "$*" >&2; }
die() { printf 'lab: error: %s\n' "$*" >&2; exit 1; }

need_root() {
    [ "$(id -u)" -eq 0 ] || die "run as root (it installs packages and starts daemons)"
}

install_packages() {
    missing=""
    for pkg in slurm-wlm munge openssh-server openssh-client; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' \
            || missing="$missing $pkg"
    done
    if [ -n "$missing" ]; then
        say "installing:$missing"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        # shellcheck disable=SC2086  # word splitting of the package list is intended
        apt-get install -y -qq $missing >/dev/null
    fi
}

write_if_changed() { # write_if_changed FILE: stdin becomes FILE; prints "changed" when it did
    tmp="$1.tmp.$$"
    cat >"$tmp"
    if [ -f "$1" ] && cmp -s "$tmp" "$1"; then
        rm -f "$tmp"
    else
        mv "$tmp" "$1"
        echo changed
    fi
}

setup_munge() {
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    chmod 0755 /run/munge
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        pkill -x munged 2>/dev/null || true
        rm -f /run/munge/munged.pid
        runuser -u munge -- /usr/sbin/munged
        i=0
        until munge -n 2>/dev/null | unmunge >/dev/null 2>&1; do
            i=$((i + 1)); [ "$i" -lt 50 ] || die "munged did not start"
            sleep 0.1
        done
    fi
    say "munge ok"
}

make_fake_gpus() {
    for n in 0 1 2 3; do
        [ -e "/dev/fakegpu$n" ] || mknod "/dev/fakegpu$n" c 1 3
    done
}

write_slurm_conf() {
    mkdir -p "$SLURM_ETC" /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm
    chown slurm:slurm /var/lib/slurm/slurmctld /var/log/slurm
    changed=$(write_if_changed "$SLURM_ETC/slurm.conf" <<CONF
# rsk lab cluster: written by tests/lab/up.sh
ClusterName=rsklab
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=slurm
SlurmctldPort=16817
SlurmdPort=17001
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd/%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
JobAcctGatherType=jobacct_gather/none
MinJobAge=30
# room for a 10,000-task sweep (bench/run.sh scale) beside the suites' jobs; MaxArraySize stays Slurm's 1001,
# so a sweep is split into arrays as on most clusters
MaxJobCount=50000
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MpiDefault=none
KillWait=2
GresTypes=gpu
NodeName=n[1-2] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17001-17002 CPUs=4 RealMemory=4000 Gres=gpu:fake:4 State=UNKNOWN
PartitionName=cpu Nodes=n[1-2] Default=YES MaxTime=1-00:00:00 DefaultTime=00:10:00 State=UP
PartitionName=gpu Nodes=n[1-2] MaxTime=1-00:00:00 DefaultTime=00:10:00 State=UP
CONF
)
    gres=$(write_if_changed "$SLURM_ETC/gres.conf" <<CONF
NodeName=n[1-2] Name=gpu Type=fake File=/dev/fakegpu[0-3]
CONF
)
    [ -z "$changed$gres" ] || echo changed
}

slurm_healthy() {
    pgrep -x slurmctld >/dev/null 2>&1 || return 1
    [ "$(pgrep -cx slurmd)" -ge 2 ] || return 1
    timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null | grep -Eq '^n1 (idle|mix|alloc)' || return 1
    timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null | grep -Eq '^n2 (idle|mix|alloc)' || return 1
}

start_slurm() { # start_slurm [restart]
    if [ "${1:-}" = restart ]; then
        say "slurm configuration changed: restarting"
        pkill -x slurmd 2>/dev/null || true
        pkill -x slurmctld 2>/dev/null || true
        i=0 # slurmctld saves its state before it exits: a start before then finds it still running
        while pgrep -x slurmctld >/dev/null 2>&1 || pgrep -x slurmd >/dev/null 2>&1; do
            i=$((i + 1))
            [ "$i" -lt 30 ] || break
            sleep 1
        done
    fi
    pgrep -x slurmctld >/dev/null 2>&1 || /usr/sbin/slurmctld
    for node in n1 n2; do
        pgrep -f "slurmd -N $node\$" >/dev/null 2>&1 || /usr/sbin/slurmd -N "$node"
    done
    i=0
    until slurm_healthy; do
        i=$((i + 1))
        if [ "$i" -eq 20 ]; then
            # nodes left DOWN by an earlier run come back with an explicit resume
            scontrol update NodeName=n1,n2 State=RESUME 2>/dev/null || true
        fi
        [ "$i" -lt 60 ] || die "slurm did not become healthy; see /var/log/slurm/"
        sleep 0.5
    done
    say "slurm ok: $(sinfo -h -o '%P %a %D %t' | tr '\n' ';')"
}

setup_user() {
    if ! id "$LAB_USER" >/dev/null 2>&1; then
        useradd --create-home --shell /bin/bash "$LAB_USER"
    fi
    # a user made by useradd is locked, and sshd without PAM refuses its key
    usermod -p '*' "$LAB_USER"
    mkdir -p "$LAB_DIR"
    chmod 0755 "$LAB_DIR"
    [ -f "$LAB_DIR/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C rsk-lab -f "$LAB_DIR/id_ed25519"
    home=$(getent passwd "$LAB_USER" | cut -d: -f6)
    install -d -m 0700 -o "$LAB_USER" -g "$LAB_USER" "$home/.ssh"
    install -m 0600 -o "$LAB_USER" -g "$LAB_USER" "$LAB_DIR/id_ed25519.pub" "$home/.ssh/authorized_keys"
}

write_sshd_config() { # write_sshd_config NAME PORT
    [ -f "$LAB_DIR/ssh_host_$1_ed25519_key" ] \
        || ssh-keygen -q -t ed25519 -N '' -f "$LAB_DIR/ssh_host_$1_ed25519_key"
    write_if_changed "$LAB_DIR/sshd_$1.conf" <<CONF >/dev/null
Port $2
ListenAddress 127.0.0.1
HostKey $LAB_DIR/ssh_host_$1_ed25519_key
PidFile $LAB_DIR/sshd_$1.pid
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM no
AllowUsers $LAB_USER
AllowTcpForwarding yes
PermitRootLogin no
MaxStartups 100:30:200
MaxSessions 50
LogLevel ERROR
CONF
}

start_sshd() { # start_sshd NAME PORT
    mkdir -p /run/sshd
    chmod 0755 /run/sshd
    write_sshd_config "$1" "$2"
    pidfile="$LAB_DIR/sshd_$1.pid"
    if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        kill -HUP "$(cat "$pidfile")"   # re-read the configuration
    else
        /usr/sbin/sshd -f "$LAB_DIR/sshd_$1.conf"
    fi
}

write_known_hosts() {
    : >"$LAB_DIR/known_hosts.tmp"
    for spec in "main:$LAB_PORT" "jump:$JUMP_PORT"; do
        name=${spec%%:*}
        port=${spec#*:}
        printf '[127.0.0.1]:%s %s\n' "$port" \
            "$(cut -d' ' -f1-2 "$LAB_DIR/ssh_host_${name}_ed25519_key.pub")" >>"$LAB_DIR/known_hosts.tmp"
    done
    mv "$LAB_DIR/known_hosts.tmp" "$LAB_DIR/known_hosts"
}

check_ssh() {
    i=0
    until ssh -o BatchMode=yes -o UserKnownHostsFile="$LAB_DIR/known_hosts" \
        -o StrictHostKeyChecking=yes -i "$LAB_DIR/id_ed25519" -p "$LAB_PORT" \
        "$LAB_USER@127.0.0.1" true 2>/dev/null; do
        i=$((i + 1)); [ "$i" -lt 30 ] || die "ssh to $LAB_USER@127.0.0.1:$LAB_PORT fails"
        sleep 0.2
    done
    say "ssh ok: $LAB_USER@127.0.0.1:$LAB_PORT"
}

main() {
    need_root
    install_packages
    setup_munge
    make_fake_gpus
    if [ -n "$(write_slurm_conf)" ] && pgrep -x slurmctld >/dev/null 2>&1; then
        start_slurm restart
    else
        slurm_healthy || start_slurm
        say "slurm ok"
    fi
    setup_user
    start_sshd main "$LAB_PORT"
    start_sshd jump "$JUMP_PORT"
    write_known_hosts
    check_ssh
    printf 'key=%s\nknown_hosts=%s\nuser=%s\nport=%s\njump_port=%s\ntarget=%s\n' \
        "$LAB_DIR/id_ed25519" "$LAB_DIR/known_hosts" "$LAB_USER" "$LAB_PORT" "$JUMP_PORT" \
        "targets/lab.toml"
}

main "$@"
