"""One look at every GPU of this machine for `advisor doctor --node`: activity over a short
window (GPM's SM activity where the GPU has it, else NVML's kernel-time share), memory, power and
the processes on each GPU with their memory. No torch; NVML behind probes.nvml."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from probes.job_sampler import JobSampler
from probes.nvml import Nvml
from probes.report import MAX_ITEMS, GpuUtilisation, ProcessInfo


class NodeGpuReading(BaseModel):
    model_config = ConfigDict(extra="forbid")

    index: int
    name: str | None = None
    sm_active_pct: float | None = None  # GPM, over the window
    util_gpu_pct: float | None = None  # NVML: share of time any kernel ran
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    power_w: float | None = None
    # None: NVML cannot list the GPU's processes (another container's are not visible either)
    processes: list[ProcessInfo] | None = Field(None, max_length=MAX_ITEMS)


def read_node(
    nvml: Nvml, window_s: float
) -> tuple[list[NodeGpuReading], list[GpuUtilisation], list[str]]:
    """Every GPU read at the start and the end of `window_s` seconds (GPM's activity is the
    change between the two); the monitor's summaries (for the pricing) and what was unmeasured."""
    sampler = JobSampler(nvml, _no_job, window_s)
    sampler.start()
    time.sleep(window_s)
    sampler.stop()
    last = sampler.samples[-1] if sampler.samples else None
    names = {s.index: s.name for s in sampler.summaries()}
    out = []
    for g in last.gpus if last is not None else []:
        handle = nvml.handle(g.index)
        out.append(
            NodeGpuReading(
                index=g.index,
                name=names.get(g.index),
                sm_active_pct=g.sm_active_pct,
                util_gpu_pct=g.util_gpu_pct,
                memory_used_mib=g.memory_used_mib,
                memory_total_mib=sampler.memory_total_mib.get(g.index),
                power_w=g.power_w,
                processes=nvml._processes(handle),
            )
        )
    return out, sampler.summaries(), sampler.unmeasured


def _no_job() -> list[Any]:
    return []
