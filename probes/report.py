"""The probe report schema. It lives with the probes; advisor reads and completes it (checks,
verdict). Every field that a GPU or driver may not support is optional: None means "not supported
or not readable", never a crash."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from probes.stage_report import StageReport
from probes.stats import Measurement
from probes.timestamps import ReportTime

SCHEMA_VERSION = 2  # 2: the node report (every GPU, peers, collectives, health, nodes)
Status = Literal["pass", "warn", "fail", "skip", "error"]
Verdict = Literal["pass", "warn", "fail", "error"]
# What a platform team does about a failing check (DCGM's vocabulary): keep watching, reset the
# GPU (or reboot the node), take the node out of service, or have the part replaced.
Action = Literal["monitor", "reset", "drain", "replace"]
Scope = Literal["gpu", "node", "peer", "collective", "health", "cluster"]


# Bounds a report must keep (without them, 200 KB host names, 10,000 checks, negative
# bandwidths and durations would be stored). Far above what any real probe writes: a check's
# detail is a sentence or two, a node of 8 GPUs has about 300 checks, a burn runs for hours.
MAX_TEXT_CHARS = 4096  # any string of a report
MAX_HOSTNAME_CHARS = 253  # a DNS name's longest
MAX_CHECKS = 4096
MAX_ITEMS = 4096  # any other list of a report
MAX_DURATION_S = 30 * 86_400.0  # a probe run, burn included
MAX_MONITOR_S = 366 * 86_400.0  # a monitoring window
# Money and GPU time a job report states: finite, never negative, and bounded ("inf GPU-hours
# lost" and a saving of $-5,000,000 were stored and printed). 4,096 GPUs at $100 an hour are
# $409,600 an hour; the hours are every GPU a report may list, idle over the longest window.
MAX_USD_PER_H = 10_000_000.0
MAX_GPU_HOURS = MAX_ITEMS * MAX_MONITOR_S / 3600
UsdPerHour = Annotated[float, Field(ge=0, le=MAX_USD_PER_H, allow_inf_nan=False)]
GpuHours = Annotated[float, Field(ge=0, le=MAX_GPU_HOURS, allow_inf_nan=False)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", str_max_length=MAX_TEXT_CHARS)


class ProcessInfo(_Model):
    pid: int
    name: str | None = None
    used_memory_mib: float | None = None


class LoadSample(_Model):
    """What NVML showed while the measurements ran (sampled in the background)."""

    samples: int
    throttle_reasons: list[str]  # union of the reasons seen, "gpu_idle" left out
    temperature_max_c: int | None = None
    power_draw_max_w: float | None = None
    clock_sm_min_mhz: int | None = None
    pcie_gen_max_seen: int | None = None
    pcie_width_max_seen: int | None = None


class NvLinkState(_Model):
    link: int
    active: bool | None = None
    errors: dict[str, int] = Field(default_factory=dict)  # NVML's per-link error counters


class GpuHealth(_Model):
    """NVML's health counters of one GPU, read after the measurements. None: not supported."""

    xid_events: list[int] | None = None  # XIDs seen while the probe ran (None: cannot listen)
    retired_pages_pending: bool | None = None  # pre-Ampere page retirement awaiting a reset
    retired_pages: int | None = None
    remapped_rows_correctable: int | None = None  # Ampere and later: row remapping
    remapped_rows_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failed: bool | None = None
    ecc_volatile_corrected: int | None = None  # since the last driver load
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_corrected: int | None = None  # over the GPU's life
    ecc_aggregate_uncorrected: int | None = None
    pcie_replays: int | None = None  # PCIe replay counter after the measurements
    pcie_replays_during: int | None = None  # how many of them came while the probe ran
    nvlinks: list[NvLinkState] | None = None  # None: no NVLink (or not readable)


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
    cuda_index: int | None = (
        None  # the torch/CUDA index on its node (CUDA_VISIBLE_DEVICES renumbers)
    )
    health: GpuHealth | None = None
    under_load: LoadSample | None = None  # sampled while this GPU's measurements ran


