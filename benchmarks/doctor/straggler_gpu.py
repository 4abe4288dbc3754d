"""A pitfall of the doctor's unseen jobs, on a GPU: two data-parallel ranks (gloo over loopback,
both on GPU 0), each step a stack of bf16 4,096 x 4,096 matrix products, then an all-reduce of a
small CPU tensor; rank 1 runs five times rank 0's products, so rank 0 waits in the all-reduce
most of each step. Expected: straggler naming rank 1. Run with the seconds (default 15); it
starts both ranks itself (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT as torchrun sets them).
Its fix (equal work per rank) is the same program with STRAGGLER_UNITS=1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

N = 4096


def rank_main(seconds: float) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    units = int(os.environ.get("STRAGGLER_UNITS", "5")) if rank == 1 else 1
    a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    t = torch.zeros(16)
    steps, start = 0, time.monotonic()
    end = start + seconds
    while True:
        for _ in range(40 * units):
            c = a @ b
        torch.cuda.synchronize()
        t += float(c[0, 0])
        dist.all_reduce(t)  # the fast rank waits here for the slow one
        steps += 1
        done = torch.tensor([float(time.monotonic() > end)])
        dist.all_reduce(done)
        if done.item() > 0:
            break
    rate = steps / (time.monotonic() - start)
    print(f"RESULT rank {rank} steps_per_s {rate:.2f}", file=sys.stderr, flush=True)
    dist.destroy_process_group()


def launch(seconds: float) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    ranks = [
        subprocess.Popen(
            [sys.executable, __file__, "--rank", str(seconds)], env={**env, "RANK": str(r)}
        )
        for r in range(2)
    ]
    return max(p.wait() for p in ranks)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        rank_main(float(sys.argv[2]))
    else:
        sys.exit(launch(float(sys.argv[1]) if len(sys.argv) > 1 else 15.0))
