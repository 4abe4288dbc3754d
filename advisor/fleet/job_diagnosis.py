"""What `advisor doctor` concludes from a job's readings: is the job using the GPUs it pays for,
and if not, why, with the evidence, the fix in one sentence and the price. Pure, no I/O.

Activity is GPM's SM activity (the share of SMs busy, Hopper and later) where the GPU reports it,
else NVML's utilisation (the share of time any kernel ran, which reads 100% for one tiny kernel
at a time, so a low figure is conclusive and a high one is not). The thresholds are judgement,
not measurement (ESTIMATED): a GPU whose SMs are busy less than half the time is wasting half
of what it costs; one Python thread near 100% of a core is the ceiling of a host-bound loop; ten
host synchronisations a second are where each sync's ~10-100 us round trip plus the queue it
drains starts to show.

Findings, each independent (a job can be both host- and sync-bound):
- never_used_gpu: no process of the job ever held a GPU context (and, with --torch, CUDA was
  never initialised).
- sync_bound: activity low and the job made the host wait for the GPU often, at file:line.
- transfer_bound: activity low and host-to-GPU copies from pageable memory, or blocking, ran at
  a steady rate (with --torch), or PCIe host-to-GPU traffic was high.
- host_bound: activity low and the job's busiest process kept one CPU core near full.
- made_on_host: tensors a factory made on the CPU were moved to the GPU, steadily.
- under_used: the job's GPU memory and activity both low (a smaller, cheaper GPU would do), or
  GPUs of the machine the job never touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from probes.report import (
    CopySite,
    HostSample,
    JobFinding,
    JobGpuSample,
    JobSample,
    TorchStats,
    steady_rate,
)

ACTIVE_LOW_PCT = 50.0
ONE_CORE_BUSY_PCT = 90.0
SYNCS_PER_S = 10.0
COPIES_PER_S = 10.0  # pageable or blocking host-to-GPU copies
PCIE_RX_HIGH_MB_S = 1000.0  # without --torch: host-to-GPU traffic that suggests per-step copies
MADE_ON_HOST_PER_S = 1.0
MEMORY_LOW_SHARE = 0.25
STARTED_PCT = 1.0  # a first kernel: the job's steady state starts here


@dataclass(frozen=True)
class GpuActivity:
    """One GPU over the window, as the diagnosis reads it."""

    index: int
    used_by_job: bool | None  # None: NVML could not list the GPU's processes
    active_pct: float | None
    source: str  # "SM activity (GPM)" or "kernel time (NVML utilisation)"
    memory_peak_mib: float | None  # the job's own where NVML says, else the whole GPU's
    memory_total_mib: float | None
    pcie_rx_mean_mb_s: float | None


@dataclass(frozen=True)
class Diagnosis:
    verdict: Literal["healthy", "findings", "unmeasured"]
    findings: list[JobFinding]
    gpu_hours_lost: float | None
    activity: list[GpuActivity]


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _max(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def gpu_activity(
    samples: Sequence[JobSample], memory_total_mib: dict[int, float | None]
) -> list[GpuActivity]:
    """Each GPU's activity and memory over the samples."""
    by_gpu: dict[int, list[JobGpuSample]] = {}
    for s in samples:
        for g in s.gpus:
            by_gpu.setdefault(g.index, []).append(g)
    out = []
    for index, readings in sorted(by_gpu.items()):
        seen = [r.job_on_gpu for r in readings if r.job_on_gpu is not None]
        used = any(seen) if seen else None
        mine = _working(readings)
        sm = _mean([r.sm_active_pct for r in mine])
        source = "SM activity (GPM)"
        if sm is None:
            sm, source = _mean([r.util_gpu_pct for r in mine]), "kernel time (NVML utilisation)"
        job_mem = _max([r.job_memory_mib for r in readings])
        memory = job_mem if job_mem else _max([r.memory_used_mib for r in readings])
        out.append(
            GpuActivity(
                index,
                used,
                round(sm, 1) if sm is not None else None,
                source,
                memory,
                memory_total_mib.get(index),
                _mean([r.pcie_rx_mb_s for r in mine]),
            )
        )
    return out