class PeerLink(_Model):
    """How NVML says two GPUs of the node are connected."""

    gpu: int
    peer: int
    nvlink_links: int | None = None  # active NVLinks from `gpu` that lead to `peer`
    via_nvswitch: bool | None = None  # both GPUs' NVLinks end at a switch, not at each other
    common_ancestor: str | None = None  # NVML topology level: internal, single, ... system
    p2p_supported: bool | None = None  # NVML's P2P read status between the two


class Inventory(_Model):
    hostname: str = Field(max_length=MAX_HOSTNAME_CHARS)
    python: str
    torch_version: str | None = None
    cuda_runtime_version: str | None = None  # torch.version.cuda
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    cuda_visible_devices: str | None = None  # None = unset
    device_count: int | None = None
    gpu: GpuInventory | None = None  # the first GPU measured, read before measuring
    under_load: LoadSample | None = None  # the first GPU's, while its measurements ran
    cpu_count: int | None = None
    # every GPU measured, by index
    gpus: list[GpuInventory] = Field(default_factory=list, max_length=MAX_ITEMS)
    # NVML's view of each GPU pair
    topology: list[PeerLink] = Field(default_factory=list, max_length=MAX_ITEMS)


class Diagnosis(_Model):
    """Why the probe could not measure a GPU (or a finding about the environment)."""

    code: str
    message: str


class Check(_Model):
    name: str
    status: Status
    # counts, sizes, rates and link speeds: none is negative
    measured: float | None = Field(None, ge=0)
    expected: float | None = Field(None, ge=0)
    unit: str | None = None
    detail: str
    scope: Scope | None = None  # None: a single-GPU report's check (schema 1)
    gpu: int | None = None  # the GPU (CUDA index on its node) a per-GPU check is about
    gpu_uuid: str | None = None
    peer: int | None = None  # the other GPU of a peer-link check (gpu -> peer)
    host: str | None = None  # the node a cluster check is about
    action: Action | None = None  # what to do when it fails or warns


class GpuVerdict(_Model):
    gpu: int
    uuid: str | None = None
    name: str | None = None
    rank: int | None = None  # the process that measured it
    verdict: Verdict


class RankFailure(_Model):
    """A rank that did not finish: what it reached and how it ended, as far as is known."""

    rank: int
    host: str | None = None
    gpu: int | None = None
    phase: str | None = None  # the last phase it reported reaching
    exit_code: int | None = None
    detail: str


class NodeSummary(_Model):
    host: str
    node_rank: int
    gpus: int
    verdict: Verdict | None = None  # None: the node did not report its own verdict


class ClusterSummary(_Model):
    """What rank 0 of a several-node probe saw of every node."""

    nodes: int
    world_size: int
    hosts: list[NodeSummary] = Field(max_length=MAX_ITEMS)
    checks: list[Check] = Field(default_factory=list, max_length=MAX_CHECKS)
    verdict: Verdict


class ProbeReport(_Model):
    schema_version: int = SCHEMA_VERSION
    created_at: ReportTime
    mode: Literal["quick", "full"]
    device: int
    verdict: Verdict
    accelerator: str | None = None  # matched catalog id
    expected_accelerator: str | None = None  # what --expect asked for
    inventory: Inventory
    diagnosis: list[Diagnosis] = Field(default_factory=list, max_length=MAX_ITEMS)
    measurements: list[Measurement] = Field(default_factory=list, max_length=MAX_ITEMS)
    checks: list[Check] = Field(default_factory=list, max_length=MAX_CHECKS)
    duration_s: float = Field(ge=0, le=MAX_DURATION_S)
    gpu_verdicts: list[GpuVerdict] = Field(default_factory=list, max_length=MAX_ITEMS)
    world_size: int | None = None  # processes of the probe, every node together
    local_ranks: int | None = None  # processes on this node (one per GPU)
    node_rank: int | None = None
    backend: str | None = None  # torch.distributed backend of the collectives: nccl or gloo
    failed_ranks: list[RankFailure] = Field(default_factory=list, max_length=MAX_ITEMS)
    cluster: ClusterSummary | None = None  # on node rank 0 of a several-node probe


