"""A training layer's GEMMs at their shapes (advisor/perf/train_gemms.py) and the step time that
reads them (advisor/perf/training.py): shapes and factors worked out by hand against a table
whose GEMM times follow a stated rule."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

import pytest

from advisor import Catalog
from advisor.perf.efficiency import shape_table
from advisor.perf.op_model import table_for
from advisor.perf.op_table import OperatorTable
from advisor.perf.sizing import Shape
from advisor.perf.train_gemms import layer_gemms, shape_factor, training_passes
from advisor.perf.training import (
    EXPERT_LOAD_IMBALANCE,
    Cluster,
    Job,
    Layout,
    _gemm_s,
    dense_shape_factor,
    expert_gemm_factor,
)
from probes.ops_table import GemmRow, OpsTable, Stack

RATE = 700e12  # FLOP/s of the rule's cube (M = K = 8,192)
SIDES = (1024, 2048, 4096, 8192, 16384, 32768, 65536)  # every shape below lies inside


def rule_us(m: float, n: float, k: float) -> float:
    """The table's GEMMs: the cube's rate, slower as M and K shrink (faster as they grow), by
    power laws, which the table's log-linear reading reproduces exactly inside its grid."""
    return float(2 * m * n * k / RATE * (8192 / m) ** 0.1 * (8192 / k) ** 0.05 * 1e6)


def gemm_table(precision: str = "bf16") -> OperatorTable:
    rows = [
        GemmRow(precision=precision, m=m, n=n, k=k, median_us=rule_us(m, n, k), iqr_us=0.0, cv=0.0)
        for m in SIDES
        for n in SIDES
        for k in SIDES
    ]
    return OperatorTable.of(
        OpsTable(
            accelerator="h100-sxm",
            mode="full",
            measured_at=dt.datetime(2026, 12, 5, tzinfo=dt.UTC),
            duration_s=1.0,
            stack=Stack(device_name="NVIDIA H100", torch="2.11.0", python="3.12", machine="t"),
            gemm=rows,
        )
    )


# A Llama-style layer: hidden 8,192, 64 query heads and 8 key-value heads of 128, SwiGLU MLP of
# 28,672 (Llama 3 70B's widths).
DENSE = Shape(
    "dense", 70e9, 70e9, layers=80, hidden=8192, heads=64, kv_heads=8, head_dim=128,
    vocab=128256, intermediate=28672,
)  # fmt: skip


def test_a_layers_gemms_are_its_projections_narrowed_by_tp() -> None:
    """TP 4 on 4,096 tokens: QKV (64 + 2 x 8) x 128 / 4 = 2,560 wide over the hidden 8,192; the
    output projection 8,192 wide over 64 x 128 / 4 = 2,048; gate and up 2 x 28,672 / 4 = 14,336
    over 8,192; down 8,192 over 7,168. A mixture of experts keeps its attention projections only
    (its experts are grouped GEMMs, timed apart)."""
    assert layer_gemms(DENSE, 4, 4096) == (
        (4096, 2560, 8192),
        (4096, 8192, 2048),
        (4096, 14336, 8192),
        (4096, 8192, 7168),
    )
    moe = dataclasses.replace(DENSE, experts=64, experts_per_token=4)
    assert layer_gemms(moe, 4, 4096) == ((4096, 2560, 8192), (4096, 8192, 2048))
    assert layer_gemms(Shape.bare(70), 4, 4096) is None  # no layer shape known
    mla = dataclasses.replace(DENSE, mla_kv_dim=576)
    assert layer_gemms(mla, 4, 4096) is None


def test_each_forward_has_an_input_and_a_weight_gradient() -> None:
    """Y[M, N] = X[M, K] W[N, K]^T: dX = dY W is (M, K, N), reducing over N; dW = dY^T X is
    (N, K, M), reducing over the tokens. Frozen weights (LoRA) have no dW."""
    assert training_passes(((10, 20, 30),), True) == ((10, 20, 30), (10, 30, 20), (20, 30, 10))
    assert training_passes(((10, 20, 30),), False) == ((10, 20, 30), (10, 30, 20))


def _by_hand(tp: int, tokens: int, weight_grads: bool = True) -> float:
    """The factor worked out from the rule: each pass's FLOPs slowed by (8,192 / M)^0.1 x
    (8,192 / K)^0.05, over the same FLOPs at the cube's rate."""
    h, q, kv, f = 8192, 64 * 128 // tp, 2 * 8 * 128 // tp, 28672 // tp
    forward = [(tokens, q + kv, h), (tokens, h, q), (tokens, 2 * f, h), (tokens, h, f)]
    passes = []
    for m, n, k in forward:
        passes += [(m, n, k), (m, k, n)] + ([(n, k, m)] if weight_grads else [])
    slow = sum(2 * m * n * k * (8192 / m) ** 0.1 * (8192 / k) ** 0.05 for m, n, k in passes)
    return float(slow / sum(2 * m * n * k for m, n, k in passes))


