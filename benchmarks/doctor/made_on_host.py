"""Pitfall: each step makes its noise on the CPU and moves it, torch.randn(...).to('cuda').
Expected: made_on_host (and the GPU left waiting for the CPU)."""

from __future__ import annotations

import torch
from common import BATCH, WIDTH, model, run

net = model("cuda")
opt = torch.optim.SGD(net.parameters(), lr=1e-3)
SHAPE = (BATCH // 8, WIDTH)


def step(_i: int) -> None:
    x = torch.randn(SHAPE).to("cuda", torch.bfloat16)
    loss = net(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


run("made_on_host", step, torch.cuda.synchronize)
