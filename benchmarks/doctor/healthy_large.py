"""A healthy job that holds what it uses, for the doctor's under_used finding not to fire: a
buffer of HELD_GB (default 70 GB, half an H200) streamed through every step (a read and a write
of all of it, as a large model's weights and optimizer states are), beside bf16 8,192 x 8,192
matrix products, for DOCTOR_BENCH_S seconds. Expected: healthy, its GPU neither idle nor
over-provisioned (memory above the fleet rules' 40%, SMs busy)."""

from __future__ import annotations

import os
import sys
import time

import torch

SECONDS = float(os.environ.get("DOCTOR_BENCH_S", "15"))
HELD_GB = float(os.environ.get("HELD_GB", "70"))
N = 8192

held = torch.zeros(int(HELD_GB * 1e9 / 2), device="cuda", dtype=torch.bfloat16)
a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
steps, start = 0, time.time()
while time.time() - start < SECONDS:
    held.add_(1.0)  # the whole buffer, read and written
    for _ in range(20):
        c = a @ b
    steps += 1
    torch.cuda.synchronize()
rate = steps / (time.time() - start)
print(f"RESULT healthy_large steps_per_s {rate:.2f} held_gb {HELD_GB:g}", file=sys.stderr)
