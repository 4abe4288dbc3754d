"""Every published training row (tests/data/published.yaml and published-2.yaml `training`)
predicted by the training time model (advisor/perf/training.py, through
advisor/planning/training_plan.py's layout and plan).

Five kinds of rows, each compared on what it publishes:
- whole-run GPU-hours (model cards): the plan the advisor makes for the row's model and tokens on
  the row's GPU, at the row's GPU count (when stated, else the plan's own), goodput included,
  recomputation as the advisor decides it (as needed);
- whole runs stating a GPU count and tokens but no layout (LLaMA 65B's tokens/s per GPU,
  MPT-7B's wall days): the advisor's own plan at that GPU count, at the context length their
  sources give (SEQ_LEN_FROM_SOURCE);
- steady-state MFU at scale (Llama 3 Table 4, Megatron-Core, llm-foundry): MFU on model FLOPs
  (6ND + causal attention) at the row's stated layout, context parallelism included; a row run
  with FSDP FULL_SHARD (llm-foundry) at ZeRO-3 over every GPU with its stated global batch and
  activation checkpointing;
- NeMo FP8 benchmarks (pretraining, SFT, LoRA): tokens/s per GPU at the row's layout, the linear
  layers at the FP8 peak, attention at the BF16 one;
- NeMo long-sequence benchmarks (4k to 1M tokens, context parallel): model TFLOP/s per GPU,
  NeMo's own count (6ND-style GEMMs + causal attention, nemo/utils/flops_formulas.py).

The constants are the model's own (the workload profiles' kernel efficiencies, the FP8 factor,
goodput, overlap); nothing here is fitted per row. What a row does not state is filled from its
source's paper, or marked estimated below.

    PYTHONPATH=. python benchmarks/bench_calibration.py --training [--record]
"""

from __future__ import annotations

import re
from typing import Any

from advisor.catalog.queries import Catalog
from advisor.perf.efficiency import shape_table
from advisor.perf.op_model import table_for
from advisor.perf.sizing import Shape
from advisor.perf.training import (
    DEFAULT_GLOBAL_BATCH_TOKENS,
    FP8_RELATIVE_EFFICIENCY,
    Cluster,
    Job,
    Layout,
    expert_ridge_tokens,
    goodput,
    run_time,
    step_time,
    training_peaks,
)
from advisor.perf.work import Work
from advisor.planning.plans import plan_for
from advisor.planning.training_run import vendor_efficiency
from benchmarks.calibration_rows import Comparison, rows, summary_lines

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
    "Llama 3 8B": "llama-3.1-8b",
}
# Network between nodes, Gbit/s per 8-GPU node. Llama 2 (arXiv:2307.09288 section 2.2.1): RSC
# InfiniBand and production RoCE "interconnect 200 Gbps end-points" = 1,600 per node. Llama 3
# (arXiv:2407.21783 section 3.3.1): 400 Gbps per GPU RoCE = 3,200; DGX H100 (Megatron, NeMo rows):
# 8 x 400 Gbit/s ConnectX-7 = 3,200 (DGX H100 datasheet).
# DGX B200: 8 x 400 Gbit/s ConnectX-7 (DGX B200 datasheet) = 3,200.
# MosaicML's A100 40GB nodes (MPT-7B, llm-foundry): "1600 Gbps RoCE node interconnect" (the
# llm-foundry rows' hardware field).
NETWORK_GBPS = {
    "a100-40gb-sxm": 1600.0,
    "a100-80gb-sxm": 1600.0,
    "h100-sxm": 3200.0,
    "b200": 3200.0,
}
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
# Context lengths two whole-run rows leave out, from their sources: LLaMA (v1) 2,048 tokens (the
# Llama 2 paper, arXiv:2307.09288 A.2.1: "We expand the context window for Llama 2 from 2048
# tokens to 4096 tokens"); MPT-7B 2,048 (the row's own notes: the model card).
SEQ_LEN_FROM_SOURCE = {"llama1-65b-pretrain": 2048, "mpt-7b-pretrain": 2048}
# Megatron-Core's distributed optimizer shards optimizer states over data parallel (ZeRO-1,
# Megatron-LM docs/distrib_optimizer.md); Llama 3 shards them likewise (arXiv:2407.21783 3.3.2).
ZERO_STAGE_AT_SCALE = 1
# Llama 3's context parallelism all-gathers the keys and values before attention, its latency
# "exposed in the critical path" (arXiv:2407.21783 section 3.3.2), not Megatron-Core's ring: the
# rows from that paper are timed so (Job.cp_all_gather).
CP_ALL_GATHER_SOURCE = "arXiv:2407.21783"


