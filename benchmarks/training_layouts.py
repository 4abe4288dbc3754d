"""The layouts the planner chooses beside the published recipes' (tests/data/published.yaml and
published-2.yaml training rows that state one: Llama 3 405B, the NeMo recipes): the same model,
GPU count, sequence, global batch and precision, the advisor's own plan (layout, recomputation,
ZeRO stage as it decides them), and its MFU beside the MFU of the published layout timed by the
same model. Rows on a model without a preset are left out (their shape is not the advisor's).

    PYTHONPATH=. python benchmarks/training_layouts.py [--record]
"""

from __future__ import annotations

import datetime as dt
import statistics
import sys
from pathlib import Path
from typing import Any

from advisor.catalog.loading import load_catalog
from advisor.catalog.queries import Catalog
from advisor.perf.training import Job, Layout, run_time
from advisor.perf.work import Work
from advisor.planning.plans import plan_for
from benchmarks.calibration_training import (
    CP_ALL_GATHER_SOURCE,
    MODELS,
    NETWORK_GBPS,
    ZERO_STAGE_AT_SCALE,
    _accelerator,
    _cluster,
    _global_batch,
    _layout,
    _precision,
    _shape,
    training_rows,
)


def _words(layout: Layout) -> str:
    cp = f" CP{layout.cp}" if layout.cp > 1 else ""
    ep = f" EP{layout.ep}" if layout.ep > 1 else ""
    return f"TP{layout.tp} PP{layout.pp}{cp}{ep} DP{layout.dp} Z{layout.zero_stage}"


def compare(row: dict[str, Any], cat: Catalog) -> tuple[str, float | None] | None:
    """One row: published layout and its MFU by the model, the planner's layout and MFU; with
    |planned / published - 1| where the planner has a plan."""
    preset = MODELS.get(row["model"])
    if preset is None or not row.get("parallelism") or not row.get("gpu_count"):
        return None
    gpus, seq = int(row["gpu_count"]), int(row["seq_len"])
    acc = cat.accelerators[_accelerator(row)]
    cluster, factor = _cluster(row, cat)
    eff = cat.workloads["large_scale_training"].efficiency * factor
    stated = _layout(row, ZERO_STAGE_AT_SCALE)
    gathered = CP_ALL_GATHER_SOURCE in str(row.get("source", ""))  # as the calibration times it
    job = Job(
        _shape(row, cat), 1e12, seq, 1, False, eff, _global_batch(row), cp_all_gather=gathered
    )
    stated_mfu = run_time(job, cluster, stated, stated.gpus).mfu
    work = Work(
        workload="large_scale_training",
        model=preset,
        gpu_count=gpus,
        max_gpus=gpus,
        tokens=1e12,
        seq_len=seq,
        batch=1,
        global_batch_tokens=_global_batch(row),
        precision=_precision(row),
    )
    plan = plan_for(cat, work, cat.workloads["large_scale_training"])
    fit = plan.fit(acc, 8, acc.interconnect_gb_s, NETWORK_GBPS[acc.id])
    if fit.layout is None or fit.mfu is None:
        return f"{row['id']:36} {row['parallelism']:22} no plan: {fit.unfit}", None
    recompute = next((f.value for f in fit.figures if f.name == "recompute"), 0.0)
    line = (
        f"{row['id']:36} {row['parallelism']:22} {stated_mfu:6.3f}  "
        f"{_words(fit.layout):28} {recompute:5.2f} {fit.mfu:6.3f}"
    )
    return line, abs(fit.mfu / stated_mfu - 1)


def report(cat: Catalog) -> str:
    """The table, then |planned MFU / the published layout's MFU - 1| over the rows with a
    plan (both timed by the same model)."""
    head = (
        f"{'row':36} {'published layout':22} {'MFU':>6}  {'planned layout':28} "
        f"{'recomp':>5} {'MFU':>6}"
    )
    lines = [head]
    errors = []
    for row in training_rows():
        compared = compare(row, cat)
        if compared is None:
            continue
        lines.append(compared[0])
        if compared[1] is not None:
            errors.append(compared[1])
    if errors:
        within = sum(e <= 0.10 for e in errors)
        lines.append(
            f"rows with a plan: {len(errors)}; planned MFU within 10% of the published: {within}; "
            f"median error: {statistics.median(errors):.1%}"
        )
    return "\n".join(lines)


def main() -> None:
    text = report(load_catalog())
    print(text)
    if "--record" in sys.argv:
        out = Path(__file__).parent / "results" / f"training-layouts-{dt.date.today()}.txt"
        out.write_text(text + "\n")
        print(f"written {out}")


if __name__ == "__main__":
    main()
