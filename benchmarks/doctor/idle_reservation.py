"""A pitfall of the doctor's unseen jobs: a process that holds GPU memory and runs no kernel (a
notebook left open after loading a model). torch.empty only allocates (cudaMalloc): no kernel
runs. Holds IDLE_GIB (default 60) of GPU memory for DOCTOR_BENCH_S seconds while it sleeps.
Expected: idle_reservation with the GPU-hours and dollars held idle."""

from __future__ import annotations

import json
import os
import sys
import time

import torch

GIB = 1 << 30
SECONDS = float(os.environ.get("DOCTOR_BENCH_S", "10"))
held = torch.empty(
    int(float(os.environ.get("IDLE_GIB", "60")) * GIB), dtype=torch.uint8, device="cuda"
)
torch.cuda.synchronize()
print(f"holding {held.numel() / GIB:.0f} GiB on {torch.cuda.get_device_name()}", flush=True)
time.sleep(SECONDS)
print(
    "RESULT " + json.dumps({"program": "idle_reservation", "steps": 0, "steps_per_s": 0.0}),
    file=sys.stderr,
)
