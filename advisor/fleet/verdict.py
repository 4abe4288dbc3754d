"""One verdict per job: the class of each GPU a diagnosed job used (advisor/fleet/utilisation.py,
which the review's savings read) and the doctor's findings (advisor/fleet/job_diagnosis.py and
advisor/fleet/stage_findings.py) made to agree, here and nowhere else. Pure, no I/O.

The doctor reads more than the fleet rules do (SM activity from the job's first kernel on, the
job's own memory, where its threads spent their time), so where they differ:
- a job that held the GPU without running kernels (idle_reservation, never_used_gpu): the GPU is
  idle, whatever its memory says;
- a job the doctor finds under-used (memory and activity both low): the GPU is over-provisioned;
- a job whose GPU idles for a cause in its own code (input pipeline, host, syncs, copies, a
  straggler): the GPU is not sized at all (finding None) until that is fixed, since a smaller
  GPU is not the fix and the review would otherwise offer one;
- a job the doctor finds healthy on a GPU the fleet rules call idle or over-provisioned (the
  job's memory is a small share of the GPU's, or start-up held the window's average down): the
  doctor reports the over-provisioning as an under_used finding with the rules' evidence, so
  the report says it once, the same way in the doctor and in the review.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from advisor.fleet.job_diagnosis import Diagnosis
from probes.report import Finding, GpuUtilisation, JobFinding, JobSample

RELEASE = ("idle_reservation", "never_used_gpu")
# Findings whose fix is in the job's code: the GPU's size is not the question until it is fixed.
FIX_THE_JOB = (
    "host_bound",
    "sync_bound",
    "transfer_bound",
    "made_on_host",
    "input_bound",
    "straggler",
)
SMALLER = ("idle", "over_provisioned")


def job_gpu_indices(samples: Sequence[JobSample]) -> set[int] | None:
    """The GPUs a process of the job held a context on; None when NVML could not say."""
    seen = [(g.index, g.job_on_gpu) for s in samples for g in s.gpus if g.job_on_gpu is not None]
    if not seen:
        return None
    return {i for i, on in seen if on}


def gpu_class(current: Finding | None, codes: Sequence[str]) -> tuple[Finding | None, str | None]:
    """The class of a GPU the job used given the doctor's finding codes, and the evidence line
    that says why it differs from the fleet rules' (None: the rules' class stands)."""
    if any(c in RELEASE for c in codes):
        if current == "idle":
            return current, None
        return "idle", "the doctor saw the job hold this GPU without running kernels"
    fixable = [c for c in codes if c in FIX_THE_JOB]
    if fixable:
        if current not in SMALLER:
            return current, None
        return None, (
            f"not sized: the job is {', '.join(fixable)} (the doctor's finding); a smaller GPU "
            "is not the fix"
        )
    if "under_used" in codes and current != "over_provisioned":
        return "over_provisioned", "the doctor found the job's memory and activity both low"
    return current, None


def agree(
    gpus: Sequence[GpuUtilisation], samples: Sequence[JobSample], found: Diagnosis
) -> tuple[list[GpuUtilisation], Diagnosis]:
    """The GPUs' classes and the diagnosis, made to agree (module docstring)."""
    if found.verdict == "unmeasured":
        return list(gpus), found
    used = job_gpu_indices(samples)
    mine = [g for g in gpus if used is None or g.index in used]
    codes = [f.code for f in found.findings]
    if not found.findings:
        flagged = [g for g in mine if g.finding in SMALLER]
        if not flagged:
            return list(gpus), found
        findings = [_over_provisioned(flagged)]
        return list(gpus), replace(found, findings=findings, verdict="findings")
    out = []
    for g in gpus:
        finding, why = gpu_class(g.finding, codes) if g in mine else (g.finding, None)
        update = {"finding": finding, "evidence": [*g.evidence, why]} if why else {}
        out.append(g.model_copy(update=update))
    return out, found


def _over_provisioned(flagged: Sequence[GpuUtilisation]) -> JobFinding:
    """A healthy job on GPUs the fleet rules call idle or over-provisioned: their evidence."""
    codes = sorted({c for g in flagged for c in g.reason_codes})
    which = ", ".join(str(g.index) for g in flagged)
    return JobFinding(
        code="under_used",
        summary=f"over-provisioned: GPU {which} {'is' if len(flagged) == 1 else 'are'} more "
        f"than the job needs by the fleet's rules ({', '.join(codes) or 'no reading'})",
        evidence=[e for g in flagged for e in g.evidence],
        fix="run it on a GPU with the memory and speed it uses, or share this one (MIG or MPS)",
    )
