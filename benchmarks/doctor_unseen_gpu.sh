#!/usr/bin/env bash
# The doctor on jobs it had not seen, on a GPU machine: the pitfall programs of benchmarks/doctor/
# (idle_reservation, input_bound and its fix input_workers) under `advisor doctor --torch`, then
# healthy_gemm.py watched by `advisor doctor --pid` for PID_S seconds in the middle of its run (the
# cost: its steps/s in windows with and without the doctor attached). py-spy must be on PATH.
# Run from the repository root:  OUT=benchmarks/results/doctor-unseen-DATE bash benchmarks/doctor_unseen_gpu.sh
# then: python benchmarks/doctor_unseen_summary.py FOLDER. At most 8 files are written.
set -u
out=$(realpath -m "${OUT:-benchmarks/results/doctor-unseen}")
mkdir -p "$out"
py=${PYTHON:-python3}
export DOCTOR_BENCH_S=${DOCTOR_BENCH_S:-15}
PID_S=${PID_S:-15}
INSTANCE=${INSTANCE:-p5en.48xlarge}  # 8 x H200: prices the findings
log="$out/log.txt"
$py -m advisor doctor --help > /dev/null || { echo "advisor does not start: carry its wheels" >&2; exit 9; }
command -v py-spy > /dev/null || { echo "py-spy is not on PATH" >&2; exit 9; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  echo "py-spy $(py-spy --version 2>&1)"
  date -u +%Y-%m-%dT%H:%M:%SZ
} > "$out/env.txt" 2>&1
cd benchmarks/doctor || exit 1
for p in idle_reservation input_bound input_workers; do
  echo "=== $p" >> "$log"
  $py -m advisor doctor --torch --json --instance-type "$INSTANCE" --output "$out/$p.json" \
    -- $py "$p.py" > /dev/null 2>> "$log"
  echo "$p: exit $?" >> "$log"
done
echo "=== healthy_gemm" >> "$log"
DOCTOR_BENCH_S=$((3 * PID_S + 10)) WINDOW_S=2 $py healthy_gemm.py >> "$log" 2>> "$out/windows.txt" &
gemm=$!
until grep -q "pid $gemm ready" "$log" 2>/dev/null; do sleep 0.5; done
sleep "$PID_S"
echo "DOCTOR $(date +%s.%N) start" >> "$out/windows.txt"
$py -m advisor doctor --pid "$gemm" --duration "${PID_S}s" --json --instance-type "$INSTANCE" \
  --output "$out/healthy_pid.json" > /dev/null 2>> "$log"
echo "doctor --pid: exit $?" >> "$log"
echo "DOCTOR $(date +%s.%N) end" >> "$out/windows.txt"
wait "$gemm"
cd - > /dev/null && $py benchmarks/doctor_unseen_summary.py "$out" | tee "$out/summary.txt"
