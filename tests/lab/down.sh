#!/bin/sh
# Stop the rsk lab cluster started by tests/lab/up.sh. Keeps keys and configuration,
# so a later up.sh is quick. RSK_LAB_PURGE=1 also removes the lab's state and user.
set -eu

LAB_DIR=${RSK_LAB_DIR:-/var/lib/rsk-lab}
LAB_USER=${RSK_LAB_USER:-rsklab}

for name in main jump; do
    pidfile="$LAB_DIR/sshd_$name.pid"
    if [ -f "$pidfile" ]; then
        kill "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
    fi
done
pkill -x slurmd 2>/dev/null || true
pkill -x slurmctld 2>/dev/null || true
pkill -x munged 2>/dev/null || true
if [ "${RSK_LAB_PURGE:-0}" = 1 ]; then
    userdel -r "$LAB_USER" 2>/dev/null || true
    rm -rf "$LAB_DIR" /var/lib/slurm/slurmctld/* /var/lib/slurm/slurmd/*
fi
printf 'lab: down\n' >&2
