"""The probe report schema. It lives with the probes; advisor reads and completes it (checks,
verdict). Every field that a GPU or driver may not support is optional: None means "not supported
or not readable", never a crash."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from probes.stats import Measurement
from probes.timestamps import Rfc3339

SCHEMA_VERSION = 1
Status = Literal["pass", "warn", "fail", "skip", "error"]
Verdict = Literal["pass", "warn", "fail", "error"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProcessInfo(_Model):
    pid: int
    name: str | None = None
    used_memory_mib: float | None = None


class GpuInventory(_Model):
    """What NVML (and torch, for the fields NVML lacks) says about one GPU."""

    index: int | None = None  # NVML index
    name: str | None = None
    uuid: str | None = None
    memory_total_mib: float | None = None
    memory_free_mib: float | None = None
    memory_used_mib: float | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    power_draw_w: float | None = None
    clock_sm_mhz: int | None = None
    clock_sm_max_mhz: int | None = None
    clock_mem_mhz: int | None = None
    clock_mem_max_mhz: int | None = None
    temperature_c: int | None = None
    throttle_reasons: list[str] | None = None  # decoded clock-event reasons
    ecc_enabled: bool | None = None
    mig_enabled: bool | None = None
    utilization_gpu_pct: int | None = None
    utilization_memory_pct: int | None = None
    processes: list[ProcessInfo] | None = None
    compute_capability: str | None = None  # from torch
    multiprocessors: int | None = None  # from torch


class LoadSample(_Model):
    """What NVML showed while the measurements ran (sampled in the background)."""

    samples: int
    throttle_reasons: list[str]  # union of the reasons seen, "gpu_idle" left out
    temperature_max_c: int | None = None
    power_draw_max_w: float | None = None
    clock_sm_min_mhz: int | None = None
    pcie_gen_max_seen: int | None = None
    pcie_width_max_seen: int | None = None


class Inventory(_Model):
    hostname: str
    python: str
    torch_version: str | None = None
    cuda_runtime_version: str | None = None  # torch.version.cuda
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    cuda_visible_devices: str | None = None  # None = unset
    device_count: int | None = None
    gpu: GpuInventory | None = None  # the GPU measured (--device), read before measuring
    under_load: LoadSample | None = None
    cpu_count: int | None = None


class Diagnosis(_Model):
    """Why the probe could not measure a GPU (or a finding about the environment)."""

    code: str
    message: str


class Check(_Model):
    name: str
    status: Status
    measured: float | None = None
    expected: float | None = None
    unit: str | None = None
    detail: str


class ProbeReport(_Model):
    schema_version: int = SCHEMA_VERSION
    created_at: Rfc3339
    mode: Literal["quick", "full"]
    device: int
    verdict: Verdict
    accelerator: str | None = None  # matched catalog id
    expected_accelerator: str | None = None  # what --expect asked for
    inventory: Inventory
    diagnosis: list[Diagnosis] = Field(default_factory=list)
    measurements: list[Measurement] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    duration_s: float


Finding = Literal["idle", "over_provisioned", "under_provisioned", "optimized"]


class GpuUtilisation(_Model):
    """One GPU over a monitoring window: NVML samples reduced to figures, then classified."""

    index: int
    uuid: str | None = None
    name: str | None = None
    accelerator: str | None = None  # matched catalog id
    samples: int
    util_gpu_mean_pct: float | None = None
    util_gpu_p95_pct: float | None = None
    util_memory_mean_pct: float | None = None
    memory_used_max_mib: float | None = None
    memory_total_mib: float | None = None
    power_mean_w: float | None = None
    power_limit_w: float | None = None
    throttle_reasons: list[str] = Field(default_factory=list)  # union seen, "gpu_idle" left out
    throttled_fraction: float | None = None  # share of samples with a power/thermal limit active
    finding: Finding | None = None  # Compute Optimizer's vocabulary
    reason_codes: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)


class UtilisationReport(_Model):
    """What `advisor monitor` produces and can send to the service."""

    schema_version: int = SCHEMA_VERSION
    kind: Literal["utilisation"] = "utilisation"
    created_at: Rfc3339
    host: str
    instance_type: str | None = None  # catalog id, when the operator says what this machine is
    duration_s: float
    interval_s: float
    gpus: list[GpuUtilisation]
