"""A healthy GEMM loop, to be watched by `advisor doctor --pid` (its cost): bf16 8,192 x 8,192
matrix products back to back for DOCTOR_BENCH_S seconds, steps per second printed on stderr for
every WINDOW_S window (synchronised at each window's end), with the window's wall-clock start
and end so that windows can be matched with the doctor's attachment."""

from __future__ import annotations

import json
import os
import sys
import time

import torch

SECONDS = float(os.environ.get("DOCTOR_BENCH_S", "40"))
WINDOW_S = float(os.environ.get("WINDOW_S", "5"))
N = 8192

a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
for _ in range(20):  # warm-up
    c = a @ b
torch.cuda.synchronize()
print(f"pid {os.getpid()} ready", flush=True)
end = time.time() + SECONDS
while time.time() < end:
    start, steps = time.time(), 0
    while time.time() - start < WINDOW_S:
        for _ in range(10):
            c = a @ b
        steps += 10
        torch.cuda.synchronize()
    stop = time.time()
    print(
        "WINDOW "
        + json.dumps({"start": start, "end": stop, "steps_per_s": steps / (stop - start)}),
        file=sys.stderr,
        flush=True,
    )
