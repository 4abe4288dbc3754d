"""Pitfall: a small model (3 layers of 512, batch 256) alone on a whole GPU: a few hundred MB of
its memory, a sliver of its SMs. Expected: under_used, with a cheaper option that fits."""

from __future__ import annotations

import torch
from common import run

WIDTH, BATCH = 512, 256
net = torch.nn.Sequential(
    torch.nn.Linear(WIDTH, WIDTH),
    torch.nn.ReLU(),
    torch.nn.Linear(WIDTH, WIDTH),
    torch.nn.ReLU(),
    torch.nn.Linear(WIDTH, 10),
).cuda()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
data = torch.randn(64, BATCH, WIDTH, device="cuda")
labels = torch.randint(0, 10, (64, BATCH), device="cuda")


def step(i: int) -> None:
    loss = torch.nn.functional.cross_entropy(net(data[i % 64]), labels[i % 64])
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


run("small_model", step, torch.cuda.synchronize)
