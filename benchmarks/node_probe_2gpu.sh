#!/usr/bin/env bash
# The node probe on the `nvidia-h200-x2` machine (two H200s joined by NVLink), from the repository root:
#   bash benchmarks/node_probe_2gpu.sh OUTDIR
# 1. the node report of both GPUs (P2P matrix, NVML topology, collectives, health);
# 2. fidelity of the collectives and peer copies against plain loops (benchmarks/node_fidelity.py);
# 3. --quick on 2 GPUs against --quick --device 0, alternating;
# 4. two node ranks of one GPU each over a localhost rendezvous, --pairwise;
# 5. faults: a competing matmul on GPU 1 only, CUDA_VISIBLE_DEVICES=0 with --expect of a 2-GPU
#    type (the catalog has no 2-GPU H200 type: its 8-GPU p5en.48xlarge, so the count fails), a
#    rank killed mid-run.
set -uo pipefail
OUTDIR=${1:?usage: node_probe_2gpu.sh OUTDIR}
mkdir -p "$OUTDIR"
source "$(dirname "$0")/node_probe_common.sh"
nvidia-smi topo -m
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"

echo "== 1. node report"
probe --json --output "$OUTDIR/node-2gpu.json" > /dev/null 2> /tmp/node.log; echo "exit $?"
echo "== 2. fidelity"
python3 benchmarks/node_fidelity.py "$OUTDIR"
echo "== 3. wall time, alternating"
for i in 1 2; do
  echo "2 GPUs  $(wall probe --quick)"
  echo "GPU 0   $(wall probe --quick --device 0)"
done
echo "== 4. two node ranks, one GPU each"
port=29555
CUDA_VISIBLE_DEVICES=0 probe --nodes 2 --rdzv-endpoint 127.0.0.1:$port --pairwise --json \
  > /tmp/n0.json 2> /tmp/n0.log & a=$!
CUDA_VISIBLE_DEVICES=1 probe --nodes 2 --rdzv-endpoint 127.0.0.1:$port --pairwise --json \
  > /tmp/n1.json 2> /tmp/n1.log & b=$!
wait $a; echo "node a exit $?"; wait $b; echo "node b exit $?"
python3 -c "import json; [json.dump(d, open('$OUTDIR/two-nodes.json','w')) for d in (json.load(open(f)) for f in ('/tmp/n0.json','/tmp/n1.json')) if d.get('cluster')]"
echo "== 5a. a competing matmul on GPU 1 only"
CUDA_VISIBLE_DEVICES=1 python3 -c "import torch,time
a=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16); t=time.time()
while time.time()-t<60: a@a
torch.cuda.synchronize()" & load=$!
sleep 6
probe --json --only matmul_bf16,d2d > "$OUTDIR/competing-gpu1.json" 2> /dev/null; echo "exit $? (competing pid $load)"
kill $load 2>/dev/null; wait $load 2>/dev/null
echo "== 5b. one GPU visible, --expect an 8-GPU type"
CUDA_VISIBLE_DEVICES=0 probe --json --only matmul_bf16 --expect p5en.48xlarge > "$OUTDIR/expect-count.json" 2> /dev/null; echo "exit $?"
echo "== 5c. a rank killed mid-run (rank 1, once its measurements are written)"
(probe --json --rank-timeout-s 30 > "$OUTDIR/rank-killed.json" 2> /tmp/kill.log; echo "exit $?") & p=$!
for _ in $(seq 120); do
  pid=$(python3 - <<'PY'
import glob, json
for f in glob.glob("/tmp/advisor-probe-*/rank-1.json"):
    d = json.load(open(f))
    if d["phase"] == "measured":
        print(d["pid"])
PY
)
  [ -n "$pid" ] && { kill -9 "$pid"; echo "killed rank 1 (pid $pid)"; break; }
  sleep 0.5
done
wait $p
python3 -c "import json; d=json.load(open('$OUTDIR/rank-killed.json')); print(d['verdict'], d['failed_ranks'])"
