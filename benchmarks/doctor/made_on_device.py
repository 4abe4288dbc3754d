"""The fix of made_on_host.py: torch.randn(..., device='cuda'). Expected: healthy."""

from __future__ import annotations

import torch
from common import BATCH, WIDTH, model, run

net = model("cuda")
opt = torch.optim.SGD(net.parameters(), lr=1e-3)
SHAPE = (BATCH // 8, WIDTH)


def step(_i: int) -> None:
    x = torch.randn(SHAPE, dtype=torch.bfloat16, device="cuda")
    loss = net(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


run("made_on_device", step, torch.cuda.synchronize)
