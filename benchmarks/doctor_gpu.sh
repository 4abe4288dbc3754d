#!/usr/bin/env bash
# The doctor on a GPU machine: each pitfall program of benchmarks/doctor/ under
# `advisor doctor --torch` (its report, stdout, stderr and exit code), then the healthy loop
# (pinned_prefetch.py) timed plain, under `advisor doctor` and under `advisor doctor --torch`,
# alternating, ROUNDS times. Run from the repository root:
#   OUT=benchmarks/results/doctor-DATE-DEVICE bash benchmarks/doctor_gpu.sh
# (on the lent machine, after device-prep's install line). DOCTOR_BENCH_S sets each program's
# timed seconds (default 10).
set -u
out=$(realpath -m "${OUT:-benchmarks/results/doctor}")
mkdir -p "$out"
export DOCTOR_BENCH_S=${DOCTOR_BENCH_S:-10}
ROUNDS=${ROUNDS:-3}
py=${PYTHON:-python3}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  date -u +%Y-%m-%dT%H:%M:%SZ
} > "$out/env.txt" 2>&1
cd benchmarks/doctor || exit 1
for p in model_on_cpu pageable_sync pinned_prefetch made_on_host made_on_device small_model; do
  $py -m advisor doctor --torch --json --output "$out/$p.json" -- $py "$p.py" \
    > "$out/$p.stdout" 2> "$out/$p.stderr"
  echo "$p: exit $?" | tee -a "$out/exits.txt"
done
: > "$out/overhead.txt"
for r in $(seq "$ROUNDS"); do
  $py pinned_prefetch.py 2>&1 >/dev/null | sed -n "s/^RESULT /plain $r /p" >> "$out/overhead.txt"
  $py -m advisor doctor -- $py pinned_prefetch.py 2>&1 >/dev/null \
    | sed -n "s/^RESULT /doctor $r /p" >> "$out/overhead.txt"
  $py -m advisor doctor --torch -- $py pinned_prefetch.py 2>&1 >/dev/null \
    | sed -n "s/^RESULT /doctor-torch $r /p" >> "$out/overhead.txt"
done
cat "$out/overhead.txt"
cd - >/dev/null && python3 benchmarks/doctor_summary.py "$out" | tee "$out/summary.txt"
