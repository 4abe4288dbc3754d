"""The doctor's stack side: the stack samples (probes.stacks) turned into stage shares
(advisor.fleet.stages) and the diagnosis completed with them (advisor.fleet.stage_findings),
and the lines that print them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rich.markup import escape

from advisor.cli.common import money
from advisor.fleet.job_diagnosis import Diagnosis
from advisor.fleet.stage_findings import straggler, with_stages
from advisor.fleet.stages import by_process, stage_report
from probes.report import JobReport, JobSample, TorchStats
from probes.stacks import StackSampler
from probes.stage_report import STAGE_WORDS, StageReport

# Two stack samples a second: each is one `py-spy dump` (10-15 ms of a core of its own, measured
# on this project's 2-core CI machine; the job is not paused), and 120 samples over a minute put
# a stage's share within about +-9% (two binomial standard errors at 50%). --duration sets
# how many samples there are.
STACK_INTERVAL_S = 0.5


def staged(
    found: Diagnosis,
    samples: Sequence[JobSample],
    stacks: StackSampler | None,
    torch: TorchStats | None,
    per_gpu_usd: float | None,
) -> tuple[Diagnosis, StageReport | None, list[StageReport]]:
    """The diagnosis with the stages (when py-spy read the job) and the idle time line; with
    several ranks, each rank's stages (the first rank's are the job's) and the straggler."""
    uses_gpu = any(g.job_on_gpu for s in samples for g in s.gpus) or bool(
        torch is not None and torch.cuda_used
    )
    groups = by_process(stacks.samples) if stacks is not None else []
    reports = [r for g in groups if (r := stage_report(g, uses_gpu, STACK_INTERVAL_S))]
    done, stages = with_stages(found, samples, reports[0] if reports else None, per_gpu_usd)
    ranks = reports if len(reports) > 1 else []
    slow = straggler(ranks, per_gpu_usd)
    if slow is not None:
        done = replace(done, findings=[slow, *done.findings], verdict="findings")
    return done, stages, ranks


def render_stages(out: Any, job: JobReport) -> None:
    stages = job.stages
    if stages is None:
        return
    parts = [
        f"{STAGE_WORDS[s.stage]} {s.share:.0%}"
        + (f" ({escape(s.sites[0].site)})" if s.sites else "")
        for s in stages.shares
    ]
    out.print(
        f"  where the time went ({stages.samples} stack samples of pid {stages.pid}'s main "
        f"thread): " + "; ".join(parts),
        highlight=False,
        soft_wrap=True,
    )
    for r in job.ranks:
        top = ", ".join(f"{STAGE_WORDS[s.stage]} {s.share:.0%}" for s in r.shares[:3])
        out.print(f"  rank {r.rank} (pid {r.pid}): {top}", highlight=False, soft_wrap=True)
    for note in stages.notes:
        out.print(f"  [dim]{escape(note)}[/]", highlight=False, soft_wrap=True)
    for f in job.findings:
        if f.lost_gpu_hours is not None:
            out.print(
                f"  {f.code}: {f.lost_gpu_hours:.4f} GPU-hours held idle"
                + (f", {money(f.lost_usd)}" if f.lost_usd is not None else ""),
                highlight=False,
            )
