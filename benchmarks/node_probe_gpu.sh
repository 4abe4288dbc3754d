#!/usr/bin/env bash
# The node probe on the one-H200 machine: the node report of one GPU (per-GPU checks,
# NVML topology and health from a real driver, NCCL initialised and a one-rank collective, in the
# probe's own process and under torchrun), --expect of an 8-GPU type failing on the count, a
# competing process named, --burn 60s, and the quick tier's wall time beside the single-GPU probe's
# (--device 0 --no-nccl). Writes its JSON under OUTDIR; run from the repository root.
set -uo pipefail
OUTDIR=${1:?usage: node_probe_gpu.sh OUTDIR}
mkdir -p "$OUTDIR"
source "$(dirname "$0")/node_probe_common.sh"

python3 -m pytest -q -p no:cacheprovider tests/test_probe_gpu.py 2>&1 | tail -3
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"

echo "== node report, quick, every GPU (one here)"
probe --json --output "$OUTDIR/node-quick.json" > /dev/null 2> /tmp/quick.log; echo "exit $?"
tail -4 /tmp/quick.log
echo "== quick tier wall time: node probe vs the single-GPU probe (--device 0 --no-nccl), alternating"
for i in 1 2; do
  echo "node   $(wall probe --quick)"
  echo "single $(wall probe --quick --device 0 --no-nccl)"
done

echo "== one rank under torchrun (NCCL)"
rm -rf /tmp/tr1
python3 -m torch.distributed.run --standalone --nproc-per-node 1 -m probes.worker \
  --out /tmp/tr1 --only matmul_bf16 2>&1 | tail -3
cp /tmp/tr1/rank-0.json "$OUTDIR/torchrun-rank0.json"

echo "== --expect p5en.48xlarge (8 x H200) on one GPU: the count fails"
probe --json --only matmul_bf16 --expect p5en.48xlarge > "$OUTDIR/expect-p5en.json" 2> /dev/null
echo "exit $?"

echo "== a competing process on the GPU"
python3 -c "import torch,time
a=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16); t=time.time()
while time.time()-t<40: a@a
torch.cuda.synchronize()" &
load=$!
sleep 6
echo "competing pid $load"
probe --json --only matmul_bf16,d2d > "$OUTDIR/competing.json" 2> /dev/null; echo "exit $?"
kill $load 2>/dev/null; wait $load 2>/dev/null

echo "== --burn 60s"
probe --json --only matmul_bf16 --burn 60s > "$OUTDIR/burn.json" 2> /tmp/burn.log; echo "exit $?"
tail -2 /tmp/burn.log

python3 - "$OUTDIR" <<'PY'
import json, sys
out = sys.argv[1]
for name in ("node-quick", "expect-p5en", "competing", "burn"):
    d = json.load(open(f"{out}/{name}.json"))
    print(f"-- {name}: verdict {d['verdict']} in {d['duration_s']:.1f} s, backend {d['backend']}")
    for c in d["checks"]:
        if c["status"] != "pass" or c["scope"] in ("health", "collective", "node") or name == "burn":
            print(f"   {c['name']:<18} {c['status']:<5} {c.get('action') or '':<8} {c['detail'][:150]}")
PY