def _working(readings: list[JobGpuSample]) -> list[JobGpuSample]:
    """The readings while the job worked on the GPU: from its first kernel (activity above
    STARTED_PCT) on, while its context was there. Before, the GPU waits on imports, CUDA's
    start-up and data set-up; after, on the job's exit: not the steady state to judge."""
    mine = [r for r in readings if r.job_on_gpu] or list(readings)
    for i, r in enumerate(mine):
        active = r.sm_active_pct if r.sm_active_pct is not None else r.util_gpu_pct
        if active is not None and active > STARTED_PCT:
            return mine[i:]
    return mine


def _host_readings(samples: Sequence[JobSample]) -> list[HostSample]:
    # psutil's first reading of a process is 0 (no earlier one to compare): skip the first
    return [s.host for s in samples[1:] if s.host is not None]


def _busiest_core_pct(samples: Sequence[JobSample]) -> float | None:
    return _mean([h.busiest_process_cpu_pct for h in _host_readings(samples)])


def _money(per_gpu_usd: float | None, gpus: float) -> float | None:
    return round(per_gpu_usd * gpus, 2) if per_gpu_usd is not None else None


def diagnose(
    samples: Sequence[JobSample],
    torch: TorchStats | None,
    memory_total_mib: dict[int, float | None],
    sampled_s: float,
    per_gpu_usd: float | None,
) -> Diagnosis:
    """The findings over a window of `sampled_s` seconds. `per_gpu_usd`: the hourly price of
    one of the machine's GPUs (None: unknown, the findings carry no price)."""
    activity = gpu_activity(samples, memory_total_mib)
    if not activity:
        return Diagnosis("unmeasured", [], None, [])
    hours = sampled_s / 3600
    known = [a for a in activity if a.used_by_job is not None]
    job_gpus = [a for a in activity if a.used_by_job] if known else activity
    untouched = [a for a in known if not a.used_by_job]
    cuda_used = torch.cuda_used if torch is not None else None
    if known and not job_gpus and cuda_used is not True:
        never = _never_used(activity, samples, torch, per_gpu_usd)
        return Diagnosis("findings", [never], round(len(activity) * hours, 4), activity)

    active = _mean([a.active_pct for a in job_gpus])
    findings = _idle_causes(job_gpus, active, samples, torch, per_gpu_usd)
    # a small, idle job on a big GPU is under-used unless a fix in its code explains the idling
    # (a host-bound loop of tiny kernels is both)
    explained_idle = any(f.code in EXPLAINS_IDLING for f in findings)
    findings += under_used(job_gpus, untouched, None if explained_idle else active, per_gpu_usd)
    lost = sum(
        (1 - (a.active_pct or 0) / 100) * hours for a in job_gpus if a.active_pct is not None
    )
    lost += len(untouched) * hours
    return Diagnosis("findings" if findings else "healthy", findings, round(lost, 4), activity)


# Findings whose fix in the job's code explains why its GPU idles: with one of them, the idle
# GPU is not also called under-used, and the host's busy core is not a cause of its own.
EXPLAINS_IDLING = ("sync_bound", "transfer_bound", "made_on_host")


def _idle_causes(
    job_gpus: Sequence[GpuActivity],
    active: float | None,
    samples: Sequence[JobSample],
    torch: TorchStats | None,
    per_gpu_usd: float | None,
) -> list[JobFinding]:
    """Why the job's GPUs idle, when they do: syncs, copies (from the hook, else PCIe), the
    host, tensors made on the CPU (this last one whatever the activity)."""
    low = active is not None and active < ACTIVE_LOW_PCT
    idle_usd = _money(per_gpu_usd, len(job_gpus) * (1 - (active or 0) / 100))
    where = _activity_words(job_gpus)
    findings: list[JobFinding] = []
    if low and torch is not None:
        findings += _sync(torch, where, idle_usd) + _transfer(torch, where, idle_usd)
    elif low:
        findings += _pcie(job_gpus, where, idle_usd)
    # the CPU's time spent making the tensors is the made_on_host finding's, too
    findings += _made_on_host(torch) if torch is not None else []
    # a thread waiting on a sync or a pageable copy spins a core too: those, once found, are
    # the cause, not the host
    if low and not findings:
        findings += _host_bound(_busiest_core_pct(samples), where, idle_usd)
    return findings