# A training row's comparison has the inference rows' shape (calibration_rows.Comparison).
TrainingComparison = Comparison


def _shape(row: dict[str, Any], cat: Catalog) -> Shape:
    preset = MODELS.get(row["model"])
    if preset is not None:
        return Shape.of(cat.models[preset])
    if str(row["model"]).startswith("GPT3-"):  # NeMo's GPT3 5B/20B: the advisor's assumed shape
        return Shape.assumed(float(row["params_b"]))
    found = re.match(r"(\d+) layers, hidden (\d+), (\d+) heads", str(row.get("model_shape", "")))
    if found:  # Megatron-Core benchmark GPTs: the shape the README's table gives
        layers, hidden, heads = (int(g) for g in found.groups())
        p = row["params_b"] * 1e9
        return Shape(row["model"], p, p, layers, hidden, heads, heads, hidden // heads)
    return Shape.bare(float(row["params_b"]))  # Llama 2 34B: not released, no preset


def _accelerator(row: dict[str, Any]) -> str:
    hardware = str(row["hardware"])
    if hardware.startswith(("A100-40GB", "A100 40GB")):
        return "a100-40gb-sxm"
    if hardware.startswith("A100"):
        return "a100-80gb-sxm"
    return "b200" if hardware.startswith("B200") else "h100-sxm"


def _precision(row: dict[str, Any]) -> str:
    return "fp8" if str(row.get("precision")).upper() == "FP8" else "bf16"


def _cluster(row: dict[str, Any], cat: Catalog) -> tuple[Cluster, float]:
    """The row's nodes at its precision, and the factor on the calibrated efficiency a plan in
    that precision on that GPU reads (the FP8 or NVFP4 factor x the GPU's operator table's
    GEMMs or its vendor's: advisor/planning/training_run.py vendor_efficiency); the nodes carry
    the GPU's operator table, whose training rows time attention, as the plan's do."""
    acc = cat.accelerators[_accelerator(row)]
    precision = _precision(row)
    gemm, attention, factor = training_peaks(acc, precision)
    network = NETWORK_GBPS[acc.id]
    ridge = expert_ridge_tokens(acc)
    table = table_for(acc.id)
    shapes = shape_table(acc)
    cluster = Cluster(
        gemm, 8, acc.interconnect_gb_s, network, attention, None, ridge, table, precision, shapes
    )
    return cluster, factor * vendor_efficiency(acc, precision).factor


def _fsdp(row: dict[str, Any]) -> bool:
    """A row run with PyTorch FSDP FULL_SHARD (llm-foundry's benchmarks, MPT-7B): ZeRO-3 over
    every GPU, no tensor or pipeline parallelism (the row's notes say so)."""
    return "FSDP" in str(row.get("notes", ""))


def _layout(row: dict[str, Any], stage: int) -> Layout:
    """The row's stated layout (DP from the GPU count where the row gives none)."""
    if _fsdp(row) and not row.get("parallelism"):
        return Layout(int(row["gpu_count"]), zero_stage=3)
    text = str(row.get("parallelism") or STRONG_SCALING_LAYOUT)
    degree = {k: int(v) for k, v in re.findall(r"(TP|PP|CP|DP)(\d+)", text)}
    tp, pp, cp = degree.get("TP", 1), degree.get("PP", 1), degree.get("CP", 1)
    dp = degree.get("DP") or row["gpu_count"] // (tp * pp * cp)
    return Layout(dp, tp, pp, stage, cp)


def _global_batch(row: dict[str, Any]) -> int:
    if "global_batch_sequences" in row:
        return int(row["global_batch_sequences"]) * int(row["seq_len"])
    if isinstance(row.get("global_batch_tokens"), int):  # llm-foundry's stated batch
        return int(row["global_batch_tokens"])
    return LLAMA3_405B_BATCH_TOKENS


def gpu_hours(row: dict[str, Any], cat: Catalog) -> TrainingComparison:
    """The advisor's own plan for the whole run (planning/plans.py, as `estimate` makes it)
    on nodes of 8 of the row's GPU over the row's network: layout by memory, recomputation as
    needed, at the row's GPU count (when stated, else the plan's own), goodput included. The
    planner's ZeRO stage (1 or 3): the cards do not state one. Llama 2 34B (never released)
    is a bare size, on the advisor's assumed shape."""
    preset = MODELS.get(row["model"])
    family = "llama-2" if "Llama 2" in row["model"] else "llama-3.1"
    is_405b = row["id"].startswith("llama31-405b")
    gpus = row["gpu_count"] or (LLAMA3_405B_GPUS if is_405b else None)
    batch = LLAMA3_405B_BATCH_TOKENS if is_405b else DEFAULT_GLOBAL_BATCH_TOKENS
    hours = _planned_gpu_hours(row, cat, preset, gpus, CONTEXT[family], batch)
    return TrainingComparison(row["id"], "gpu_hours", hours, row["gpu_hours"])


def _planned_gpu_hours(
    row: dict[str, Any], cat: Catalog, preset: str | None, gpus: int | None, seq: int, batch: int
) -> float:
    """GPU-hours of the advisor's own plan for the row's tokens (on `gpus` GPUs when given, else
    the plan's own), on nodes of 8 of the row's GPU over the row's network, goodput included."""
    acc = cat.accelerators[_accelerator(row)]
    work = Work(
        workload="large_scale_training",
        model=preset,
        params_b=None if preset else float(row["params_b"]),
        gpu_count=gpus,
        tokens=float(row["tokens"]),
        seq_len=seq,
        batch=1,
        global_batch_tokens=batch,
        max_gpus=gpus,
    )
    plan = plan_for(cat, work, cat.workloads["large_scale_training"])
    fit = plan.fit(acc, 8, acc.interconnect_gb_s, NETWORK_GBPS[acc.id])
    assert fit.gpu_hours is not None, fit.unfit
    return fit.gpu_hours


def _whole_run(row: dict[str, Any], cat: Catalog) -> tuple[float, int, float]:
    """(GPU-hours, GPUs, goodput) of the advisor's own plan for a whole-run row that states its
    GPU count and tokens but no layout (LLaMA 65B, MPT-7B), as `estimate` makes it."""
    gpus = int(row["gpu_count"])
    seq = SEQ_LEN_FROM_SOURCE[row["id"]]
    hours = _planned_gpu_hours(row, cat, None, gpus, seq, DEFAULT_GLOBAL_BATCH_TOKENS)
    return hours, gpus, goodput(gpus)


def planned_tokens_per_gpu(row: dict[str, Any], cat: Catalog) -> TrainingComparison:
    """Steady-state tokens/s per GPU of the plan (the run's tokens over its GPU-hours, goodput
    taken out: a stated throughput is measured while running)."""
    hours, _, share = _whole_run(row, cat)
    per_gpu = float(row["tokens"]) / (hours * 3600 * share)
    return TrainingComparison(
        row["id"], "tokens_s_per_gpu", per_gpu, row["stated_tokens_per_sec_per_gpu"]
    )


def planned_wall_days(row: dict[str, Any], cat: Catalog) -> TrainingComparison:
    """Wall days of the plan at the row's GPU count, goodput included."""
    hours, gpus, _ = _whole_run(row, cat)
    return TrainingComparison(row["id"], "wall_days", hours / gpus / 24, row["wall_days"])


def mfu_at_scale(row: dict[str, Any], cat: Catalog, eff: float) -> TrainingComparison:
    shape = _shape(row, cat)
    layout = _layout(row, ZERO_STAGE_AT_SCALE)
    # activation checkpointing as the row ran it (llm-foundry states it; MFU counts model
    # FLOPs, so a recomputed forward lowers it)
    recompute = row.get("activation_checkpointing") is True
    cluster, factor = _cluster(row, cat)
    job = Job(
        shape,
        1e12,
        int(row["seq_len"]),
        1,
        recompute,
        eff * factor,
        _global_batch(row),
        cp_all_gather=CP_ALL_GATHER_SOURCE in str(row.get("source", "")),
    )
    run = run_time(job, cluster, layout, layout.gpus)
    return TrainingComparison(row["id"], "mfu", run.mfu, row["stated_mfu"])


def _benchmark_step(row: dict[str, Any], cat: Catalog, eff: float) -> tuple[Job, float, int]:
    """(job, step seconds, GPUs) of a NeMo benchmark row at its layout and precision: SFT trains
    every weight, LoRA the adapters (NeMo's recipes: rank 16, the recipes' default, estimated
    as the advisor's own default)."""
    shape = _shape(row, cat)
    layout = _layout(row, ZERO_STAGE_AT_SCALE)
    cluster, factor = _cluster(row, cat)
    method = "lora" if row.get("finetune_method") == "LoRA" else "full"
    micro = int(row.get("micro_batch") or 1)
    seq = int(row["seq_len"])
    job = Job(shape, 1e12, seq, micro, False, eff * factor, _global_batch(row), method)
    return job, step_time(job, cluster, layout).seconds, layout.gpus


def tokens_per_gpu(row: dict[str, Any], cat: Catalog, eff: float) -> TrainingComparison:
    job, seconds, gpus = _benchmark_step(row, cat, eff)
    per_gpu = job.sequences_per_step * job.seq_len / seconds / gpus
    return TrainingComparison(
        row["id"], "tokens_s_per_gpu", per_gpu, row["stated_tokens_per_sec_per_gpu"]
    )


def tflops_per_gpu(row: dict[str, Any], cat: Catalog, eff: float) -> TrainingComparison:
    job, seconds, gpus = _benchmark_step(row, cat, eff)
    tokens = job.sequences_per_step * job.seq_len
    per_gpu = job.model_flops(tokens) / seconds / gpus / 1e12
    return TrainingComparison(row["id"], "tflops_per_gpu", per_gpu, row["stated_tflops_per_gpu"])


def compare_training(row: dict[str, Any], cat: Catalog) -> TrainingComparison:
    profile = "fine_tuning" if row.get("finetune_method") else "large_scale_training"
    eff = cat.workloads[profile].efficiency
    if row["gpu_hours"] is not None:
        return gpu_hours(row, cat)
    if row["stated_mfu"] is not None:
        return mfu_at_scale(row, cat, eff)
    if row["id"] in SEQ_LEN_FROM_SOURCE:  # a whole run, no layout stated: the advisor's plan
        if row.get("stated_tokens_per_sec_per_gpu") is not None:
            return planned_tokens_per_gpu(row, cat)
        return planned_wall_days(row, cat)
    if row.get("stated_tokens_per_sec_per_gpu") is not None:
        return tokens_per_gpu(row, cat, eff)
    return tflops_per_gpu(row, cat, eff)


def training_rows() -> list[dict[str, Any]]:
    return rows("training")


def run_training(cat: Catalog, skipped: list[str] | None = None) -> list[TrainingComparison]:
    """Every training row's comparison; a row lacking a field its comparison needs (a sequence
    length the source does not state) is listed in `skipped` with the field."""
    out = []
    for row in training_rows():
        try:
            out.append(compare_training(row, cat))
        except KeyError as exc:
            if skipped is not None:
                skipped.append(f"{row['id']}: {exc.args[0]} not stated by the source")
        except (TypeError, ZeroDivisionError):  # a needed field null or zero in the source
            if skipped is not None:
                skipped.append(f"{row['id']}: a field the comparison needs is not stated")
    return out


def training_report(cat: Catalog) -> str:
    skipped: list[str] = []
    comps = run_training(cat, skipped)
    lines = [f"{'row':42} {'metric':18} {'predicted':>12} {'published':>12} {'ratio':>6}"]
    for c in comps:
        lines.append(
            f"{c.row_id:42} {c.metric:18} {c.predicted:12.4g} {c.published:12.4g} {c.ratio:6.2f}"
        )
    lines += [
        *summary_lines(comps, ratio_digits=2),
        f"constants: kernel efficiency {cat.workloads['large_scale_training'].efficiency:.2f} "
        f"(large_scale_training), {cat.workloads['fine_tuning'].efficiency:.2f} (fine_tuning), "
        f"x {FP8_RELATIVE_EFFICIENCY:g} in FP8 (catalog, perf/training.py), goodput "
        "1 / (1 + failures per GPU-hour x GPUs x hours each) (Llama 3), overlap 0.8 (estimated), "
        "whole-layer pipeline stages, the fullest one in virtual stages of 2 layers (NeMo "
        "recipes), Llama 3's context parallelism all-gathered (its paper)",
        *(f"skipped: {s}" for s in skipped),
    ]
    return "\n".join(lines)
