#!/usr/bin/env bash
# What the rendered Kubernetes Job and sbatch script run on one node, run on a GPU machine as they
# call it, plus the level-1 health check (NPD line, textfile, JSON) with its wall time. Writes
# under $OUT (default ./deploy-gpu-out): job.json, probe.sbatch, probe-job.json,
# probe-<node>.json, health.prom, health.json, log.txt. Needs advisor importable as
# `python3 -m advisor` and a CUDA torch.
set -uo pipefail
OUT=${OUT:-./deploy-gpu-out}
mkdir -p "$OUT"
log="$OUT/log.txt"
{
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} >"$log" 2>&1
# 1. the Indexed Job's container command, as Kubernetes runs it (one node: no rendezvous)
python3 -m advisor deploy kubernetes --nodes 1 --json >"$OUT/job.json"
mapfile -t job_cmd < <(python3 -c '
import json, sys
job = [m for m in json.load(open(sys.argv[1])) if m["kind"] == "Job"][0]
c = job["spec"]["template"]["spec"]["containers"][0]
for a in c["command"] + c["args"]:
    print(a)' "$OUT/job.json")
job_cmd=("${job_cmd[@]/\/tmp\/advisor-probe.json/$OUT/probe-job.json}")
job_cmd[0]="python3"
job_cmd=("python3" "-m" "advisor" "${job_cmd[@]:1}")
echo "job: ${job_cmd[*]}" >>"$log"
s=$(date +%s.%N); "${job_cmd[@]}" >/dev/null 2>>"$log"; rc=$?
echo "job exit $rc in $(python3 -c "import time; print(round(time.time()-$s, 1))") s" >>"$log"
# 2. the sbatch script's srun task, with the variables Slurm sets for it
python3 -m advisor deploy slurm --nodes 1 --launcher "python3 -m advisor" >"$OUT/probe.sbatch"
task=$(python3 -c '
import shlex, sys
line = next(l for l in open(sys.argv[1]) if l.startswith("srun "))
print(shlex.split(line)[-1])' "$OUT/probe.sbatch")
echo "srun task: $task" >>"$log"
s=$(date +%s.%N)
SLURMD_NODENAME=gpu0 ADVISOR_PROBE_DIR="$OUT" bash -c "$task" >/dev/null 2>>"$log"; rc=$?
echo "sbatch task exit $rc in $(python3 -c "import time; print(round(time.time()-$s, 1))") s" >>"$log"
# 3. the Prolog / NPD health check, timed (the budget is 60 s)
s=$(date +%s.%N)
python3 -m advisor probe --health-check --npd --textfile "$OUT/health.prom" >>"$log" 2>/dev/null
rc=$?
echo "health-check exit $rc in $(python3 -c "import time; print(round(time.time()-$s, 1))") s" >>"$log"
python3 -m advisor probe --health-check --json >"$OUT/health.json" 2>/dev/null
echo "health-check --json exit $?" >>"$log"
