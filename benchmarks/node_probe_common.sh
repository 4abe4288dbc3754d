# Sourced by node_probe_gpu.sh and node_probe_2gpu.sh: the probe as a user runs it, and the wall
# time of a whole command with its exit code.
export PYTHONUNBUFFERED=1
probe() { python3 -m advisor probe "$@"; }
wall() {
  local t0=$EPOCHREALTIME rc
  "$@" > /dev/null 2>&1; rc=$?
  awk -v a="$t0" -v b="$EPOCHREALTIME" -v rc="$rc" 'BEGIN { printf "%.1f s (exit %d)\n", b - a, rc }'
}
