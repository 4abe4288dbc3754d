"""Runs the probe: inspect the machine, then each measurement under a watchdog.

Returns a ProbeRun (inventory, diagnosis, measurements); advisor verifies it against the catalog.
One failing measurement becomes a Measurement with `error` set; the others still run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from probes import cpu, measure
from probes.burn import burn
from probes.device import TorchDevice
from probes.environment import Environment, gpu_key, import_torch, inspect
from probes.errors import MeasurementError, WatchdogTimeout
from probes.nvml import LoadSampler, Nvml
from probes.report import Diagnosis, Inventory
from probes.stats import Measurement, failed
from probes.watchdog import run_with_watchdog

Mode = Literal["quick", "full"]
GPU_STEPS = (
    "matmul_fp32",
    "matmul_tf32",
    "matmul_fp16",
    "matmul_bf16",
    "matmul_fp8",
    "h2d_pinned",
    "d2h_pinned",
    "h2d_pageable",
    "d2h_pageable",
    "bidir_pinned",
    "d2d",
    "stream_overlap",
    "host_sync_penalty",
)
CPU_STEPS = ("cpu_matmul_fp32", "cpu_memcpy")
MiB = 1 << 20


@dataclass(frozen=True)
class Plan:
    """Sizes and repeats for one mode (quick is the default on a fresh VM)."""

    matmul_n: int
    matmul_repeats: int
    transfer_bytes: int
    transfer_repeats: int
    overlap_bytes: int
    overlap_repeats: int
    sync_steps: int
    watchdog_s: float


PLANS: dict[str, Plan] = {
    "quick": Plan(8192, 8, 256 * MiB, 10, 256 * MiB, 5, 100, 60.0),
    "full": Plan(8192, 30, 1024 * MiB, 20, 1024 * MiB, 10, 300, 120.0),
}


@dataclass
class ProbeRun:
    created_at: dt.datetime
    mode: Mode
    device: int
    inventory: Inventory
    diagnosis: list[Diagnosis]
    measurements: list[Measurement] = field(default_factory=list)
    duration_s: float = 0.0
    watchdog_tripped: bool = False

    @property
    def gpu_measured(self) -> bool:
        return not self.diagnosis


Progress = Callable[[str], None]


def run_probe(
    mode: Mode = "quick",
    device: int = 0,
    *,
    nvml: Nvml | None = None,
    torch_loader: Callable[[], Any] = import_torch,
    progress: Progress | None = None,
    environ: dict[str, str] | None = None,
    only: set[str] | None = None,
    watchdog_s: float | None = None,
    lock: Callable[[str], contextlib.AbstractContextManager[object]] | None = None,
    keep_nvml: bool = False,
    burn_s: float | None = None,
) -> ProbeRun:
    """Inspect, then measure. `lock(gpu_key)` is entered around the GPU measurements so that two
    probes on one GPU never measure each other (it may raise LockBusy). NVML is shut down at the
    end unless `keep_nvml` (the node probe reads health counters afterwards)."""
    started = time.perf_counter()
    say = progress or (lambda _msg: None)
    nvml = nvml or Nvml()
    say("inspecting the machine")
    env = inspect(device, nvml, torch_loader, environ)
    run = ProbeRun(dt.datetime.now(dt.UTC), mode, device, env.inventory, env.diagnosis)
    plan = PLANS[mode]
    limit = watchdog_s if watchdog_s is not None else plan.watchdog_s
    steps = _steps(env, device, plan, only, burn_s, nvml)
    sampler = LoadSampler(nvml, env.nvml_handle) if env.nvml_handle is not None else None
    guard = lock(gpu_key(env, device)) if lock and env.gpu_usable else contextlib.nullcontext()
    try:
        with guard, sampler or contextlib.nullcontext():
            _measure(run, steps, limit, burn_s, say, (env, device))
    finally:
        if not keep_nvml:
            nvml.shutdown()
    if sampler is not None:
        run.inventory.under_load = sampler.result()
    run.duration_s = time.perf_counter() - started
    return run


Step = tuple[str, str, Callable[[], Measurement]]


def _steps(
    env: Environment,
    device: int,
    plan: Plan,
    only: set[str] | None,
    burn_s: float | None,
    nvml: Nvml,
) -> list[Step]:
    """The measurements to run: the GPU's (or the CPU's), those named in `only`, and the burn
    last (its heat would slow the others)."""
    steps = gpu_steps(env, device, plan) if env.gpu_usable else cpu_steps(env)
    steps = [s for s in steps if only is None or s[0] in only]
    if burn_s and env.gpu_usable:
        dev = TorchDevice(env.torch, device)
        steps.append(("burn_bf16", "TFLOP/s", partial(burn, dev, burn_s, nvml, env.nvml_handle)))
    return steps


def _measure(
    run: ProbeRun,
    steps: list[Step],
    limit: float,
    burn_s: float | None,
    say: Progress,
    where: tuple[Environment, int],
) -> None:
    """Each step under the watchdog, in order; once one hangs, the rest are listed as not run."""
    env, device = where
    for i, (name, unit, step) in enumerate(steps, 1):
        if run.watchdog_tripped:
            run.measurements.append(failed(name, unit, "not run: an earlier step hung"))
            continue
        say(f"[{i}/{len(steps)}] measuring {name}")
        step_limit = limit + (burn_s or 0) if name == "burn_bf16" else limit
        run.measurements.append(_run_step(name, unit, step, step_limit, run))
        if not run.watchdog_tripped:  # syncing a hung device would hang the probe too
            _release(env, device)


def gpu_steps(env: Environment, device: int, plan: Plan) -> list[Step]:
    dev = TorchDevice(env.torch, device)
    elem_bytes = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}

    def matmul(dtype: str) -> Measurement:
        n = measure.pick_matmul_n(dev, elem_bytes[dtype], plan.matmul_n)
        return measure.matmul(dev, dtype, n, plan.matmul_repeats)

    def size() -> int:  # sized from free memory when the step starts
        return min(plan.transfer_bytes, int(dev.free_bytes() * 0.2))

    def transfer(kind: str) -> Measurement:
        return measure.transfer(dev, kind, size(), plan.transfer_repeats)

    steps: list[Step] = [
        (f"matmul_{d}", "TFLOP/s", partial(matmul, d)) for d in measure.MATMUL_DTYPES
    ]
    steps += [
        (k, "GB/s", partial(transfer, k))
        for k in ("h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable")
    ]
    steps += [
        ("bidir_pinned", "GB/s", lambda: measure.bidirectional(dev, size(), plan.transfer_repeats)),
        ("d2d", "GB/s", lambda: measure.d2d(dev, size(), plan.transfer_repeats)),
        (
            "stream_overlap",
            "ratio",
            lambda: measure.stream_overlap(dev, plan.overlap_bytes, plan.overlap_repeats),
        ),
        ("host_sync_penalty", "us/step", lambda: measure.host_sync_penalty(dev, plan.sync_steps)),
    ]
    return steps


def cpu_steps(env: Environment) -> list[Step]:
    """Without a usable GPU: CPU figures through the same harness; without torch, through
    probes.cpu (a memoryview copy; numpy's matmul, when numpy is there)."""
    if env.torch is None:
        return [
            ("cpu_matmul_fp32", "TFLOP/s", partial(cpu.matmul, 1024, 5)),
            ("cpu_memcpy", "GB/s", partial(cpu.memcpy, 128 * MiB, 5)),
        ]
    dev = TorchDevice(env.torch, None)
    return [
        ("cpu_matmul_fp32", "TFLOP/s", partial(measure.matmul, dev, "fp32", 1024, 5)),
        ("cpu_memcpy", "GB/s", partial(measure.d2d, dev, 128 * MiB, 5)),
    ]


def _run_step(
    name: str, unit: str, step: Callable[[], Measurement], limit: float, run: ProbeRun
) -> Measurement:
    try:
        return run_with_watchdog(step, limit, name)
    except WatchdogTimeout as exc:
        run.watchdog_tripped = True
        return failed(name, unit, str(exc))
    except NotImplementedError as exc:
        return failed(name, unit, f"unsupported: {exc}")
    except MeasurementError as exc:
        return failed(name, unit, str(exc))
    except Exception as exc:  # one broken measurement never loses the others
        return failed(name, unit, f"{type(exc).__name__}: {exc}")


def _release(env: Environment, device: int) -> None:
    if env.gpu_usable and env.torch is not None:
        try:
            TorchDevice(env.torch, device).release()
        except Exception:  # releasing is best effort; the next step reports real failures
            return