Finding = Literal["idle", "over_provisioned", "under_provisioned", "optimized"]


Percent = Annotated[float, Field(ge=0, le=100)]
NonNegative = Annotated[float, Field(ge=0)]


class GpuUtilisation(_Model):
    """One GPU over a monitoring window: NVML samples reduced to figures, then classified."""

    index: int = Field(ge=0)
    uuid: str | None = None
    name: str | None = None
    accelerator: str | None = None  # matched catalog id
    samples: int = Field(ge=0)
    util_gpu_mean_pct: Percent | None = None
    util_gpu_p95_pct: Percent | None = None
    util_memory_mean_pct: Percent | None = None
    memory_used_max_mib: NonNegative | None = None
    memory_total_mib: NonNegative | None = None
    power_mean_w: NonNegative | None = None
    power_limit_w: NonNegative | None = None
    # union seen, "gpu_idle" left out
    throttle_reasons: list[str] = Field(default_factory=list, max_length=MAX_ITEMS)
    # share of samples with a power/thermal limit active
    throttled_fraction: float | None = Field(None, ge=0, le=1)
    finding: Finding | None = None  # Compute Optimizer's vocabulary
    reason_codes: list[str] = Field(default_factory=list, max_length=MAX_ITEMS)
    evidence: list[str] = Field(default_factory=list, max_length=MAX_ITEMS)


class JobGpuSample(_Model):
    """One GPU at one reading while a job ran (`advisor doctor`). None: NVML could not read it on
    this GPU or driver (GPM needs Hopper or later and a driver that exposes it)."""

    index: int
    util_gpu_pct: float | None = None  # NVML: share of time any kernel ran
    sm_active_pct: float | None = None  # GPM SM utilisation: share of SMs busy
    tensor_active_pct: float | None = None  # GPM any-tensor-core utilisation
    memory_used_mib: float | None = None  # the whole GPU
    job_memory_mib: float | None = None  # the job's processes on this GPU
    job_on_gpu: bool | None = None  # a process of the job held a context on this GPU
    pcie_tx_mb_s: float | None = None  # GPU to host
    pcie_rx_mb_s: float | None = None  # host to GPU
    power_w: float | None = None
    clock_sm_mhz: int | None = None
    throttle_reasons: list[str] | None = None


class HostSample(_Model):
    """The job's process tree on the host at one reading (psutil)."""

    processes: int
    cpu_pct: float  # summed over the tree: 100 is one core busy
    busiest_process_cpu_pct: float  # the busiest process alone (one Python thread tops at ~100)
    rss_mib: float


class JobSample(_Model):
    t_s: float = Field(ge=0)  # seconds since the job started
    host: HostSample | None = None
    gpus: list[JobGpuSample] = Field(default_factory=list, max_length=MAX_ITEMS)


# A steady pattern, not a burst: the six parameter copies of model.to('cuda') in 2 ms are not a
# rate of 2,778 a second.
STEADY_MIN_EVENTS = 10
STEADY_MIN_SPAN_S = 1.0


def steady_rate(count: int, span_s: float) -> float:
    """Events per second between the first and the last of `count`; 0 for a burst (fewer than
    STEADY_MIN_EVENTS, or within STEADY_MIN_SPAN_S)."""
    if count < STEADY_MIN_EVENTS or span_s < STEADY_MIN_SPAN_S:
        return 0.0
    return (count - 1) / span_s


class SyncSite(_Model):
    """A line of the user's code where PyTorch made the host wait for the GPU."""

    site: str  # file:line
    count: int
    span_s: float  # from the first to the last at this line

    @property
    def per_s(self) -> float:
        """The rate while the line ran (not diluted by the job's start-up or other phases)."""
        return steady_rate(self.count, self.span_s)


