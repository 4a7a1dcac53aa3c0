#!/usr/bin/env bash
# A real single-node Slurm for the test command's Slurm stage (scripts/slurm-stage.sh).
#   slurm.sh             install Debian's slurmctld, slurmd, slurm-client and munge (22.05.8 on
#                        Debian 12) without starting any service (policy-rc.d answers 101);
#                        idempotent, what scripts/test.sh's setup loop runs
#   slurm.sh start DIR   write DIR/slurm.conf (one node on loopback, state, spool, pid and log
#                        files under DIR), start munged, slurmctld and slurmd by hand (no
#                        systemd here) and wait for the node to be idle (60 s cap)
#   slurm.sh stop DIR    stop the three daemons by the pids saved in DIR
# Root and apt-get are needed to install; ARL_SKIP_SLURM=1 skips all of it.
set -euo pipefail
[ "${ARL_SKIP_SLURM:-0}" = 1 ] && { echo "slurm: skipped (ARL_SKIP_SLURM=1)"; exit 0; }
PACKAGES="slurmctld slurmd slurm-client munge"

install() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null && command -v munged >/dev/null; then
        echo "slurm: $(dpkg-query -W -f='${Version}' slurm-client 2>/dev/null)"
        return
    fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo "error: slurm.sh installs Debian's $PACKAGES with apt-get as root; install them, or ARL_SKIP_SLURM=1" >&2
        exit 1
    fi
    # No service may start during the install: there is no init system to own it.
    local policy=/usr/sbin/policy-rc.d saved=""
    [ -e "$policy" ] && saved=$(cat "$policy")
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod +x "$policy"
    if ! apt-cache policy slurmctld 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        apt-get update -qq
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null
    if [ -n "$saved" ]; then printf '%s\n' "$saved" > "$policy"; else rm -f "$policy"; fi
    echo "slurm: installed $(dpkg-query -W -f='${Version}' slurm-client)"
}

start() {
    local dir=$1
    mkdir -p "$dir/state" "$dir/spool" "$dir/log"
    local cpus=8 mem=16000
    # Ports off the defaults (6817/6818), so a site Slurm on this machine is not disturbed.
    cat > "$dir/slurm.conf" <<EOF
ClusterName=arltest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=${ARL_SLURMCTLD_PORT:-16817}
SlurmdPort=${ARL_SLURMD_PORT:-16818}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
KillWait=5
MinJobAge=30
InactiveLimit=0
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF="$dir/slurm.conf"
    # munge: the key the package made, its socket folder, the daemon as the munge user.
    mkdir -p /run/munge && chown munge:munge /run/munge
    [ -f /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
    if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
        cp /run/munge/munged.pid "$dir/munged.pid" 2>/dev/null || pgrep -n -u munge munged > "$dir/munged.pid"
    fi
    munge -n | unmunge >/dev/null
    slurmctld -D -f "$SLURM_CONF" >> "$dir/log/slurmctld.out" 2>&1 &
    echo $! > "$dir/slurmctld.pid.started"
    slurmd -D -N localhost -f "$SLURM_CONF" >> "$dir/log/slurmd.out" 2>&1 &
    echo $! > "$dir/slurmd.pid.started"
    local t=0
    until sinfo -h -N -o '%T' 2>/dev/null | grep -qx idle; do
        t=$((t + 1))
        if [ "$t" -gt 120 ]; then
            echo "error: the Slurm node is not idle after 60 s: $(sinfo -h -N -o '%N %T %E' 2>&1); see $dir/log" >&2
            return 1
        fi
        sleep 0.5
    done
    echo "slurm: node idle ($SLURM_CONF)"
}

stop() {
    local dir=$1
    for name in slurmd slurmctld munged; do
        local file="$dir/$name.pid.started"
        [ -f "$file" ] || file="$dir/$name.pid"
        [ -f "$file" ] || continue
        local pid
        pid=$(cat "$file")
        if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi
        rm -f "$file"
    done
    echo "slurm: stopped"
}

case "${1:-install}" in
    install) install ;;
    start) start "${2:?slurm.sh start DIR}" ;;
    stop) stop "${2:?slurm.sh stop DIR}" ;;
    *) echo "usage: slurm.sh [install | start DIR | stop DIR]" >&2; exit 2 ;;
esac
