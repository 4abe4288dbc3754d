#!/usr/bin/env bash
# One call on the GPU machine (see README "Proving it on the GPU"): GPU-marked tests, the probe
# fidelity run, then the fleet loop end to end: a local service, a probe and a monitor run that
# report to it, and the review it serves. Writes what it produced under OUTDIR.
set -uo pipefail
OUTDIR=${1:?usage: gpu_session.sh OUTDIR [ACCELERATOR]}
GPU=${2:-h200-sxm}  # the catalog accelerator the machine's GPU is
mkdir -p "$OUTDIR"
python3 -m pytest -q -p no:cacheprovider tests/test_probe_gpu.py 2>&1 | tail -3
python3 benchmarks/probe_fidelity.py "$OUTDIR" "$GPU" 2>&1 | tail -40

export ADVISOR_API_TOKENS=gpu-session-token ADVISOR_DATABASE_URL=sqlite:////tmp/advisor-gpu.db
export ADVISOR_SPOOL_DIR=/tmp/advisor-spool
python3 -m advisor serve --port 8088 --no-access-log > /tmp/serve.log 2>&1 &
server=$!
get() { python3 -c "import sys,urllib.request; sys.stdout.buffer.write(urllib.request.urlopen('http://127.0.0.1:8088$1', timeout=30).read())"; }
for _ in $(seq 50); do get /healthz >/dev/null 2>&1 && break; sleep 0.2; done
python3 -m advisor probe --quick --expect "$GPU" --report-to http://127.0.0.1:8088 \
  --token gpu-session-token > /dev/null 2> /tmp/probe.log; echo "probe exit $?"; grep -i "report" /tmp/probe.log
# a busy GPU for the first half of the monitoring window
python3 -c "import torch,time
a=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16); t=time.time()
while time.time()-t<12: a@a
torch.cuda.synchronize()" &
load=$!
python3 -m advisor monitor --duration 24s --interval 0.5s --json --output "$OUTDIR/monitor.json" \
  --report-to http://127.0.0.1:8088 --token gpu-session-token > /dev/null 2> /tmp/monitor.log
echo "monitor exit $?"; tail -3 /tmp/monitor.log
wait $load
python3 -c "import json,sys; d=json.load(open('$OUTDIR/monitor.json')); [print(g['name'], g['finding'], g['reason_codes'], g['evidence'][:2]) for g in d['gpus']]"
get /v1/fleet/summary | python3 -c "import json,sys; [print(s['accelerator'], s['reports'], s['verdicts'], round(s['checks']['matmul_bf16']['ratio_median'],3)) for s in json.load(sys.stdin)]"
get /v1/utilisation-reports | head -c 400; echo
get /v1/review > "$OUTDIR/review.html"; echo "review: $(wc -c < "$OUTDIR/review.html") bytes"
kill $server
