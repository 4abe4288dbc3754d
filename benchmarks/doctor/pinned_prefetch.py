"""The fix of pageable_sync.py: batches in pinned memory, copied with non_blocking=True on a
second stream one step ahead, the loss kept on the GPU and read every 100 steps. Expected:
healthy."""

from __future__ import annotations

import torch
from common import host_batches, model, run

data = host_batches()
net = model("cuda")
opt = torch.optim.SGD(net.parameters(), lr=1e-3)
data = data.pin_memory()
copy_stream = torch.cuda.Stream()
ahead: dict[int, tuple[torch.Tensor, torch.cuda.Event]] = {}
loss_sum = [torch.zeros((), device="cuda")]  # on the GPU: no sync until it is read


def prefetch(i: int) -> None:
    with torch.cuda.stream(copy_stream):
        x = data[i % len(data)].to("cuda", non_blocking=True)
        done = torch.cuda.Event()
        done.record(copy_stream)
    ahead[i] = (x, done)


def step(i: int) -> None:
    if i not in ahead:
        prefetch(i)
    x, done = ahead.pop(i)
    torch.cuda.current_stream().wait_event(done)
    x.record_stream(torch.cuda.current_stream())
    prefetch(i + 1)
    loss = net(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    loss_sum[0] = loss_sum[0] + loss.detach()
    if i % 100 == 99:
        print(f"step {i + 1}: mean loss {loss_sum[0].item() / 100:.4f}")
        loss_sum[0] = torch.zeros((), device="cuda")


run("pinned_prefetch", step, torch.cuda.synchronize)
