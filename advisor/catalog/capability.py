"""What a chip can do: the one rule that decides whether a workload runs on an accelerator at
all, read alike by `recommend` (the engine's WORKLOAD_MISMATCH check), `estimate` (a refusal,
exit 1) and the review's cost per unit of work (which prices through `estimate`)."""

from __future__ import annotations

from advisor.catalog.models import Accelerator, FormFactor, WorkloadProfile

JOB_WORDS = {
    "train": "train",
    "fine_tune": "fine-tune",
    "serve": "serve",
    "batch": "run batch work",
}


def runs(hw: Accelerator, p: WorkloadProfile) -> bool:
    """Whether the workload runs on this hardware at all: its kind (form factor) and the job it
    asks of an accelerator (catalog `jobs`: Inferentia serves, it does not train)."""
    return hw.form_factor in p.form_factors and p.job in hw.jobs


def mismatch_sentence(hw: Accelerator, p: WorkloadProfile) -> str:
    """Why the workload does not run on this hardware, in one sentence."""
    if hw.form_factor in p.form_factors:
        can = " or ".join(JOB_WORDS[j] for j in hw.jobs if j != "batch")
        return f"{hw.name} does not {JOB_WORDS[p.job]} ({p.id}): it is built to {can} only"
    kinds = ", ".join(p.form_factors)  # StrEnums: their values
    what = "an edge device" if hw.form_factor == FormFactor.edge else f"{hw.form_factor} hardware"
    return f"{hw.name} is {what}; {p.id} runs on: {kinds}"


def cannot_run(hw: Accelerator, p: WorkloadProfile) -> str | None:
    """Why the workload does not run on this hardware, or None when it does."""
    return None if runs(hw, p) else mismatch_sentence(hw, p)
