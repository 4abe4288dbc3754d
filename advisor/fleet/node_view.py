"""What `advisor doctor --node` says of every GPU of a machine at one look: its state, the
processes on it and their finding, and the dollars an hour the node leaves idle or under-used.
Pure, no I/O.

States, by the GPU's activity (GPM's SM activity, else NVML's kernel-time share) and whether a
process holds it:
- idle_reservation: a process holds it (a context and memory) and no kernel ran in the window
  (activity at most job_diagnosis.STARTED_PCT): its whole price is idle;
- free: no process on it and no kernel: its whole price is idle (a GPU nobody uses);
- under_used: activity below job_diagnosis.ACTIVE_LOW_PCT: the idle share of its price is
  under-used;
- busy: the rest; unknown: activity or the process list unreadable.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.fleet.job_diagnosis import ACTIVE_LOW_PCT, STARTED_PCT
from probes.node_view import NodeGpuReading
from probes.report import MAX_ITEMS, ProcessInfo

GpuState = Literal["idle_reservation", "free", "under_used", "busy", "unknown"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NodeProcess(ProcessInfo):
    finding: Literal["idle_reservation", "under_used"] | None = None


class NodeGpu(_Model):
    index: int
    name: str | None = None
    state: GpuState
    active_pct: float | None = None
    activity_source: str | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    power_w: float | None = None
    processes: list[NodeProcess] | None = Field(None, max_length=MAX_ITEMS)
    idle_usd_per_h: float | None = None  # the idle share of the GPU's price


class NodeView(_Model):
    kind: Literal["node_view"] = "node_view"
    created_at: dt.datetime
    host: str
    window_s: float
    gpus: list[NodeGpu] = Field(max_length=MAX_ITEMS)
    idle_usd_per_h: float | None = None  # idle_reservation and free GPUs, whole price
    under_used_usd_per_h: float | None = None  # under_used GPUs, their idle share
    price_basis: str | None = None
    unmeasured: list[str] = Field(default_factory=list, max_length=MAX_ITEMS)


def activity(g: NodeGpuReading) -> tuple[float | None, str | None]:
    if g.sm_active_pct is not None:
        return g.sm_active_pct, "SM activity (GPM)"
    if g.util_gpu_pct is not None:
        return g.util_gpu_pct, "kernel time (NVML utilisation)"
    return None, None


def gpu_state(g: NodeGpuReading) -> GpuState:
    active, _ = activity(g)
    if active is None or g.processes is None:
        return "unknown"
    if active <= STARTED_PCT:
        return "idle_reservation" if g.processes else "free"
    return "under_used" if active < ACTIVE_LOW_PCT else "busy"


def _process_finding(state: GpuState) -> Literal["idle_reservation", "under_used"] | None:
    return state if state in ("idle_reservation", "under_used") else None


def node_view(
    readings: Sequence[NodeGpuReading],
    per_gpu_usd: float | None,
    created_at: dt.datetime,
    host: str,
    window_s: float,
    price_basis: str | None,
    unmeasured: list[str],
) -> NodeView:
    gpus = []
    idle = under = 0.0
    for g in readings:
        state = gpu_state(g)
        active, source = activity(g)
        share = 1.0 if state in ("idle_reservation", "free") else 1 - (active or 0) / 100
        usd = (
            round(per_gpu_usd * share, 2)
            if per_gpu_usd is not None and active is not None
            else None
        )
        if usd is not None and state in ("idle_reservation", "free"):
            idle += usd
        elif usd is not None and state == "under_used":
            under += usd
        finding = _process_finding(state)
        procs = (
            [NodeProcess(**p.model_dump(), finding=finding) for p in g.processes]
            if g.processes is not None
            else None
        )
        gpus.append(
            NodeGpu(
                index=g.index,
                name=g.name,
                state=state,
                active_pct=active,
                activity_source=source,
                memory_used_mib=g.memory_used_mib,
                memory_total_mib=g.memory_total_mib,
                power_w=g.power_w,
                processes=procs,
                idle_usd_per_h=usd,
            )
        )
    known = per_gpu_usd is not None
    return NodeView(
        created_at=created_at,
        host=host,
        window_s=window_s,
        gpus=gpus,
        idle_usd_per_h=round(idle, 2) if known else None,
        under_used_usd_per_h=round(under, 2) if known else None,
        price_basis=price_basis,
        unmeasured=unmeasured,
    )
