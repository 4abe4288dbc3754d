"""Every published training row predicted within x1.5 (tests/data/published.yaml and
published-2.yaml `training`; docs/reference-figures.md) by the training time model:
whole-run GPU-hours, steady-state MFU at scale, FP8 tokens/s per GPU (pretraining, SFT, LoRA),
model TFLOP/s per GPU at long context. Rows outside the bound are strict xfail with the
reason."""

from __future__ import annotations

import math
import statistics

import pytest

from advisor.catalog.loading import load_catalog
from benchmarks.calibration_training import compare_training, run_training, training_rows

CATALOG = load_catalog()
# The Llama 3.1 model card's 1.46M H100-hours for the 8B model over ~15T tokens imply 14% MFU on
# 6ND, a third of what the same card's 405B row (35%) and the Llama 3 paper's 38-43% imply; the
# card does not say what the figure includes (post-training, ablations?) nor the GPU count or
# batch. Nothing the model knows of an 8B run explains a 2.6x gap: left as a known miss.
OUTSIDE = {
    "llama31-8b-train": "card's 8B GPU-hours imply 14% MFU; what they include is not stated",
}


def _params() -> list[object]:
    return [
        pytest.param(
            row,
            id=row["id"],
            marks=[pytest.mark.xfail(reason=OUTSIDE[row["id"]], strict=True)]
            if row["id"] in OUTSIDE
            else [],
        )
        for row in training_rows()
    ]


@pytest.mark.parametrize("row", _params())
def test_training_row_within_1_5(row: dict[str, object]) -> None:
    c = compare_training(row, CATALOG)
    assert 1 / 1.5 <= c.ratio <= 1.5, f"{c.metric}: {c.predicted:.4g} vs {c.published}"


def test_every_kind_of_training_row_is_compared() -> None:
    comps = run_training(CATALOG)
    kinds = {c.metric for c in comps}
    assert kinds == {"gpu_hours", "mfu", "tokens_s_per_gpu", "tflops_per_gpu"}
    assert len(comps) == len(training_rows()) == 39


def test_training_median_error_at_most_15_percent() -> None:
    comps = run_training(CATALOG)
    assert statistics.median(abs(c.ratio - 1) for c in comps) <= 0.15


def test_a_whole_run_by_hand() -> None:
    """Llama 2 7B, 2T tokens on A100-80GB (312 TFLOP/s dense BF16, NVSwitch 600 GB/s both
    ways): the plan's fewest GPUs are one node of 8; ZeRO-1 (2 + 2 + 12/8 bytes a parameter,
    37 GB) and one micro-batch's activations without recomputation fit the 72 GB usable. A step
    is the 4M-token batch (1,024 x 4,096); the GEMMs' 6ND at the 0.51 kernel efficiency,
    attention's 6 x 32 layers x 4,096 x 4,096 (32 heads x 128) per token at 0.65; ZeRO-1
    reduce-scatters the gradients and all-gathers the weights once a step, 2 x 6.74e9 x 2 bytes
    x 7/8 at 300 x 370/450 GB/s (NCCL's bus efficiency), plus one all-reduce per 25 MiB bucket
    of gradients at NCCL's ring latency in one node (8.4 + 2 x 7 x 3.4 = 56 us), hidden but for
    20%. GPU-hours = 8 x
    steps x step / 3600 / goodput, the goodput 1 / (1 + 8 / 16,384 / 9): Llama 3's 10% of wall
    time lost to interruptions on 16,384 GPUs (1/0.9 = 1 + 1/9), scaled by the GPU count (the
    interruptions arrive per GPU-hour) = 150,050 (the card: 184,320)."""
    row = next(r for r in training_rows() if r["id"] == "llama2-7b-pretrain")
    n = CATALOG.models["llama-2-7b"].params_b * 1e9
    tokens = 4_194_304
    gemm = 6 * n * tokens / (8 * 312e12 * 0.51)
    attention = 6 * 32 * 4096 * 4096 * tokens / (8 * 312e12 * 0.65)
    buckets = math.ceil(2 * n / (25 * 2**20))
    comm = 2 * n * 2 * 7 / 8 / (300e9 * 370 / 450) + buckets * 56e-6
    steps = 2e12 / tokens
    goodput = 1 / (1 + 8 / 16_384 / 9)
    by_hand = 8 * steps * (gemm + attention + 0.2 * comm) / 3600 / goodput
    assert compare_training(row, CATALOG).predicted == pytest.approx(by_hand, rel=1e-6)