@pytest.mark.parametrize(
    ("tp", "tokens", "weight_grads"), [(1, 8192, True), (4, 4096, True), (8, 2048, False)]
)
def test_the_factor_is_the_shapes_time_over_the_cubes_rate(
    tp: int, tokens: int, weight_grads: bool
) -> None:
    table = gemm_table()
    got = shape_factor(table, "bf16", DENSE, tp, tokens, weight_grads)
    assert got == pytest.approx(_by_hand(tp, tokens, weight_grads), rel=1e-9)
    assert (got > 1.0) == (tokens < 8192)  # fewer tokens than the cube's M: slower


def test_no_gemms_in_the_precision_or_no_shape_is_a_factor_of_one() -> None:
    table = gemm_table("bf16")
    assert shape_factor(table, "fp8", DENSE, 8, 4096) == 1.0
    assert shape_factor(table, "bf16", Shape.bare(70), 8, 4096) == 1.0


def test_a_step_reads_the_rank_s_tokens_under_context_parallelism() -> None:
    """Sequence 8,192, micro-batch 2, CP 4: each rank's GEMMs see 4,096 tokens. The step's GEMM
    time is the plain rule's (FLOPs at the peak and efficiency) times the factor at that shape;
    without a table, the plain rule; LoRA's frozen weights drop the weight gradients."""
    table = gemm_table()
    plain = Cluster(989.5, 8, 900, 3200)
    timed = dataclasses.replace(plain, gemm_table=table)
    layout = Layout(dp=2, tp=4, cp=4, zero_stage=1)
    job = Job(DENSE, 1e12, 8192, 2, False, 0.5, global_batch_tokens=2**20)
    factor = _by_hand(4, 4096)
    assert dense_shape_factor(job, timed, layout) == pytest.approx(factor, rel=1e-9)
    assert dense_shape_factor(job, plain, layout) == 1.0
    tokens = 2**20
    assert _gemm_s(job, timed, tokens, layout) == pytest.approx(
        _gemm_s(job, plain, tokens, layout) * factor, rel=1e-9
    )
    lora = dataclasses.replace(job, method="lora")
    assert dense_shape_factor(lora, timed, layout) == pytest.approx(
        _by_hand(4, 4096, weight_grads=False), rel=1e-9
    )


def test_a_mixture_of_experts_runs_its_dense_share_at_the_shape_factor() -> None:
    """Experts' share s of the active parameters at the grouped GEMM's slowdown x the load
    imbalance, the rest at the dense factor d: (1 - s) d + s x 1.1 / share. Here 64 experts of
    1,000 parameters, 8 a token, 100 dense: s = 64,000 x 8 / 64 / (100 + 8,000) = 0.988; at 50
    tokens an expert against a ridge of 200, the grouped rate is 0.25 of the dense."""
    shape = Shape("moe", 64_100, 8_100, experts=64, experts_per_token=8)
    assert shape.expert_params == 64_000  # the experts' parameters as sizing counts them
    s = 64_000 * 8 / 64 / 8_100
    expected = (1 - s) * 1.2 + s * EXPERT_LOAD_IMBALANCE / 0.25
    assert expert_gemm_factor(shape, 50, 200, 1.2) == pytest.approx(expected, rel=1e-12)
    assert expert_gemm_factor(DENSE, 50, 200, 1.2) == 1.2  # a dense model: the factor alone
    assert math.isclose(expert_gemm_factor(DENSE, 50, 200), 1.0)


def test_a_gpu_without_a_table_reads_the_shapes_its_factor_was_measured_against(
    shipped: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The H100 and H200 read their own tables; B200 and MI300X, whose factors are whole jobs'
    speeds against the H100's, the H100's; the A100 (the calibrated value itself) and a TPU
    (no comparison) none; with the tables off, nothing."""
    monkeypatch.setenv("ADVISOR_OPERATOR_TABLES", "on")
    acc = shipped.accelerators
    h100 = table_for("h100-sxm")
    assert h100 is not None
    assert shape_table(acc["h100-sxm"]) is h100
    assert shape_table(acc["h200-sxm"]) is table_for("h200-sxm") is not h100
    assert shape_table(acc["b200"]) is h100 and shape_table(acc["mi300x"]) is h100
    assert shape_table(acc["a100-80gb-sxm"]) is None
    assert shape_table(acc["tpu-v5p"]) is None
    monkeypatch.setenv("ADVISOR_OPERATOR_TABLES", "off")
    assert shape_table(acc["b200"]) is None
