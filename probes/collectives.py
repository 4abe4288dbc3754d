"""Collective bus bandwidth through torch.distributed (NCCL on GPUs, gloo on CPUs).

nccl-tests conventions (docs/reference-figures.md section 3): the message size is the whole buffer
(all-gather's output, reduce-scatter's input); algbw = size / time; busbw = algbw x 2(n-1)/n for
all-reduce and x (n-1)/n for all-gather, reduce-scatter and all-to-all. Every rank of the group
calls the same operations in the same order; the time of a sample is the slowest rank's, agreed
through the coordination group.
"""

from __future__ import annotations

import math
from typing import Any

from probes.device import TARGET_SAMPLE_S, TorchDevice
from probes.stats import Measurement, failed, summarize

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
GB = 1e9
MAX_INNER = 50


def bus_factor(op: str, ranks: int) -> float:
    if op == "all_reduce":
        return 2 * (ranks - 1) / ranks
    return (ranks - 1) / ranks


def size_label(nbytes: int) -> str:
    """8M, 256M, 1G, 16G: as nccl-tests and the health checks name message sizes."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return f"{nbytes}B"


def parse_size(text: str) -> int:
    """The inverse of size_label: "16G" -> 16 GiB (the health checks' sizes are binary)."""
    units = {"K": 10, "M": 20, "G": 30}
    text = text.strip().upper().removesuffix("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * (1 << units[text[-1]]))
    return int(text)


class Collectives:
    """Measures collectives on `group`, agreeing sample times through `coord` (a gloo group)."""

    def __init__(
        self, torch: Any, group: Any, coord: Any, device: Any, ranks: int, scope: str
    ) -> None:
        self.torch, self.dist = torch, torch.distributed
        self.group, self.coord, self.device = group, coord, device
        self.ranks, self.scope = ranks, scope
        cuda = getattr(device, "type", "cpu") == "cuda"
        self.timer = TorchDevice(torch, device.index if cuda else None)

    def measure(self, op: str, nbytes: int, repeats: int, name: str | None = None) -> Measurement:
        label = name or f"{op}_{size_label(nbytes)}"
        try:
            fn = self._op(op, nbytes)
            fn()  # communicator set-up and first-call costs stay out of the timed region
            once = self._agree(self._time(fn, 1, 1)[0])
            inner = max(1, min(MAX_INNER, math.ceil(TARGET_SAMPLE_S / max(once, 1e-7))))
            seconds = [self._agree(s) for s in self._time(fn, inner, repeats)]
        except NotImplementedError as exc:
            return failed(label, "GB/s", f"unsupported: {exc}")
        except RuntimeError as exc:
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            unsupported = "does not support" in text or "not supported" in text
            prefix = "unsupported: " if unsupported else ""
            return failed(label, "GB/s", f"{prefix}{op} on {self.ranks} rank(s): {text}")
        factor = bus_factor(op, self.ranks)
        algbw = [nbytes / s / GB for s in seconds]
        m = summarize(
            label,
            "GB/s",
            [a * factor for a in algbw],
            op=op,
            bytes=nbytes,
            ranks=self.ranks,
            inner=inner,
            repeats=repeats,
            scope=self.scope,
            algbw_median=sorted(algbw)[len(algbw) // 2],
            bus_factor=factor,
            convention="nccl-tests busbw: size / time x bus factor; the slowest rank's time",
        )
        return m

    def _op(self, op: str, nbytes: int) -> Any:
        torch, dist, group = self.torch, self.dist, self.group
        count = max(self.ranks, nbytes // 4 // self.ranks * self.ranks)  # float32 elements
        if op == "all_reduce":
            buf = torch.ones(count, dtype=torch.float32, device=self.device)
            return lambda: dist.all_reduce(buf, group=group)
        part = torch.ones(count // self.ranks, dtype=torch.float32, device=self.device)
        whole = torch.ones(count, dtype=torch.float32, device=self.device)
        # torch 2.13 renames the tensor forms *_single; older releases have only the old names
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        if op == "all_gather":
            return lambda: gather(whole, part, group=group)
        if op == "reduce_scatter":
            return lambda: scatter(part, whole, group=group)
        if op == "all_to_all":  # every rank sends 1/n of its buffer to each (MoE dispatch)
            received = torch.empty_like(whole)
            return lambda: dist.all_to_all_single(received, whole, group=group)
        raise ValueError(f"unknown collective {op!r}")

    def _time(self, fn: Any, inner: int, repeats: int) -> list[float]:
        """Seconds per operation on this rank, the ranks starting together: TorchDevice.time
        (CUDA events read after one final synchronisation; the host clock on a CPU)."""
        self.dist.barrier(group=self.coord)
        return self.timer.time(fn, inner=inner, repeats=repeats, warmup=0)

    def _agree(self, seconds: float) -> float:
        """The slowest rank's figure: every rank gets the same one (and the same `inner`)."""
        t = self.torch.tensor([seconds], dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self.coord)
        return float(t.item())
