"""Utilisation monitoring: polls every GPU through the Nvml wrapper for a window and reduces the
readings to one GpuUtilisation per GPU (means, p95, peaks, throttling). No torch.

Each reading is taken at the end of its interval: NVML's utilisation figures describe the period
just before the query, so readings at interval, 2 x interval, ... up to the duration cover the
window. A reading that NVML does not support (None) is left out of its figure, never a crash.
"""

from __future__ import annotations

import math
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from probes.nvml import Nvml
from probes.report import GpuUtilisation
from probes.stats import quantile

# Clock-event reasons that mean a hardware or thermal limit held the clocks back (nvml.h). Idle,
# application clocks, sync boost and display clocks are settings or states, not limits; and
# sw_power_cap is a busy GPU holding its power limit, normal under full load (seen on our H200
# running bf16 matmuls at 71% of readings), so it does not count as throttled either.
LIMIT_REASONS = frozenset(
    {
        "hw_slowdown",
        "hw_power_brake_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
    }
)
PROGRESS_STEPS = 10  # progress messages per window (one every 10 %)
_MIB = 1024 * 1024

Progress = Callable[[str], None]


def format_span(seconds: float) -> str:
    """A window length as people say it: '45 s', '10 min', '1 h 30 min'."""
    if seconds < 60:
        return f"{seconds:.3g} s"
    minutes = round(seconds / 60, 1)
    if minutes < 60:
        return f"{minutes:g} min"
    hours, rest = divmod(round(seconds / 60), 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


def percentile(values: Sequence[float], q: float) -> float | None:
    """Quantile of unsorted values (see probes.stats.quantile)."""
    return quantile(sorted(values), q)


@dataclass
class _Stat:
    """A running mean and peak: a long window keeps no list of these readings."""

    count: int = 0
    total: float = 0.0
    peak: float | None = None
    last: float | None = None

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.peak = value if self.peak is None else max(self.peak, value)
        self.last = value

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass
class GpuSeries:
    """The readings of one GPU over the window."""

    index: int
    handle: Any
    uuid: str | None
    name: str | None
    samples: int = 0
    util_gpu: array[float] = field(default_factory=lambda: array("d"))  # all kept, for the p95
    util_memory: _Stat = field(default_factory=_Stat)
    memory_used_mib: _Stat = field(default_factory=_Stat)
    memory_total_mib: _Stat = field(default_factory=_Stat)
    power_w: _Stat = field(default_factory=_Stat)
    power_limit_w: _Stat = field(default_factory=_Stat)
    reasons: set[str] = field(default_factory=set)
    throttle_readings: int = 0  # readings where the clock-event reasons could be read
    limited: int = 0  # of those, readings with a power or thermal limit active

    def read(self, nvml: Nvml) -> None:
        lib, soft, h = nvml.lib, nvml.soft, self.handle
        self.add(
            soft(lib.nvmlDeviceGetUtilizationRates, h),
            soft(lib.nvmlDeviceGetMemoryInfo, h),
            soft(lib.nvmlDeviceGetPowerUsage, h),
            soft(lib.nvmlDeviceGetEnforcedPowerLimit, h),
            nvml._throttle(h),
        )

    def add(
        self, util: Any, mem: Any, draw_mw: int | None, limit_mw: int | None, reasons: Any
    ) -> None:
        """One reading, as NVML returned it (None: not readable): `advisor doctor` reads the
        same queries for its own samples and adds them here."""
        self.samples += 1
        if util is not None:
            self.util_gpu.append(float(util.gpu))
            self.util_memory.add(float(util.memory))
        if mem is not None:
            self.memory_used_mib.add(mem.used / _MIB)
            self.memory_total_mib.add(mem.total / _MIB)
        if draw_mw is not None:
            self.power_w.add(draw_mw / 1000.0)
        if limit_mw is not None:
            self.power_limit_w.add(limit_mw / 1000.0)
        if reasons is not None:
            self.throttle_readings += 1
            active = set(reasons) - {"gpu_idle"}  # not a limit: the GPU simply had no work
            self.reasons |= active
            self.limited += bool(active & LIMIT_REASONS)

    def result(self) -> GpuUtilisation:
        util = self.util_gpu
        return GpuUtilisation(
            index=self.index,
            uuid=self.uuid,
            name=self.name,
            samples=self.samples,
            util_gpu_mean_pct=_round(sum(util) / len(util) if util else None, 2),
            util_gpu_p95_pct=_round(percentile(util, 0.95), 2),
            util_memory_mean_pct=_round(self.util_memory.mean, 2),
            memory_used_max_mib=_round(self.memory_used_mib.peak, 1),
            memory_total_mib=_round(self.memory_total_mib.last, 1),
            power_mean_w=_round(self.power_w.mean, 2),
            power_limit_w=self.power_limit_w.last,  # the limit in force at the end
            throttle_reasons=sorted(self.reasons),
            throttled_fraction=(
                round(self.limited / self.throttle_readings, 4) if self.throttle_readings else None
            ),
        )


def sample(
    nvml: Nvml,
    duration_s: float,
    interval_s: float,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
) -> list[GpuUtilisation]:
    """Poll every GPU for `duration_s`, a reading every `interval_s`; one result per GPU.

    Raises EnvironmentProblem when NVML cannot be reached. Setting `stop` ends the window early
    (after one last reading), so that Ctrl-C still yields the figures gathered so far.
    """
    if duration_s <= 0 or interval_s <= 0:
        raise ValueError("duration and interval must be positive")
    stop = stop or threading.Event()
    series = []
    lib, soft = nvml.lib, nvml.soft
    for i in range(nvml.device_count()):
        h = nvml.handle(i)
        index = soft(lib.nvmlDeviceGetIndex, h)
        name, uuid = soft(lib.nvmlDeviceGetName, h), soft(lib.nvmlDeviceGetUUID, h)
        series.append(GpuSeries(i if index is None else index, h, _text(uuid), _text(name)))
    if not series:
        return []
    say = progress or (lambda _msg: None)
    say(
        f"sampling {len(series)} GPU(s) every {format_span(interval_s)} "
        f"for {format_span(duration_s)}"
    )
    ticks = max(1, math.ceil(duration_s / interval_s - 1e-9))
    step = max(1, ticks // PROGRESS_STEPS)
    start = time.monotonic()
    for k in range(1, ticks + 1):
        due = start + min(k * interval_s, duration_s)
        stopped = stop.wait(max(0.0, due - time.monotonic()))
        for s in series:
            s.read(nvml)
        elapsed = time.monotonic() - start
        if stopped:
            say(f"stopped after {format_span(elapsed)} ({k} reading(s) per GPU)")
            break
        if k % step == 0 and k < ticks:
            say(f"{format_span(elapsed)} of {format_span(duration_s)} sampled")
    return [s.result() for s in series]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