class CopySite(_Model):
    """A line of the user's code that copied host memory to the GPU."""

    site: str
    count: int
    bytes: int
    pageable: int  # of them, from pageable (not pinned) memory
    blocking: int  # of them, without non_blocking=True
    span_s: float


class MadeOnHostSite(_Model):
    """A tensor created on the CPU by a factory (torch.randn, zeros, ...) and then moved."""

    site: str  # where it was created
    count: int
    bytes: int
    span_s: float


class TorchStats(_Model):
    """What the --torch start-up hook saw inside the job's Python process."""

    torch_version: str | None = None
    cuda_used: bool  # the process initialised CUDA at all
    wall_s: float  # from the hook's start to the process's exit
    syncs: int
    sync_sites: list[SyncSite] = Field(default_factory=list, max_length=MAX_ITEMS)  # busiest first
    h2d_copies: int
    h2d_bytes: int
    h2d_pageable_bytes: int
    copy_sites: list[CopySite] = Field(default_factory=list, max_length=MAX_ITEMS)
    made_on_host: list[MadeOnHostSite] = Field(default_factory=list, max_length=MAX_ITEMS)
    hook_s: float  # time spent in the hook's own code (its overhead on the job's thread)


class JobFinding(_Model):
    code: Literal[
        "never_used_gpu",
        "host_bound",
        "sync_bound",
        "transfer_bound",
        "made_on_host",
        "under_used",
        "idle_reservation",
        "input_bound",
        "straggler",
    ]
    summary: str
    evidence: list[str]
    fix: str
    idle_usd_per_h: UsdPerHour | None = None  # the GPU time left idle, at the instance's price
    saving_usd_per_h: UsdPerHour | None = None  # under_used: the cheapest option that fits
    cheaper_option: str | None = None
    # idle_reservation: the GPU time held with no kernel over the window, and its price
    lost_gpu_hours: GpuHours | None = None
    lost_usd: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None


class JobReport(_Model):
    """`advisor doctor`: a command run under observation and what it did with the GPUs."""

    command: list[str] = Field(max_length=MAX_ITEMS)
    exit_code: int | None  # None: still running when the report was written (--duration)
    wall_s: float = Field(ge=0, le=MAX_MONITOR_S)
    sampled_s: float = Field(ge=0, le=MAX_MONITOR_S)
    interval_s: float = Field(gt=0, le=MAX_MONITOR_S)
    samples: list[JobSample] = Field(default_factory=list, max_length=MAX_ITEMS)
    torch: TorchStats | None = None
    # what could not be read, and why
    unmeasured: list[str] = Field(default_factory=list, max_length=MAX_ITEMS)
    verdict: Literal["healthy", "findings", "unmeasured"]
    findings: list[JobFinding] = Field(default_factory=list, max_length=MAX_ITEMS)
    gpu_hours_lost: GpuHours | None = None  # GPU time the findings left idle over the window
    price_basis: str | None = None  # where the findings' prices come from
    stages: StageReport | None = None  # where the job's time went (stack samples), when read
    # several ranks (RANK set by the launcher): each rank's stages, rank order
    ranks: list[StageReport] = Field(default_factory=list, max_length=MAX_ITEMS)


class UtilisationReport(_Model):
    """What `advisor monitor` produces and can send to the service; `advisor doctor` adds the
    job it ran (`job`)."""

    schema_version: int = SCHEMA_VERSION
    kind: Literal["utilisation"] = "utilisation"
    created_at: ReportTime
    host: str = Field(max_length=MAX_HOSTNAME_CHARS)
    instance_type: str | None = None  # catalog id, when the operator says what this machine is
    duration_s: float = Field(ge=0, le=MAX_MONITOR_S)
    interval_s: float = Field(gt=0, le=MAX_MONITOR_S)
    gpus: list[GpuUtilisation] = Field(max_length=MAX_ITEMS)
    job: JobReport | None = None
