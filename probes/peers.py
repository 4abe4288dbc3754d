"""Peer-to-peer copies between every ordered pair of a node's GPUs, from one process that sees
them all: one direction (`p2p_copy`, GPU i -> j) and both at once (`p2p_bidir`, i <-> j summed).

GB/s are bytes copied per second. Each sample synchronises both devices around `inner` copies and
reads the host clock: the sync is outside the copies, one per sample (not per copy).
"""

from __future__ import annotations

import math
import time
from typing import Any

from probes.stats import Measurement, failed, summarize

GB = 1e9
TARGET_SAMPLE_S = 0.025


def copy(torch: Any, src: int, dst: int, nbytes: int, repeats: int) -> Measurement:
    try:
        a = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{src}").random_(0, 256)
        b = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{dst}")

        def fn() -> None:
            b.copy_(a, non_blocking=True)

        seconds, inner = _timed(torch, (src, dst), fn, repeats)
    except RuntimeError as exc:
        return _failed("p2p_copy", src, dst, exc)
    m = summarize(
        "p2p_copy",
        "GB/s",
        [nbytes / s / GB for s in seconds],
        bytes=nbytes,
        inner=inner,
        repeats=repeats,
        peer_access=bool(torch.cuda.can_device_access_peer(src, dst)),
        convention="bytes copied per second, one direction",
    )
    m.gpu, m.peer = src, dst
    return m


def bidirectional(torch: Any, i: int, j: int, nbytes: int, repeats: int) -> Measurement:
    try:
        a_i = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{i}").random_(0, 256)
        a_j = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{j}").random_(0, 256)
        b_i, b_j = torch.empty_like(a_i), torch.empty_like(a_j)
        s_i, s_j = torch.cuda.Stream(device=i), torch.cuda.Stream(device=j)

        def fn() -> None:
            with torch.cuda.stream(s_i):
                b_j.copy_(a_i, non_blocking=True)
            with torch.cuda.stream(s_j):
                b_i.copy_(a_j, non_blocking=True)

        seconds, inner = _timed(torch, (i, j), fn, repeats, streams=(s_i, s_j))
    except RuntimeError as exc:
        return _failed("p2p_bidir", i, j, exc)
    m = summarize(
        "p2p_bidir",
        "GB/s",
        [2 * nbytes / s / GB for s in seconds],
        bytes_each_way=nbytes,
        inner=inner,
        repeats=repeats,
        convention="bytes moved in both directions together per second",
    )
    m.gpu, m.peer = i, j
    return m


def _timed(
    torch: Any, devices: tuple[int, int], fn: Any, repeats: int, streams: tuple[Any, ...] = ()
) -> tuple[list[float], int]:
    def sync() -> None:
        for s in streams:
            s.synchronize()
        for d in devices:
            torch.cuda.synchronize(d)

    def sample(inner: int) -> float:
        sync()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        return (time.perf_counter() - t0) / inner

    sample(2)  # peer mappings and first-copy costs stay out
    inner = max(1, min(200, math.ceil(TARGET_SAMPLE_S / max(sample(1), 1e-7))))
    return [sample(inner) for _ in range(repeats)], inner


def _failed(name: str, gpu: int, peer: int, exc: Exception) -> Measurement:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    m = failed(name, "GB/s", f"GPU {gpu} -> {peer}: {text}")
    m.gpu, m.peer = gpu, peer
    return m
