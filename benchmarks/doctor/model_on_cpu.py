"""Pitfall: the model and the data were never moved to the GPU; it trains on the CPU (smaller
width, the CPU is slow) while the GPU idles. Expected: never_used_gpu."""

from __future__ import annotations

import torch
from common import run

WIDTH, BATCH = 1024, 512
net = torch.nn.Sequential(
    torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU(), torch.nn.Linear(WIDTH, WIDTH)
)
opt = torch.optim.SGD(net.parameters(), lr=1e-3)
data = torch.randn(4, BATCH, WIDTH)


def step(i: int) -> None:
    loss = net(data[i % 4]).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


run("model_on_cpu", step, lambda: None)
