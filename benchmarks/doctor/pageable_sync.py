"""Pitfall: each step copies its batch from pageable host memory with a blocking .to('cuda'),
and prints the loss (a host-device sync every step). Expected: transfer_bound and sync_bound."""

from __future__ import annotations

import torch
from common import host_batches, model, run

data = host_batches()
net = model("cuda")
opt = torch.optim.SGD(net.parameters(), lr=1e-3)


def step(i: int) -> None:
    x = data[i % len(data)].to("cuda")
    loss = net(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(loss)


run("pageable_sync", step, torch.cuda.synchronize)
