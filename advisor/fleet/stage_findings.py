"""The doctor's findings with where the time went: advisor.fleet.job_diagnosis's findings, checked
against the share of the job's time each one's stage took, plus the two findings that need the
time line or the stacks. Pure, no I/O.

- idle_reservation: the job held a GPU (a context, and its memory) and ran no kernel on it for
  its whole window, or for a stretch of IDLE_STRETCH_S or longer: the GPU-hours held idle and
  their price (one GPU's hourly price, advisor.catalog.queries.per_gpu_hour_usd through the
  review's pricing).
- input_bound: the GPU idles while the job's main thread spends a material share of its time in
  the DataLoader; in the main process (num_workers=0) or waiting for too few workers.
- straggler (several ranks): the rank the others wait for, by each rank's share of time
  waiting for the others (in collectives, or for the GPU).
- transfer_bound is kept only where host-device copies took a material share of the main
  thread's time: a pageable copy at 22 MB/s ten times a second is slow, and not the bottleneck
  when it takes 2% of the time. Likewise host_bound needs the job's own Python and PyTorch's
  calls to take a material share of the main thread, and gives way to input_bound (the busy
  core is the data pipeline's, and the fix is the DataLoader's).

MATERIAL_SHARE (ESTIMATED, judgement): a stage below a fifth of the time bounds the speed-up of
removing it entirely at 1 / (1 - 0.2) = 1.25x, so no other fix is pushed aside for it.
IDLE_STRETCH_S (ESTIMATED): five minutes, well past a checkpoint's or an evaluation's pause in a
training job and the scale at which idle-GPU cullers act (minutes, not seconds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from advisor.fleet.job_diagnosis import (
    ACTIVE_LOW_PCT,
    STARTED_PCT,
    Diagnosis,
    GpuActivity,
    under_used,
)
from advisor.fleet.stages import share_of, top_site
from probes.report import JobFinding, JobGpuSample, JobSample
from probes.stage_report import STAGE_WORDS, Stage, StageReport

MATERIAL_SHARE = 0.2
IDLE_STRETCH_S = 300.0
MIN_STACK_SAMPLES = 10  # fewer say too little about shares to dismiss or raise a finding
MIN_IDLE_READINGS = 3  # a whole window of idling needs a few readings to say so
# sync_bound is not gated: a sync's cost is the GPU idling while the host launches the next
# step, and the host's share at the sync is about the GPU's busy share, not the loss
_GATED: dict[str, tuple[Stage, ...]] = {
    "transfer_bound": ("copy",),
    "host_bound": ("host_compute", "launch"),
}
_EVIDENCED: dict[str, tuple[Stage, ...]] = {
    "sync_bound": ("gpu_wait",),
    "transfer_bound": ("copy",),
    "host_bound": ("host_compute", "launch"),
}


def _idle(r: JobGpuSample) -> bool:
    active = r.sm_active_pct if r.sm_active_pct is not None else r.util_gpu_pct
    return bool(r.job_on_gpu) and active is not None and active <= STARTED_PCT


def idle_stretches(samples: Sequence[JobSample], index: int) -> tuple[float, float, bool]:
    """On GPU `index`: (seconds held idle in all, the longest idle stretch in seconds, whether
    every reading while the job held the GPU was idle). A reading stands for the time since
    the previous one."""
    held = idle_s = run_s = longest = 0.0
    idle_count = held_count = 0
    previous_t = 0.0
    for s in samples:
        step = s.t_s - previous_t
        previous_t = s.t_s
        g = next((g for g in s.gpus if g.index == index), None)
        if g is None or not g.job_on_gpu:
            run_s = 0.0
            continue
        held_count += 1
        held += step
        if _idle(g):
            idle_count += 1
            idle_s += step
            run_s += step
            longest = max(longest, run_s)
        else:
            run_s = 0.0
    whole = held_count >= MIN_IDLE_READINGS and idle_count == held_count
    return idle_s, longest, whole


def idle_reservation(
    samples: Sequence[JobSample],
    activity: Sequence[GpuActivity],
    per_gpu_usd: float | None,
) -> JobFinding | None:
    """The GPUs the job held with no kernel, for its whole window or a long stretch."""
    idle: list[tuple[GpuActivity, float, float, bool]] = []
    for a in activity:
        if not a.used_by_job:
            continue
        idle_s, longest, whole = idle_stretches(samples, a.index)
        if whole or longest >= IDLE_STRETCH_S:
            idle.append((a, idle_s, longest, whole))
    if not idle:
        return None
    hours = sum(idle_s for _, idle_s, _, _ in idle) / 3600
    usd = round(hours * per_gpu_usd, 4) if per_gpu_usd is not None else None
    evidence = [
        f"GPU {a.index}: {_memory_words(a)} held, no kernel "
        + ("for the job's whole window" if whole else f"for {longest:,.0f} s at a stretch")
        + f" ({idle_s:,.0f} s idle in all)"
        for a, idle_s, longest, whole in idle
    ]
    return JobFinding(
        code="idle_reservation",
        summary=f"idle reservation: the job holds {len(idle)} GPU(s) and runs no kernel on "
        + ("them" if len(idle) > 1 else "it"),
        evidence=evidence,
        fix="release the GPU while it does not compute: end the process (a notebook or a "
        "debugger left open holds it), or free it (del the model and tensors, "
        "torch.cuda.empty_cache()); stop jobs below a utilisation floor (dstack's "
        "utilization_policy, an idle culler) and run interactive work on a shared GPU (MIG)",
        idle_usd_per_h=round(per_gpu_usd * len(idle), 2) if per_gpu_usd is not None else None,
        lost_gpu_hours=round(hours, 6),
        lost_usd=usd,
    )


def _memory_words(a: GpuActivity) -> str:
    if a.memory_peak_mib is None:
        return "memory (amount unknown)"
    return f"{a.memory_peak_mib / 1024:,.1f} GiB"


def input_bound(stages: StageReport, active_pct: float, idle_usd: float | None) -> JobFinding:
    share = share_of(stages, "data_loading")
    site = top_site(stages, "data_loading")
    where = f" at {site.site}" + (f" ({site.code})" if site.code else "") if site else ""
    if stages.loading_in_process:
        summary = (
            f"input-bound: the main process loads the data itself ({share:.0%} of its time"
            f"{where}) while the GPU idles"
        )
        fix = (
            "load in worker processes: DataLoader(num_workers=N, pin_memory=True, "
            "persistent_workers=True) with N up to the free CPU cores, or move the per-sample "
            "transform to the GPU, applied to whole batches"
        )
    else:
        summary = (
            f"input-bound: the main process waits for the DataLoader's workers ({share:.0%} of "
            f"its time{where}) while the GPU idles"
        )
        fix = (
            "the workers cannot keep up: more of them (num_workers, up to the free CPU cores), "
            "a cheaper per-sample transform, or the transform on the GPU on whole batches"
        )
    return JobFinding(
        code="input_bound",
        summary=summary,
        evidence=[
            f"stage data loading: {share:.0%} of {stages.samples} stack samples of the main "
            f"thread{where}",
            f"GPU activity {active_pct:.0f}% on average",
        ],
        fix=fix,
        idle_usd_per_h=idle_usd,
    )


def _stage_evidence(stages: StageReport, names: tuple[Stage, ...]) -> str:
    share = share_of(stages, *names)
    site = top_site(stages, *names)
    words = " + ".join(STAGE_WORDS[n] for n in names)
    at = f", most at {site.site}" if site is not None else ""
    return f"stage {words}: {share:.0%} of the main thread's time{at}"


def _job_active_pct(activity: Sequence[GpuActivity]) -> float | None:
    known = [a.active_pct for a in activity if a.used_by_job and a.active_pct is not None]
    return sum(known) / len(known) if known else None


def with_stages(
    base: Diagnosis,
    samples: Sequence[JobSample],
    stages: StageReport | None,
    per_gpu_usd: float | None,
) -> tuple[Diagnosis, StageReport | None]:
    """The diagnosis completed by the time line and the stages: idle_reservation and
    input_bound added, findings whose stage took less than MATERIAL_SHARE dismissed (with a
    note in the stage report), the stage and the line added to the evidence of the rest."""
    if base.verdict == "unmeasured":
        return base, stages
    findings = list(base.findings)
    idle = idle_reservation(samples, base.activity, per_gpu_usd)
    if idle is not None:
        whole = all("whole window" in e for e in idle.evidence)
        # a GPU with no kernel at all wants no smaller GPU: it wants releasing
        findings = [f for f in findings if not (whole and f.code == "under_used")]
        findings.insert(0, idle)
    read = stages is not None and stages.samples >= MIN_STACK_SAMPLES
    if not read or stages is None:
        return replace(base, findings=findings, verdict=_verdict(findings)), stages
    notes = list(stages.notes)
    kept = []
    for f in findings:
        gate = _GATED.get(f.code)
        if gate is not None and share_of(stages, *gate) < MATERIAL_SHARE:
            notes.append(
                f"{f.code} not reported: {' + '.join(STAGE_WORDS[g] for g in gate)} took "
                f"{share_of(stages, *gate):.0%} of the main thread's time (a finding needs "
                f"{MATERIAL_SHARE:.0%})"
            )
            continue
        names = _EVIDENCED.get(f.code)
        extra = [_stage_evidence(stages, names)] if names else []
        kept.append(f.model_copy(update={"evidence": [*f.evidence, *extra]}))
    kept = _with_input_bound(kept, base.activity, stages, per_gpu_usd)
    done = replace(base, findings=kept, verdict=_verdict(kept))
    return done, stages.model_copy(update={"notes": notes})


def _with_input_bound(
    kept: list[JobFinding],
    activity: Sequence[GpuActivity],
    stages: StageReport,
    per_gpu_usd: float | None,
) -> list[JobFinding]:
    """`kept` with input_bound first where the GPUs idle while the main thread loads data: the
    input pipeline explains the idling, so neither the host's busy core nor a GPU too big is
    a finding beside it (the machine's GPUs the job never touched stay under-used)."""
    active = _job_active_pct(activity)
    if (
        active is None
        or active >= ACTIVE_LOW_PCT
        or share_of(stages, "data_loading") < MATERIAL_SHARE
    ):
        return kept
    idle_usd = _idle_usd(activity, active, per_gpu_usd)
    rest = [f for f in kept if f.code not in ("host_bound", "under_used")]
    mine = [a for a in activity if a.used_by_job is not False]
    untouched = [a for a in activity if a.used_by_job is False]
    return [
        input_bound(stages, active, idle_usd),
        *rest,
        *under_used(mine, untouched, None, per_gpu_usd),
    ]


def _idle_usd(
    activity: Sequence[GpuActivity], active: float, per_gpu_usd: float | None
) -> float | None:
    gpus = sum(1 for a in activity if a.used_by_job)
    if per_gpu_usd is None:
        return None
    return round(per_gpu_usd * gpus * (1 - active / 100), 2)


def _verdict(findings: Sequence[JobFinding]) -> Literal["healthy", "findings"]:
    return "findings" if findings else "healthy"


_WAITING_FOR_OTHERS: tuple[Stage, ...] = ("collective", "gpu_wait")
_STRAGGLER_FIX: dict[str, str] = {
    "data_loading": "its input pipeline is the slow one: more DataLoader workers for it, or "
    "shards of equal cost per rank",
    "host_compute": "it does more host work than the others: split the work evenly (equal "
    "shards; sequences bucketed or packed to equal lengths per rank)",
    "gpu_wait": "it gives its GPU more work than the others do: equal shards and batch sizes "
    "per rank",
}


def _waiting_for_others(read: Sequence[StageReport]) -> tuple[Stage, ...]:
    """The stages in which a rank waits for the others. Where a rank's host thread sits in the
    collectives for a material share (gloo, or a blocking wait), they show there, and waiting
    on the GPU is a rank's own kernels (both ranks of one job look alike in it otherwise); with
    NCCL the collectives run on the GPU and the host waits for them in the GPU wait too."""
    visible = any(share_of(r, "collective") >= MATERIAL_SHARE for r in read)
    return ("collective",) if visible else _WAITING_FOR_OTHERS


def straggler(ranks: Sequence[StageReport], per_gpu_usd: float | None) -> JobFinding | None:
    """The rank the others wait for: its share waiting for the others (_waiting_for_others) is
    below theirs by MATERIAL_SHARE or more."""
    read = [r for r in ranks if r.samples >= MIN_STACK_SAMPLES]
    if len(read) < 2:
        return None
    waiting = _waiting_for_others(read)
    waits = [share_of(r, *waiting) for r in read]
    slow = min(range(len(read)), key=lambda i: waits[i])
    others = [w for i, w in enumerate(waits) if i != slow]
    typical = sorted(others)[len(others) // 2]
    if typical - waits[slow] < MATERIAL_SHARE:
        return None
    r = read[slow]
    own = next((s for s in r.shares if s.stage not in waiting), None)
    name = f"rank {r.rank}" if r.rank is not None else f"pid {r.pid}"
    where = ""
    if own is not None:
        site = own.sites[0].site if own.sites else None
        where = f"; its own time goes to {STAGE_WORDS[own.stage]} ({own.share:.0%}" + (
            f", most at {site})" if site else ")"
        )
    fix = _STRAGGLER_FIX.get(own.stage if own else "", "balance the work across ranks")
    return JobFinding(
        code="straggler",
        summary=f"straggler: the other ranks wait for {name} ({typical:.0%} of their time "
        f"against its {waits[slow]:.0%}){where}",
        evidence=[
            f"rank {x.rank if x.rank is not None else '?'} (pid {x.pid}): waiting for the others "
            f"{w:.0%}, " + ", ".join(f"{STAGE_WORDS[s.stage]} {s.share:.0%}" for s in x.shares[:3])
            for x, w in zip(read, waits, strict=True)
        ],
        fix=f"{fix}; and check that rank's GPU (clocks, throttling: advisor probe)",
        idle_usd_per_h=round(per_gpu_usd * sum(others), 2) if per_gpu_usd is not None else None,
    )