def _host_bound(core: float | None, where: str, idle_usd: float | None) -> list[JobFinding]:
    if core is None or core < ONE_CORE_BUSY_PCT:
        return []
    return [
        JobFinding(
            code="host_bound",
            summary="host-bound: one CPU core is saturated while the GPU waits for work",
            evidence=[f"the job's busiest process used {core:.0f}% of a core on average", where],
            fix="give the GPU more work per launch: larger batches, fewer Python-level "
            "operations per step (torch.compile or CUDA graphs), data loading in "
            "DataLoader workers (num_workers) instead of the training loop",
            idle_usd_per_h=idle_usd,
        )
    ]


def _activity_words(gpus: Sequence[GpuActivity]) -> str:
    parts = [
        f"GPU {a.index}: {a.source} {a.active_pct:.0f}%" for a in gpus if a.active_pct is not None
    ]
    return "; ".join(parts) or "GPU activity unknown"


def _never_used(
    activity: Sequence[GpuActivity],
    samples: Sequence[JobSample],
    torch: TorchStats | None,
    per_gpu_usd: float | None,
) -> JobFinding:
    cpu = _mean([h.cpu_pct for h in _host_readings(samples)])
    evidence = [f"no process of the job held a context on any of the {len(activity)} GPU(s)"]
    if cpu is not None:
        evidence.append(f"the job's processes used {cpu:.0f}% of a CPU core on average")
    if torch is not None:
        evidence.append(f"PyTorch {torch.torch_version} ran without initialising CUDA")
    return JobFinding(
        code="never_used_gpu",
        summary="the job never used the GPU: it ran on the CPU while the GPU idled",
        evidence=evidence,
        fix="move the model and each batch to the GPU (model.to('cuda'), batch.to('cuda')) "
        "and check torch.cuda.is_available() in the job's environment",
        idle_usd_per_h=_money(per_gpu_usd, len(activity)),
    )


def _sync(torch: TorchStats, where: str, idle_usd: float | None) -> list[JobFinding]:
    # a blocking copy from pageable memory syncs at its own line: the copy's, not a host read
    copies = {c.site for c in torch.copy_sites}
    busy = [s for s in torch.sync_sites if s.per_s >= SYNCS_PER_S and s.site not in copies]
    if not busy:
        return []
    return [
        JobFinding(
            code="sync_bound",
            summary=f"synchronisation-bound: the host waits for the GPU {busy[0].per_s:,.0f} "
            f"times a second at {busy[0].site}",
            evidence=[f"{s.per_s:,.1f} syncs/s at {s.site} ({s.count:,} in all)" for s in busy[:3]]
            + [where],
            fix=f"stop reading GPU values on the host every step at {busy[0].site} (.item(), "
            "print(tensor), .cpu(), .tolist()): accumulate on the GPU and read every N steps",
            idle_usd_per_h=idle_usd,
        )
    ]


def _transfer(torch: TorchStats, where: str, idle_usd: float | None) -> list[JobFinding]:
    def rate(c: CopySite) -> float:
        return steady_rate(max(c.pageable, c.blocking), c.span_s)

    steady = [c for c in torch.copy_sites if rate(c) >= COPIES_PER_S]
    if not steady:
        return []
    top = steady[0]
    per_s = steady_rate(top.count, top.span_s)
    rate_mb_s = per_s * top.bytes / top.count / 1e6
    pageable = f"{top.pageable:,} of {top.count:,} from pageable memory"
    blocking = f"{top.blocking:,} blocking"
    return [
        JobFinding(
            code="transfer_bound",
            summary=f"transfer-bound: {per_s:,.0f} host-to-GPU copies a second at "
            f"{top.site}, {rate_mb_s:,.0f} MB/s",
            evidence=[f"{top.site}: {pageable}, {blocking}", where],
            fix="pin the host memory (DataLoader(pin_memory=True) or tensor.pin_memory()), copy "
            "with non_blocking=True and prefetch the next batch on a second CUDA stream",
            idle_usd_per_h=idle_usd,
        )
    ]