def test_fsdp_benchmark_rows_are_timed_as_they_ran() -> None:
    # llm-foundry's MPT-70B row on 64 H100 (published-3.yaml): FSDP FULL_SHARD, a 4,194,304-token
    # batch, activation checkpointing. Timed at ZeRO-3 over the 64 GPUs (no TP, no PP), that
    # batch, and every layer recomputed: by hand, the model FLOPs of a step are counted once
    # while the GPUs run the forward twice, so MFU is at most 6/8 of the efficiency.
    from benchmarks import calibration_training as ct

    row = {
        "id": "fsdp-row",
        "model": "MPT 70b config",
        "params_b": 70.0,
        "hardware": "H100 80GB",
        "gpu_count": 64,
        "gpu_hours": None,
        "stated_mfu": 0.4257,
        "seq_len": 2048,
        "global_batch_tokens": 4194304,
        "activation_checkpointing": True,
        "notes": "FSDP FULL_SHARD",
    }
    layout = ct._layout(row, ct.ZERO_STAGE_AT_SCALE)
    assert (layout.dp, layout.tp, layout.pp, layout.zero_stage) == (64, 1, 1, 3)
    assert ct._global_batch(row) == 4194304
    eff = CATALOG.workloads["large_scale_training"].efficiency
    mfu = compare_training(row, CATALOG).predicted
    assert mfu <= eff * 6 / 8 and mfu > 0.8 * eff * 6 / 8
    without = compare_training({**row, "activation_checkpointing": False}, CATALOG).predicted
    assert without > mfu * 1.2


def test_whole_runs_without_a_layout_are_planned_by_the_advisor() -> None:
    # published-3.yaml: LLaMA 65B, 380 tokens/s/GPU on 2,048 A100 80GB; MPT-7B, 1T tokens in 9.5
    # days on 440 A100 40GB. Neither states a layout: the advisor's own plan at that GPU count,
    # at the 2,048-token context their sources give, is held to x1.5 like the other rows.
    import yaml

    from benchmarks import calibration_rows
    from benchmarks import calibration_training as ct

    data = yaml.safe_load((calibration_rows.DATA_DIR / "published-3.yaml").read_text())
    by_id = {r["id"]: r for r in data["training"]}
    llama = compare_training(by_id["llama1-65b-pretrain"], CATALOG)
    mpt = compare_training(by_id["mpt-7b-pretrain"], CATALOG)
    assert (llama.metric, mpt.metric) == ("tokens_s_per_gpu", "wall_days")
    assert 1 / 1.5 <= llama.ratio <= 1.5 and 1 / 1.5 <= mpt.ratio <= 1.5
    assert ct._accelerator(by_id["mpt-7b-pretrain"]) == "a100-40gb-sxm"


@pytest.mark.parametrize("row_id", ["llama3-405b-mfu-16k-gpus", "nemo2504-llama3-8b-b200-fp8-8k"])
def test_a_row_at_its_layout_is_timed_with_what_the_plan_reads(row_id: str) -> None:
    """The harness times a published layout with the efficiency factor and the operator table
    the advisor's own plan reads for that GPU and precision (an H100 in BF16: its table's GEMMs
    and attention rows; a B200 in FP8: the FP8 factor x Blackwell's sourced factor, no table),
    so a row checks the figure a user is given."""
    from advisor.perf.op_model import table_for
    from advisor.perf.work import Work
    from advisor.planning.plans import plan_for
    from benchmarks import calibration_training as ct

    (row,) = [r for r in training_rows() if r["id"] == row_id]
    acc = CATALOG.accelerators[ct._accelerator(row)]
    profile = CATALOG.workloads["large_scale_training"]
    work = Work(
        workload="large_scale_training",
        model=ct.MODELS[row["model"]],
        gpu_count=int(row["gpu_count"]),
        tokens=1e12,
        seq_len=int(row["seq_len"]),
        precision=ct._precision(row),
    )
    plan = plan_for(CATALOG, work, profile)
    cluster, factor = ct._cluster(row, CATALOG)
    assert profile.efficiency * factor == pytest.approx(plan.training_efficiency(acc)[0])
    assert cluster.attention_table is table_for(acc.id)
    assert (cluster.attention_table is None) == (acc.id == "b200")
