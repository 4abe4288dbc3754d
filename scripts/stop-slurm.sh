#!/usr/bin/env bash
# Stops the test Slurm cluster of scripts/start-slurm.sh (its daemons and munged).
set -euo pipefail
DIR=${ADVISOR_TEST_SLURM_DIR:-/tmp/advisor-test-slurm}
if [ -f "$DIR/slurm.conf" ]; then
  SLURM_CONF="$DIR/slurm.conf" scontrol shutdown >/dev/null 2>&1 || true
fi
if [ -S "$DIR/munge.socket" ]; then
  munged -S "$DIR/munge.socket" --stop >/dev/null 2>&1 || true
fi
