"""Shared by the doctor's pitfall programs: the model, the data, the timed loop.

Each program trains the same two-layer bf16 MLP (8,192 wide) on batches of 16,384 x 8,192
(268 MB) for DOCTOR_BENCH_S seconds after a warm-up, and prints one line `RESULT {...}` on
stderr with its steps per second, so that a pitfall and its fix compare in one run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable

import torch

WIDTH = 8192
BATCH = 16384
SECONDS = float(os.environ.get("DOCTOR_BENCH_S", "10"))
WARMUP_S = 2.0


def model(device: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(WIDTH, WIDTH, bias=False),
        torch.nn.GELU(),
        torch.nn.Linear(WIDTH, WIDTH, bias=False),
    ).to(device=device, dtype=torch.bfloat16)


def host_batches(count: int = 2) -> torch.Tensor:
    """`count` batches in one host tensor (pageable), indexed per step, made once (before
    CUDA starts: the GPU is not kept waiting on the data set-up)."""
    return torch.randn(count, BATCH, WIDTH).to(torch.bfloat16)


def run(name: str, step: Callable[[int], None], sync: Callable[[], None]) -> None:
    """Warm up, then time steps for SECONDS; print the rate."""
    i = 0
    end = time.perf_counter() + WARMUP_S
    while time.perf_counter() < end:
        step(i)
        i += 1
    sync()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < SECONDS:
        step(i + steps)
        steps += 1
    sync()
    wall = time.perf_counter() - start
    print(
        "RESULT " + json.dumps({"program": name, "steps": steps, "steps_per_s": steps / wall}),
        file=sys.stderr,
    )
