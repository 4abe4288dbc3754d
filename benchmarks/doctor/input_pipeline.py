"""Shared by input_bound.py and input_workers.py: a training step fed by a DataLoader whose
per-sample transform is CPU-heavy Python (about 25,000 interpreted operations a sample, 2-5 ms),
so that the data pipeline, not the GPU, sets the pace unless it runs in workers.

Each step: a batch of 16 samples of 8,192 features copied to the GPU (512 KB; pageable and
blocking without workers), repeated to 8,192 rows, through common.model's two 8,192-wide bf16
layers, backward and SGD: about 6.6 TFLOP (2 x 8,192^3 x 2 layers x 3 for forward and
backward), some 10 ms on an H200. Without workers a step waits for 16 x 2-5 ms of transform:
10-20 steps and as many pageable copies a second, the GPU busy a fifth of the time or less;
with 12 workers the batches are ready (12 / 50 ms = 240 a second) and the GPU sets the pace.
"""

from __future__ import annotations

import math

import torch
from common import WIDTH, model, run
from torch.utils.data import DataLoader, Dataset

BATCH = 16
REPEAT = 512


class Augmented(Dataset[torch.Tensor]):
    """A sample built and 'augmented' in Python, one value at a time."""

    def __len__(self) -> int:
        return 10_000_000

    def __getitem__(self, i: int) -> torch.Tensor:
        row = [math.sin(i * 0.001 + j * 0.37) * 0.5 for j in range(WIDTH)]
        row = [v * v - 0.25 if j % 3 else v for j, v in enumerate(row)]
        row = [max(-1.0, min(1.0, v * 1.7)) for v in row]
        return torch.tensor(row, dtype=torch.float32)


def train(name: str, workers: int) -> None:
    loader = DataLoader(
        Augmented(),
        batch_size=BATCH,
        num_workers=workers,
        pin_memory=workers > 0,
        persistent_workers=workers > 0,
        prefetch_factor=4 if workers > 0 else None,
    )
    batches = iter(loader)
    net = model("cuda")
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)

    def step(_i: int) -> None:
        x = next(batches).to("cuda", non_blocking=workers > 0).to(torch.bfloat16)
        loss = net(x.repeat(REPEAT, 1)).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    run(name, step, torch.cuda.synchronize)
