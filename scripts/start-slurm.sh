#!/usr/bin/env bash
# Starts a throw-away one-host Slurm cluster of two nodes (n1, n2: two slurmd on this host, so
# `srun -N2` runs as on a cluster) for tests/test_slurm.py, installing Debian's slurm-wlm and
# munge from apt when missing. Prints the slurm.conf path to export as SLURM_CONF (the tests read
# ADVISOR_TEST_SLURM_CONF). Idempotent: reuses a running cluster. No systemd: munged, slurmctld
# and slurmd run as root from a directory of their own (ADVISOR_TEST_SLURM_DIR).
# Stop it with scripts/stop-slurm.sh.
set -euo pipefail
DIR=${ADVISOR_TEST_SLURM_DIR:-/tmp/advisor-test-slurm}
CONF="$DIR/slurm.conf"

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "slurm-wlm not installed and cannot apt-get it here: the Slurm test will skip" >&2
    exit 0
  fi
  echo "installing slurm-wlm and munge from apt" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >&2
fi
if [ -f "$CONF" ] && SLURM_CONF="$CONF" timeout 10 scontrol ping 2>/dev/null | grep -q UP; then
  echo "$CONF"
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "Slurm's daemons need root here (SlurmUser=root): the Slurm test will skip" >&2
  exit 0
fi
[ -f "$DIR/munge.pid" ] && munged -S "$DIR/munge.socket" --stop >/dev/null 2>&1 || true
rm -rf "$DIR"
mkdir -p "$DIR/state" "$DIR/spool/n1" "$DIR/spool/n2" "$DIR/log"
chmod 700 "$DIR"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
CTL_PORT=$(free_port)
N1_PORT=$(free_port)
N2_PORT=$(free_port)
CPUS=$(nproc)

mungekey -c -k "$DIR/munge.key" >/dev/null 2>&1
chmod 400 "$DIR/munge.key"
munged --force -S "$DIR/munge.socket" --key-file "$DIR/munge.key" --pid-file "$DIR/munge.pid" \
  --log-file "$DIR/log/munge.log" --seed-file "$DIR/munge.seed"

cat >"$CONF" <<EOF
ClusterName=advisortest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTL_PORT
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge.socket
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MailProg=/bin/true
ReturnToService=2
SchedulerType=sched/backfill
MpiDefault=none
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$N1_PORT CPUs=$CPUS State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$N2_PORT CPUs=$CPUS State=UNKNOWN
PartitionName=test Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$CONF"
slurmctld
slurmd -N n1
slurmd -N n2
for _ in $(seq 1 100); do
  if [ "$(sinfo -h -N -t idle -o %N | sort -u | wc -l)" = 2 ]; then
    echo "$CONF"
    exit 0
  fi
  sleep 0.1
done
echo "Slurm did not reach idle in 10 s; its logs: $DIR/log" >&2
exit 1
