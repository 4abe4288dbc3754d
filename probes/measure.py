"""The measurements. Each takes a TorchDevice and sizes, returns a Measurement (probes.stats).

Buffers are freed when a measurement returns; the runner then empties the allocator cache.

Conventions: TFLOP/s = 2·n³ per matmul / seconds / 1e12; GB/s = 1e9 bytes per second; a D2D copy
counts bytes read plus bytes written (2 x the buffer), as nvbandwidth does
(docs/reference-figures.md).
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

from probes.device import TorchDevice
from probes.stats import Measurement, summarize

MATMUL_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")
GB = 1e9


def pick_matmul_n(dev: TorchDevice, elem_bytes: int, preferred: int) -> int:
    """Largest square size up to `preferred` whose three operands fit in a quarter of free."""
    budget = dev.free_bytes() * 0.25
    n = preferred
    while n > 256 and 3 * n * n * elem_bytes > budget:
        n //= 2
    return n


def matmul(dev: TorchDevice, dtype: str, n: int, repeats: int) -> Measurement:
    torch = dev.torch
    name = f"matmul_{dtype}" if dev.is_cuda else f"cpu_matmul_{dtype}"
    with dev.oom_guard(f"{name} at n={n}"):
        fn, params = _matmul_fn(dev, dtype, n)
        previous_tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        try:
            fn()  # library set-up (handles, kernels) stays out of every timed region
            inner = dev.calibrate_inner(fn)
            seconds = dev.time(fn, inner=inner, repeats=repeats)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous_tf32
        flops = 2.0 * n**3
        rates = [flops / s / 1e12 for s in seconds]
    # Power-capped GPUs start fast and settle lower: the second half shows the sustained rate.
    sustained = statistics.median(rates[len(rates) // 2 :])
    return summarize(
        name,
        "TFLOP/s",
        rates,
        "max",
        n=n,
        inner=inner,
        repeats=repeats,
        sustained=sustained,
        **params,
    )


def _matmul_fn(dev: TorchDevice, dtype: str, n: int) -> tuple[Any, dict[str, Any]]:
    torch = dev.torch
    gen = torch.Generator(device=dev.device).manual_seed(0)
    if dtype == "fp8":
        if not dev.is_cuda or torch.cuda.get_device_capability(dev.device) < (8, 9):
            raise NotImplementedError("fp8 matmul needs compute capability 8.9 or newer")
        a = torch.randn(n, n, device=dev.device, generator=gen).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=dev.device, generator=gen).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=dev.device)

        def fp8() -> object:
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        return fp8, {"dtype": "float8_e4m3fn", "out_dtype": "bfloat16", "op": "torch._scaled_mm"}
    torch_dtype = {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
    }[dtype]
    a = torch.randn(n, n, device=dev.device, dtype=torch_dtype, generator=gen)
    b = torch.randn(n, n, device=dev.device, dtype=torch_dtype, generator=gen)
    c = torch.empty(n, n, device=dev.device, dtype=torch_dtype)

    def mm() -> object:
        return torch.matmul(a, b, out=c)

    return mm, {"dtype": str(torch_dtype).removeprefix("torch."), "tf32": dtype == "tf32"}


def _host_buffer(dev: TorchDevice, nbytes: int, pinned: bool) -> Any:
    """Host bytes with random content, filled from the device (fast) outside any timed region."""
    torch = dev.torch
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
    src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=dev.device)
    host.copy_(src)
    dev.sync()
    return host


def transfer(dev: TorchDevice, kind: str, nbytes: int, repeats: int) -> Measurement:
    """h2d_pinned, d2h_pinned, h2d_pageable, d2h_pageable: one direction, one stream."""
    torch = dev.torch
    direction, memory = kind.split("_")
    with dev.oom_guard(f"{kind} of {nbytes >> 20} MiB"):
        host = _host_buffer(dev, nbytes, pinned=memory == "pinned")
        gpu = torch.empty(nbytes, dtype=torch.uint8, device=dev.device)
        gpu.random_(0, 256)
        blocking = memory == "pageable"  # a pageable copy is staged by the driver anyway
        if direction == "h2d":

            def fn() -> object:
                return gpu.copy_(host, non_blocking=not blocking)
        else:

            def fn() -> object:
                return host.copy_(gpu, non_blocking=not blocking)

        inner = max(1, min(8, dev.calibrate_inner(fn)))
        seconds = dev.time(fn, inner=inner, repeats=repeats)
    rates = [nbytes / s / GB for s in seconds]
    return summarize(
        kind,
        "GB/s",
        rates,
        "max",
        bytes=nbytes,
        inner=inner,
        repeats=repeats,
        convention="bytes copied per second, one direction",
    )


def bidirectional(dev: TorchDevice, nbytes: int, repeats: int) -> Measurement:
    """H2D and D2H pinned at once on two streams; reports the sum of both directions."""
    torch = dev.torch
    with dev.oom_guard(f"bidir_pinned of 2 x {nbytes >> 20} MiB"):
        up_host = _host_buffer(dev, nbytes, pinned=True)
        down_host = _host_buffer(dev, nbytes, pinned=True)
        up_gpu = torch.empty(nbytes, dtype=torch.uint8, device=dev.device)
        down_gpu = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=dev.device)
        s_up, s_down = dev.stream(), dev.stream()
        main = torch.cuda.current_stream(dev.device)
        samples = []
        for i in range(repeats + 2):
            start, end_up, end_down = dev.event(), dev.event(), dev.event()
            start.record(main)
            s_up.wait_event(start)
            s_down.wait_event(start)
            with torch.cuda.stream(s_up):
                up_gpu.copy_(up_host, non_blocking=True)
                end_up.record(s_up)
            with torch.cuda.stream(s_down):
                down_host.copy_(down_gpu, non_blocking=True)
                end_down.record(s_down)
            # the next start must not be stamped while this sample's copies still run
            main.wait_event(end_up)
            main.wait_event(end_down)
            if i >= 2:  # the first two are warm-up
                samples.append((start, end_up, end_down))
        dev.sync()
        seconds = [max(s.elapsed_time(u), s.elapsed_time(d)) / 1000.0 for s, u, d in samples]
    rates = [2 * nbytes / s / GB for s in seconds]
    return summarize(
        "bidir_pinned",
        "GB/s",
        rates,
        "max",
        bytes_each_way=nbytes,
        repeats=repeats,
        convention="bytes moved in both directions together per second",
    )


def d2d(dev: TorchDevice, nbytes: int, repeats: int) -> Measurement:
    torch = dev.torch
    name = "d2d" if dev.is_cuda else "cpu_memcpy"
    with dev.oom_guard(f"{name} of {nbytes >> 20} MiB"):
        src = torch.empty(nbytes, dtype=torch.uint8, device=dev.device)
        src.random_(0, 256)
        dst = torch.empty_like(src)

        def fn() -> object:
            return dst.copy_(src)

        inner = dev.calibrate_inner(fn, max_inner=50)
        seconds = dev.time(fn, inner=inner, repeats=repeats)
    rates = [2 * nbytes / s / GB for s in seconds]
    return summarize(
        name,
        "GB/s",
        rates,
        "max",
        bytes=nbytes,
        inner=inner,
        repeats=repeats,
        convention="bytes read + bytes written (2 x buffer) per second",
    )


def stream_overlap(dev: TorchDevice, nbytes: int, repeats: int, n: int = 8192) -> Measurement:
    """A pinned non_blocking H2D copy on one stream while bf16 matmuls run on another."""
    torch = dev.torch
    with dev.oom_guard("stream_overlap"):
        host = _host_buffer(dev, nbytes, pinned=True)
        gpu = torch.empty(nbytes, dtype=torch.uint8, device=dev.device)
        a = torch.randn(n, n, device=dev.device, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=dev.device, dtype=torch.bfloat16)
        c = torch.empty_like(a)
        s_copy, s_comp = dev.stream(), dev.stream()
        main = torch.cuda.current_stream(dev.device)

        def copy() -> None:
            gpu.copy_(host, non_blocking=True)

        def mm() -> None:
            torch.matmul(a, b, out=c)

        mm()
        copy()
        t_copy_once = dev.time_once(copy)
        t_mm_once = dev.time_once(mm)
        k = max(1, round(t_copy_once / t_mm_once))  # compute about as long as the copy

        def compute() -> None:
            for _ in range(k):
                mm()

        def timed(launch: Any) -> list[tuple[Any, list[Any]]]:
            out = []
            for i in range(repeats + 1):
                start = dev.event()
                start.record(main)
                ends = launch(start)
                for end in ends:  # the next start waits until this sample is done
                    main.wait_event(end)
                if i:
                    out.append((start, ends))
            return out

        def on(stream: Any, start: Any, work: Any) -> Any:
            stream.wait_event(start)
            end = dev.event()
            with torch.cuda.stream(stream):
                work()
                end.record(stream)
            return end

        def serial_work() -> None:
            copy()
            compute()

        runs = {
            "copy": timed(lambda st: [on(s_copy, st, copy)]),
            "compute": timed(lambda st: [on(s_comp, st, compute)]),
            "concurrent": timed(lambda st: [on(s_copy, st, copy), on(s_comp, st, compute)]),
            "serial": timed(lambda st: [on(s_comp, st, serial_work)]),
        }
        dev.sync()
        ms = {
            key: statistics.median(max(s.elapsed_time(e) for e in ends) for s, ends in samples)
            for key, samples in runs.items()
        }
        per_sample = [
            (ms["copy"] + ms["compute"] - max(s.elapsed_time(e) for e in ends))
            / min(ms["copy"], ms["compute"])
            for s, ends in runs["concurrent"]
        ]
    efficiency = (ms["copy"] + ms["compute"] - ms["concurrent"]) / min(ms["copy"], ms["compute"])
    m = summarize(
        "stream_overlap",
        "ratio",
        per_sample,
        bytes=nbytes,
        matmuls=k,
        n=n,
        repeats=repeats,
        copy_ms=ms["copy"],
        compute_ms=ms["compute"],
        concurrent_ms=ms["concurrent"],
        serial_ms=ms["serial"],
        formula="(t_copy + t_compute - t_concurrent) / min(t_copy, t_compute)",
    )
    m.value = efficiency  # from the medians of each timing, as the formula states
    m.statistic = "formula"
    return m


def host_sync_penalty(dev: TorchDevice, steps: int, n: int = 2048) -> Measurement:
    """The same loop with and without a host read (.item()) every step."""
    torch = dev.torch
    a = torch.randn(n, n, device=dev.device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev.device, dtype=torch.bfloat16)

    def loop(read: bool) -> float:
        dev.sync()
        t0 = time.perf_counter()
        total = torch.zeros((), device=dev.device)
        for _ in range(steps):
            total += (a @ b).float().mean()
            if read:
                total.item()  # forces the host to wait for the device every step
        dev.sync()
        return time.perf_counter() - t0

    loop(False)
    loop(True)
    pairs = [(loop(False), loop(True)) for _ in range(3)]
    no_sync = statistics.median(p[0] for p in pairs)
    with_sync = statistics.median(p[1] for p in pairs)
    penalties = [(w - f) / steps * 1e6 for f, w in pairs]
    m = summarize(
        "host_sync_penalty",
        "us/step",
        penalties,
        steps=steps,
        n=n,
        no_sync_ms=no_sync * 1e3,
        with_sync_ms=with_sync * 1e3,
        slowdown=with_sync / no_sync if no_sync else math.nan,
    )
    return m
