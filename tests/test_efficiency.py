"""Training efficiency per vendor and generation (advisor/perf/efficiency.py): the same job on
MI300X and B200 against H100 lands in the published ranges."""

from __future__ import annotations

import pytest

from advisor import Catalog
from advisor.perf.efficiency import BLACKWELL, CDNA3, UNMEASURED, relative_efficiency
from advisor.planning.estimate import Estimate, estimate
from advisor.request import EstimateRequest


def _hours(shipped: Catalog, accelerator: str) -> Estimate:
    req = EstimateRequest(
        workload="fine_tuning",
        model="llama-3-8b",
        tokens=1e9,
        accelerator=accelerator,
        gpu_count=8,
    )
    return estimate(shipped, req)


def test_mi300x_and_b200_against_h100_within_published_ranges(shipped: Catalog) -> None:
    """An 8B full fine-tune on 8 GPUs, 1e9 tokens. Published per-GPU training speed vs H100:
    B200 2.0-2.2x (MLPerf Training v4.1, NVIDIA blog 2024-11-13: 2.0x GPT-3 175B, 2.2x Llama 2 70B
    LoRA); MI300X 0.7-1.0x (SemiAnalysis, 2024-12-22). Before the per-generation factor the model
    put MI300X at 1.32x (3.49 h vs 2.64 h) and B200 at 2.27x: the datasheet ratios."""
    h100 = _hours(shipped, "h100-sxm").hours
    mi300x = _hours(shipped, "mi300x").hours
    b200 = _hours(shipped, "b200").hours
    assert h100 and mi300x and b200
    assert 0.7 <= h100 / mi300x <= 1.0
    assert 2.0 <= h100 / b200 <= 2.2


def test_factor_turns_the_datasheet_ratio_into_the_measured_one(shipped: Catalog) -> None:
    """By hand: B200 dense BF16 2,250 / H100 989.4 = 2.274; the midpoint of 2.0-2.2x is 2.1,
    so the factor is 2.1 / 2.274 = 0.923; MI300X 1,307.4 / 989.4 = 1.321, 0.85 / 1.321 = 0.643."""
    assert BLACKWELL.factor == pytest.approx(0.923, abs=1e-3)
    assert CDNA3.factor == pytest.approx(0.643, abs=1e-3)
    assert CDNA3.low == pytest.approx(0.7 / 1.3214, abs=1e-3)
    assert relative_efficiency(shipped.accelerators["b200"]).factor == BLACKWELL.factor
    assert relative_efficiency(shipped.accelerators["mi325x"], "fp8") is CDNA3
    assert relative_efficiency(shipped.accelerators["tpu-v5p"]) is UNMEASURED


def test_a_measured_table_sets_its_gpus_factor(
    shipped: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The H100 with its table: the grid's 8,192-cube bf16 row (a short sample, as the 0.73
    reference is) over the dense peak, over 0.73, by hand from the shipped file; the roofline's
    H100 is the calibrated value itself."""
    import json
    from pathlib import Path

    h100 = shipped.accelerators["h100-sxm"]
    path = Path(__file__).resolve().parent.parent / "catalog" / "ops"
    table = json.loads((path / "h100-sxm--torch2.11.0-cu130-driver580.json").read_text())
    (row,) = [
        g
        for g in table["gemm"]
        if (g["precision"], g["m"], g["n"], g["k"], g["groups"]) == ("bf16", 8192, 8192, 8192, 1)
    ]
    share = 2 * 8192**3 / (row["median_us"] * 1e-6) / (989.5e12)  # the catalog's dense bf16 peak
    assert relative_efficiency(h100).factor == pytest.approx(share / 0.73, abs=1e-3)
    monkeypatch.setenv("ADVISOR_OPERATOR_TABLES", "off")
    assert relative_efficiency(h100).factor == 1.0


def test_estimate_names_the_source(shipped: Catalog) -> None:
    assert "SemiAnalysis" in _hours(shipped, "mi300x").efficiency_source
    assert "MLPerf Training v4.1" in _hours(shipped, "b200").efficiency_source


def test_serving_reads_the_same_factor_for_the_same_gemms(shipped: Catalog) -> None:
    """A prefill is GEMM-bound: the same model, prompt and GPU count on B200 and on MI300X
    against H100 moves by the datasheet ratio times the generation's training factor (B200
    2,250 / 989.4 x 0.923; MI300X 1,307.4 / 989.4 x 0.643), the factor's source in the words."""
    from advisor.perf.inference import Deployment, InferenceModel, compute_efficiency
    from advisor.perf.sizing import Shape

    def gemm_rate(acc_id: str) -> float:
        acc = shipped.accelerators[acc_id]
        return acc.peak_tflops.bf16 * compute_efficiency(acc, "bf16")

    h100 = gemm_rate("h100-sxm")
    assert gemm_rate("b200") / h100 == pytest.approx(2250 / 989.4 * 0.923, rel=0.01)
    assert gemm_rate("mi300x") / h100 == pytest.approx(1307.4 / 989.4 * 0.643, rel=0.01)
    preset, acc = shipped.models["llama-3.1-8b"], shipped.accelerators["mi300x"]
    model = InferenceModel(Shape.of(preset), Deployment(acc, 1, 1, "bf16", 0.0), 2048, 128)
    assert CDNA3.source in model.speed_source
    assert BLACKWELL.factor == pytest.approx(0.923) and CDNA3.factor == pytest.approx(0.643)


def test_a_precision_with_its_own_factor_names_its_own_source(shipped: Catalog) -> None:
    """FP4 on Blackwell keeps its own 0.40 (set from TensorRT-LLM rows): its words must not
    claim Hopper's factor, which BF16 on the same GPU reads."""
    from advisor.perf.inference import Deployment, InferenceModel
    from advisor.perf.sizing import Shape

    preset, acc = shipped.models["llama-3.1-8b"], shipped.accelerators["b200"]

    def source(precision: str) -> str:
        deployment = Deployment(acc, 1, 1, precision, 0.0)
        return InferenceModel(Shape.of(preset), deployment, 2048, 128).speed_source

    assert "0.4 of fp4 compute" in source("fp4") and BLACKWELL.source not in source("fp4")
    assert "TensorRT-LLM perf-overview rows" in source("fp4")
    assert BLACKWELL.source in source("bf16")


def test_fp8_training_reads_the_tables_16_bit_gemms(shipped: Catalog) -> None:
    """FP8's own factor (0.78) is relative to a 16-bit step: the H100's table then sets the GPU's
    speed by its bf16 GEMMs, not its fp8 ones (which would count the slower FP8 kernels twice):
    0.51 x 0.78 x the bf16 factor."""
    h100 = shipped.accelerators["h100-sxm"]
    bf16, fp8 = relative_efficiency(h100, "bf16"), relative_efficiency(h100, "fp8")
    assert fp8.factor < bf16.factor  # the table's fp8 GEMMs reach less of their peak
    got = estimate(
        shipped,
        EstimateRequest(
            workload="fine_tuning",
            model="llama-3-8b",
            tokens=1e9,
            accelerator="h100-sxm",
            gpu_count=8,
            precision="fp8",
        ),
    )
    assert got.efficiency == pytest.approx(0.51 * 0.78 * bf16.factor)
