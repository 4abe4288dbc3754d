"""Two data-parallel ranks on the CPU (gloo over loopback), one of them slow: each step both
all-reduce a small tensor; rank 1 first does five times the host work of rank 0, so rank 0
waits in the all-reduce most of each step. Run with no argument: it starts both ranks itself
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in their environment, as torchrun sets them)."""

import os
import socket
import subprocess
import sys
import time


def work(units: int) -> float:
    # A unit is about 15 ms of one core: a step is long against the loopback round trip of the
    # all-reduce even when the machine is busy (at 1 ms a unit, scheduling delays on a loaded
    # 2-core machine made the slow rank wait in the collectives as long as it worked)
    return sum((i % 7) * 0.5 for i in range(units * 400_000))


def rank_main(seconds: float) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    units = 5 if rank == 1 else 1
    t = torch.zeros(16)
    end = time.monotonic() + seconds
    while True:
        work(units)
        t += 1
        dist.all_reduce(t)  # the fast rank waits here for the slow one
        done = torch.tensor([float(time.monotonic() > end)])
        dist.all_reduce(done)
        if done.item() > 0:
            break
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
        sys.exit(launch(float(sys.argv[1]) if len(sys.argv) > 1 else 20.0))
