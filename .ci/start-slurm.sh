#!/usr/bin/env bash
# A single-node Slurm on this machine, for the Slurm executor's tests (test/slurm-executor.test.ts)
# and for a developer who wants to try `executor: { slurm: {} }` (docs/distributed.md "Slurm").
# Runs as root on Debian/Ubuntu without systemd: installs slurm-wlm and munge when missing,
# writes /etc/slurm/slurm.conf, starts munged, slurmctld and slurmd, and waits until the node
# is idle. Idempotent: daemons already running are left alone, a second run changes nothing.
# Recipe: ../shared/notes/slurm.md (no cgroup plugins: they need systemd).
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
  echo "start-slurm.sh: run it as root (it installs packages and starts daemons)" >&2
  exit 1
fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge
fi

# A pid file whose process is alive.
running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# munge: Slurm's authentication. One key per machine, made once.
mkdir -p /etc/munge /var/log/munge /run/munge /var/lib/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
fi
chown -R munge:munge /etc/munge /var/log/munge /run/munge /var/lib/munge
chmod 400 /etc/munge/munge.key
if ! running /run/munge/munged.pid; then
  su munge -s /bin/sh -c munged
fi

H=$(hostname)
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
conf=$(mktemp)
# KillWait: seconds between SIGTERM and SIGKILL on scancel/timeout (default 30; short for tests).
# MinJobAge: how long squeue still shows a finished job (the executor reads its end state there).
cat >"$conf" <<CONF
ClusterName=local
SlurmctldHost=$H
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
# Cores only: memory is not a consumable here (RealMemory is unset, so with memory every job
# would ask for the whole node and jobs would run one at a time: a job array of workers could not).
SelectTypeParameters=CR_Core
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmUser=root
KillWait=5
MinJobAge=600
NodeName=$H CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$H Default=YES MaxTime=INFINITE State=UP
CONF
changed=0
if ! cmp -s "$conf" /etc/slurm/slurm.conf; then
  cp "$conf" /etc/slurm/slurm.conf
  changed=1
fi
rm -f "$conf"

# A changed configuration restarts the daemons (scontrol reconfigure does not apply every
# setting, SelectTypeParameters among them).
if [ "$changed" = 1 ]; then
  for pidfile in /run/slurmctld.pid /run/slurmd.pid; do
    if running "$pidfile"; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
  done
  for _ in $(seq 40); do
    if ! running /run/slurmctld.pid && ! running /run/slurmd.pid; then break; fi
    sleep 0.5
  done
fi
if ! running /run/slurmctld.pid; then slurmctld; fi
if ! running /run/slurmd.pid; then slurmd; fi

# Wait (up to 60 s) for the node to be idle; a node left DOWN by an earlier start is resumed.
for _ in $(seq 60); do
  state=$(sinfo --noheader --nodes="$H" --format=%t 2>/dev/null | head -1 || true)
  case "$state" in
    idle | mix | alloc) echo "slurm: node $H is $state"; exit 0 ;;
    down* | drain* | drng*) scontrol update NodeName="$H" State=RESUME 2>/dev/null || true ;;
  esac
  sleep 1
done
echo "start-slurm.sh: node $H did not become idle within 60 s (sinfo: ${state:-no answer}); see /var/log/slurm/" >&2
exit 1