def _pcie(gpus: Sequence[GpuActivity], where: str, idle_usd: float | None) -> list[JobFinding]:
    rx = _mean([a.pcie_rx_mean_mb_s for a in gpus])
    if rx is None or rx < PCIE_RX_HIGH_MB_S:
        return []
    return [
        JobFinding(
            code="transfer_bound",
            summary=f"transfer-bound: {rx:,.0f} MB/s host-to-GPU over PCIe while the GPU idles",
            evidence=[f"PCIe host-to-GPU {rx:,.0f} MB/s on average", where],
            fix="pin the host memory, copy with non_blocking=True and prefetch the next batch "
            "on a second CUDA stream (run with --torch to see the lines that copy)",
            idle_usd_per_h=idle_usd,
        )
    ]


def _made_on_host(torch: TorchStats) -> list[JobFinding]:
    steady = [m for m in torch.made_on_host if steady_rate(m.count, m.span_s) >= MADE_ON_HOST_PER_S]
    if not steady:
        return []
    top = steady[0]
    return [
        JobFinding(
            code="made_on_host",
            summary=f"tensors made on the CPU and then moved: {top.count:,} at {top.site}",
            evidence=[
                f"{m.site}: {m.count:,} tensors ({m.bytes / 1e6:,.1f} MB) created on the CPU, "
                "then copied to the GPU"
                for m in steady[:3]
            ],
            fix=f"create them on the GPU at {top.site}: torch.randn(..., device='cuda') (any "
            "factory takes device=)",
        )
    ]


def under_used(
    job_gpus: Sequence[GpuActivity],
    untouched: Sequence[GpuActivity],
    active: float | None,
    per_gpu_usd: float | None,
) -> list[JobFinding]:
    """The under_used findings: the job's GPUs with memory and activity both low (`active` None:
    their idling is explained by a fix in the job's code, so not this one), and the machine's
    GPUs the job never touched."""
    out = []
    shares = [
        a.memory_peak_mib / a.memory_total_mib
        for a in job_gpus
        if a.memory_peak_mib is not None and a.memory_total_mib
    ]
    memory_share = max(shares) if shares else None
    small = memory_share is not None and memory_share < MEMORY_LOW_SHARE
    if small and active is not None and active < ACTIVE_LOW_PCT:
        peak = max(a.memory_peak_mib or 0 for a in job_gpus) / 1024
        out.append(
            JobFinding(
                code="under_used",
                summary=f"under-used: the job needs {peak:,.1f} GiB and {active:.0f}% of the "
                "GPU's activity",
                evidence=[
                    f"peak memory {memory_share:.0%} of the GPU's",
                    _activity_words(job_gpus),
                ],
                fix="run it on a smaller, cheaper GPU, or share this one (MIG or MPS, several "
                "jobs at once)",
                idle_usd_per_h=_money(per_gpu_usd, len(job_gpus) * (1 - active / 100)),
            )
        )
    if untouched:
        n, total = len(untouched), len(untouched) + len(job_gpus)
        out.append(
            JobFinding(
                code="under_used",
                summary=f"under-used: the job used {total - n} of the machine's {total} GPUs",
                evidence=[
                    "no process of the job on GPU(s) " + ", ".join(str(a.index) for a in untouched)
                ],
                fix="run on a machine with as many GPUs as the job uses, or spread the job over "
                "them (torchrun --nproc-per-node)",
                idle_usd_per_h=_money(per_gpu_usd, n),
            )
        )
    return out
