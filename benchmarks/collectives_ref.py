"""Plain references for the node probe's collectives and peer copies (the node fidelity run).

    torchrun --standalone --nproc-per-node N benchmarks/collectives_ref.py OUT.json [SIZES...]

Every rank runs a bare `torch.distributed` loop per collective and size, written independently of
probes/collectives.py: NCCL on the GPU of its local rank, 5 warm-up calls, then 20 samples of 10
calls between `torch.cuda.synchronize()` and the host clock; the median sample, converted to
nccl-tests bus bandwidth (all-reduce x 2(n-1)/n, all-gather and reduce-scatter x (n-1)/n, the
message size being the whole buffer). Rank 0 adds a plain `dst.copy_(src)` between every ordered
pair of GPUs it sees (1 GiB, median of 20 samples of 10 copies). With no GPU, gloo on the CPU.
Rank 0 writes OUT.json and prints a table.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

MiB = 1 << 20
SIZES = [64 * MiB, 256 * MiB, 1024 * MiB, 4096 * MiB]
WARMUP, SAMPLES, CALLS = 5, 20, 10


def label(nbytes: int) -> str:
    return f"{nbytes >> 30}G" if nbytes >= 1 << 30 else f"{nbytes >> 20}M"


def main() -> None:
    out = sys.argv[1]
    sizes = [int(s) * MiB for s in sys.argv[2:]] or SIZES
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo")
    n, rank = dist.get_world_size(), dist.get_rank()
    device = torch.device(f"cuda:{local}" if cuda else "cpu")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    # torch 2.13 renames the tensor forms *_single; older releases have only the old names
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    rows = []
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        for nbytes in sizes:
            count = nbytes // 4 // n * n
            whole = torch.ones(count, device=device)
            part = torch.ones(count // n, device=device)
            call = {
                "all_reduce": lambda w=whole: dist.all_reduce(w),
                "all_gather": lambda w=whole, p=part: gather(w, p),
                "reduce_scatter": lambda w=whole, p=part: scatter(p, w),
            }[op]
            for _ in range(WARMUP):
                call()
            times = []
            for _ in range(SAMPLES):
                dist.barrier()
                sync()
                t0 = time.perf_counter()
                for _ in range(CALLS):
                    call()
                sync()
                times.append((time.perf_counter() - t0) / CALLS)
            slowest = torch.tensor([statistics.median(times)], dtype=torch.float64, device=device)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            factor = 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n
            busbw = count * 4 / slowest.item() / 1e9 * factor
            rows.append({"name": f"{op}_{label(nbytes)}", "busbw_gb_s": busbw, "ranks": n})
            del whole, part
    if rank == 0 and cuda and torch.cuda.device_count() > 1:
        for i in range(torch.cuda.device_count()):
            for j in range(torch.cuda.device_count()):
                if i != j:
                    rows.append(peer_copy(i, j))
    if rank == 0:
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)
        for r in rows:
            value = r.get("busbw_gb_s", r.get("copy_gb_s"))
            print(f"{r['name']:<24} {value:10.1f} GB/s")
    dist.destroy_process_group()


def peer_copy(i: int, j: int, nbytes: int = 1024 * MiB) -> dict[str, object]:
    src = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{i}").random_(0, 256)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{j}")
    for _ in range(WARMUP):
        dst.copy_(src)
    times = []
    for _ in range(SAMPLES):
        torch.cuda.synchronize(i)
        torch.cuda.synchronize(j)
        t0 = time.perf_counter()
        for _ in range(CALLS):
            dst.copy_(src)
        torch.cuda.synchronize(i)
        torch.cuda.synchronize(j)
        times.append((time.perf_counter() - t0) / CALLS)
    return {"name": f"p2p_copy_{i}_{j}", "copy_gb_s": nbytes / statistics.median(times) / 1e9}


if __name__ == "__main__":
    main()
