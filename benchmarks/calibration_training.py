"""Every published training row (tests/data/published.yaml `training`) predicted by the training
time model (advisor/perf/training.py, through advisor/planning/training_plan.py's layout and plan).

Three kinds of rows, each compared on what it publishes:
- whole-run GPU-hours (model cards): the plan the advisor makes for the row's model and tokens on
  the row's GPU, at the row's GPU count (when stated, else the plan's own), goodput included;
- steady-state MFU at scale (Llama 3 Table 4, Megatron-Core): MFU on 6ND at the row's stated
  layout (context parallelism counted as data parallelism: it splits the batch the same way);
- NeMo FP8 benchmarks: tokens/s per GPU at the row's layout, on the FP8 dense peak.

The constants are the model's own (catalog MFU 0.40 for large_scale_training, goodput, overlap);
nothing here is fitted per row. What a row does not state is filled from its source's paper, or
marked estimated below.

    PYTHONPATH=. python benchmarks/bench_calibration.py --training [--record]
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from advisor.catalog.queries import Catalog
from advisor.perf.sizing import Shape, activation_memory, usable_memory_gb
from advisor.perf.training import (
    DEFAULT_GLOBAL_BATCH_TOKENS,
    Cluster,
    Job,
    Layout,
    run_time,
    step_time,
)
from advisor.planning.training_plan import full_training_split, plan_training, training_layouts
from benchmarks.bench_calibration import DATA, Comparison, summary_lines

MODELS = {
    "Llama 2 7B": "llama-2-7b",
    "Llama 2 13B": "llama-2-13b",
    "Llama 2 70B": "llama-2-70b",
    "Llama 3.1 8B": "llama-3.1-8b",
    "Llama 3.1 70B": "llama-3.1-70b",
    "Llama 3.1 405B": "llama-3.1-405b",
    "Llama 3 405B (pre-training stage config)": "llama-3.1-405b",
    "Llama 3 8B (NeMo recipe)": "llama-3.1-8b",
    "Llama 3 70B (NeMo recipe)": "llama-3.1-70b",
    "Llama 2 70B (NeMo recipe)": "llama-2-70b",
    "GPT-3 175B (NeMo recipe)": "gpt-3-175b",
    "GPT-3 (Megatron-Core, 'slightly more than 175 billion parameters')": "gpt-3-175b",
}
# Network between nodes, Gbit/s per 8-GPU node. Llama 2 (arXiv:2307.09288 section 2.2.1): RSC
# InfiniBand and production RoCE "interconnect 200 Gbps end-points" = 1,600 per node. Llama 3
# (arXiv:2407.21783 section 3.3.1): 400 Gbps per GPU RoCE = 3,200; DGX H100 (Megatron, NeMo rows):
# 8 x 400 Gbit/s ConnectX-7 = 3,200 (DGX H100 datasheet).
NETWORK_GBPS = {"a100-80gb-sxm": 1600.0, "h100-sxm": 3200.0}
# Whole-run rows state no GPU count except Llama 3 405B (16K H100s, arXiv:2407.21783 section
# 3.3): the others run on the plan's own count (the fewest GPUs that hold the model), where
# GPU-hours do not depend on the count while communication hides under compute.
LLAMA3_405B_GPUS = 16384
# Llama 3 405B: 8K context, 16M-token batches (Table 4); Llama 3.1 8B/70B: 8K context (card),
# batch not published: the advisor's default (Llama 2's 4M). Llama 2: 4K context, 4M batch.
CONTEXT = {"llama-2": 4096, "llama-3.1": 8192}
LLAMA3_405B_BATCH_TOKENS = 16 * 2**20
# The Megatron-Core strong-scaling rows state no layout: the weak-scaling table's 177B layout
# (TP8 PP6, same README) is used for the 175B model.
STRONG_SCALING_LAYOUT = "TP8 PP6"
# Megatron-Core's distributed optimizer shards optimizer states over data parallel (ZeRO-1,
# Megatron-LM docs/distrib_optimizer.md); Llama 3 shards them likewise (arXiv:2407.21783 3.3.2).
ZERO_STAGE_AT_SCALE = 1


# A training row's comparison has the inference rows' shape (bench_calibration.Comparison).
TrainingComparison = Comparison


def _shape(row: dict[str, Any], cat: Catalog) -> Shape:
    preset = MODELS.get(row["model"])
    if preset is not None:
        return Shape.of(cat.models[preset])
    found = re.match(r"(\d+) layers, hidden (\d+), (\d+) heads", str(row.get("model_shape", "")))
    if found:  # Megatron-Core benchmark GPTs: the shape the README's table gives
        layers, hidden, heads = (int(g) for g in found.groups())
        p = row["params_b"] * 1e9
        return Shape(row["model"], p, p, layers, hidden, heads, heads, hidden // heads)
    return Shape.bare(float(row["params_b"]))  # Llama 2 34B: not released, no preset


def _accelerator(row: dict[str, Any]) -> str:
    return "a100-80gb-sxm" if str(row["hardware"]).startswith("A100") else "h100-sxm"


def _cluster(row: dict[str, Any], cat: Catalog, precision: str = "bf16") -> Cluster:
    acc = cat.accelerators[_accelerator(row)]
    peak = getattr(acc.peak_tflops, precision)
    return Cluster(peak, 8, acc.interconnect_gb_s, NETWORK_GBPS[acc.id])


def _layout(row: dict[str, Any], stage: int) -> tuple[Layout, int]:
    """The row's layout, and its context-parallel degree: CP splits each sequence over CP ranks
    that reduce gradients together, which the model runs as data parallelism over sequences
    CP times shorter (the micro-batches per pipeline are unchanged)."""
    text = str(row.get("parallelism") or STRONG_SCALING_LAYOUT)
    degree = {k: int(v) for k, v in re.findall(r"(TP|PP|CP|DP)(\d+)", text)}
    tp, pp, cp = degree.get("TP", 1), degree.get("PP", 1), degree.get("CP", 1)
    dp = degree.get("DP") or row["gpu_count"] // (tp * pp * cp)
    return Layout(dp * cp, tp, pp, stage), cp


def _global_batch(row: dict[str, Any]) -> int:
    if "global_batch_sequences" in row:
        return int(row["global_batch_sequences"]) * int(row["seq_len"])
    return LLAMA3_405B_BATCH_TOKENS


def gpu_hours(row: dict[str, Any], cat: Catalog, mfu: float) -> TrainingComparison:
    """The advisor's plan for the whole run on the row's GPU: layout by memory, then the time
    of each layout at the GPU count, the cheapest kept (planning/training_plan.py plan_training)."""
    shape = _shape(row, cat)
    acc = cat.accelerators[_accelerator(row)]
    family = "llama-2" if "Llama 2" in row["model"] else "llama-3.1"
    seq = CONTEXT[family]
    is_405b = row["id"].startswith("llama31-405b")
    gpus = row["gpu_count"] or (LLAMA3_405B_GPUS if is_405b else 0)
    batch = LLAMA3_405B_BATCH_TOKENS if is_405b else DEFAULT_GLOBAL_BATCH_TOKENS
    job = Job(shape, float(row["tokens"]), seq, 1, True, mfu, int(batch))
    act = sum(f.value for f in activation_memory(shape, seq, 1, True)) if shape.layers else 0.0
    # the request's default ZeRO stage (3): the cards do not state one, and the 34B row has no
    # published shape for tensor parallelism
    kept, sharded = full_training_split(shape, 3, act)
    layouts = training_layouts(shape, 3, kept, sharded, act, usable_memory_gb(acc.memory_gb), 8)
    plan = plan_training(job, _cluster(row, cat), layouts, gpus, None, gpus or None)
    assert plan is not None and plan[2] is not None
    return TrainingComparison(row["id"], "gpu_hours", plan[2].gpu_hours, row["gpu_hours"])


def mfu_at_scale(row: dict[str, Any], cat: Catalog, mfu: float) -> TrainingComparison:
    shape = _shape(row, cat)
    layout, cp = _layout(row, ZERO_STAGE_AT_SCALE)
    job = Job(shape, 1e12, int(row["seq_len"]) // cp, 1, False, mfu, _global_batch(row))
    run = run_time(job, _cluster(row, cat), layout, layout.gpus)
    return TrainingComparison(row["id"], "mfu", run.mfu, row["stated_mfu"])


def fp8_tokens_per_gpu(row: dict[str, Any], cat: Catalog, mfu: float) -> TrainingComparison:
    shape = _shape(row, cat)
    layout, cp = _layout(row, ZERO_STAGE_AT_SCALE)
    seq = int(row["seq_len"]) // cp
    job = Job(shape, 1e12, seq, int(row["micro_batch"]), False, mfu, _global_batch(row))
    step = step_time(job, _cluster(row, cat, "fp8"), layout)
    per_gpu = job.sequences_per_step * job.seq_len / step.seconds / layout.gpus
    return TrainingComparison(
        row["id"], "tokens_s_per_gpu", per_gpu, row["stated_tokens_per_sec_per_gpu"]
    )


def compare_training(row: dict[str, Any], cat: Catalog) -> TrainingComparison:
    mfu = cat.workloads["large_scale_training"].efficiency
    if row["gpu_hours"] is not None:
        return gpu_hours(row, cat, mfu)
    if row["stated_mfu"] is not None:
        return mfu_at_scale(row, cat, mfu)
    return fp8_tokens_per_gpu(row, cat, mfu)


def training_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = yaml.safe_load(DATA.read_text())["training"]
    return rows


def run_training(cat: Catalog) -> list[TrainingComparison]:
    return [compare_training(row, cat) for row in training_rows()]


def training_report(cat: Catalog) -> str:
    comps = run_training(cat)
    lines = [f"{'row':42} {'metric':18} {'predicted':>12} {'published':>12} {'ratio':>6}"]
    for c in comps:
        lines.append(
            f"{c.row_id:42} {c.metric:18} {c.predicted:12.4g} {c.published:12.4g} {c.ratio:6.2f}"
        )
    lines += [
        *summary_lines(comps, ratio_digits=2),
        f"constants: MFU {cat.workloads['large_scale_training'].efficiency:.2f} (catalog), "
        "goodput 0.90 over a day (Llama 3), overlap 0.8 (estimated), 2 layers per virtual "
        "pipeline stage (NeMo recipes)",
    ]
    return "\n".join(lines)
