"""The inference model: hand-checked figures and properties (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.catalog.loading import load_catalog
from advisor.errors import InputError
from advisor.perf.inference import (
    EFFICIENCY,
    Deployment,
    InferenceModel,
    expected_experts,
    moe_of,
    weight_bytes_touched,
)
from advisor.perf.sizing import Shape

CAT = load_catalog()


def _model(
    model: str = "llama-3.1-8b",
    acc: str = "h100-sxm",
    gpus: int = 1,
    tp: int = 1,
    precision: str = "bf16",
    inp: int = 512,
    out: int = 256,
    link: float | None = None,
) -> InferenceModel:
    preset, a = CAT.models[model], CAT.accelerators[acc]
    dep = Deployment(a, gpus, tp, precision, a.interconnect_gb_s if link is None else link)
    return InferenceModel(
        Shape.of(preset), dep, inp, out, moe_of(preset.experts, preset.experts_per_token)
    )


MODELS = st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "mistral-7b"])
ACCS = st.sampled_from(["h100-sxm", "h200-sxm", "a100-80gb-sxm", "l40s"])
TOKENS = st.integers(min_value=16, max_value=4096)


def _fits(m: InferenceModel) -> bool:
    return m.max_concurrency() >= 1


@settings(max_examples=60, deadline=None)
@given(MODELS, ACCS, st.sampled_from([1, 2, 4, 8]), TOKENS, TOKENS)
def test_throughput_under_both_rooflines(model: str, acc: str, tp: int, inp: int, out: int) -> None:
    m = _model(model, acc, tp, tp, "bf16" if acc == "a100-80gb-sxm" else "fp8", inp, out)
    if not _fits(m):
        return
    r = m.at()
    a = CAT.accelerators[acc]
    peak = a.peak_tflops.get(m.cp.precision) or 0
    # compute roofline: every output token costs at least 2 x active params FLOPs
    assert r.throughput_tokens_s * 2 * m.shape.active_params <= tp * peak * 1e12
    # bandwidth roofline: a step of B tokens reads at least the active weights once
    active_bytes = m.shape.active_params * m.bpw
    assert (
        r.throughput_tokens_s <= r.concurrency * tp * a.memory_bandwidth_gbps * 1e9 / active_bytes
    )


@settings(max_examples=40, deadline=None)
@given(MODELS, ACCS, TOKENS, TOKENS)
def test_itl_never_falls_as_concurrency_grows(model: str, acc: str, inp: int, out: int) -> None:
    m = _model(model, acc, 8, 8, "bf16" if acc == "a100-80gb-sxm" else "fp8", inp, out)
    fit = m.max_concurrency()
    itls = [m.at(b).itl_ms for b in range(1, min(fit, 300) + 1, 7)]
    assert itls == sorted(itls)


@settings(max_examples=40, deadline=None)
@given(MODELS, TOKENS, TOKENS)
def test_ttft_grows_with_the_prompt(model: str, a: int, b: int) -> None:
    short, long_ = sorted((a, b))
    if short == long_:
        return
    m = _model(model, "h200-sxm", 8, 8, "fp8", short, 64)
    assert m.prefill_s(short) < m.prefill_s(long_)


def test_tensor_parallel_over_nvlink_lowers_itl() -> None:
    itl = [_model("llama-3.1-70b", "h100-sxm", tp, tp, "fp8").at(1).itl_ms for tp in (2, 4, 8)]
    assert itl[0] > itl[1] > itl[2]


def test_pcie_all_reduce_costs_more_than_nvlink() -> None:
    nvlink = _model("llama-3.1-70b", "h100-sxm", 4, 4, "fp8").at(64).itl_ms
    pcie = _model("llama-3.1-70b", "h100-sxm", 4, 4, "fp8", link=0).at(64).itl_ms
    assert pcie > nvlink


def test_unsupported_precision_is_refused() -> None:
    with pytest.raises(InputError, match="no fp8"):
        _model("llama-3.1-8b", "a100-80gb-sxm", precision="fp8")


def test_tp_must_divide_gpus_and_fit_a_node() -> None:
    with pytest.raises(InputError, match="valid degrees are 1, 2, 4, 8"):
        _model("llama-3.1-8b", gpus=8, tp=3)
    with pytest.raises(InputError, match="fit one node"):
        _model("llama-3.1-8b", gpus=16, tp=16)


def test_moe_at_batch_1_reads_only_active_experts() -> None:
    preset = CAT.models["mixtral-8x7b"]
    shape = Shape.of(preset)
    # batch 1: exactly the active parameters (top-2 of 8 experts)
    assert weight_bytes_touched(shape, 1.0, 1, (8, 2)) == pytest.approx(shape.active_params)
    # a large batch touches every expert: all parameters
    assert weight_bytes_touched(shape, 1.0, 4096, (8, 2)) == pytest.approx(shape.params)
    # hand: 8 x (1 - (3/4)^2) = 8 x 7/16 = 3.5 distinct experts for 2 tokens
    assert expected_experts(8, 2, 2) == pytest.approx(3.5)


def test_decode_step_by_hand() -> None:
    """Llama-3.1-8B bf16 on one H100 SXM at batch 1, 512 in / 256 out: bandwidth-bound.
    weights 8.03e9 x 2 B; KV 2 x 32 layers x 8 heads x 128 x 2 B = 131,072 B/token x (512 + 128)
    tokens; over 3350 GB/s x 0.8; plus 32 layers x 60 us overhead."""
    m = _model(inp=512, out=256)
    eff_bw = EFFICIENCY[CAT.accelerators["h100-sxm"].generation][1]
    weights = CAT.models["llama-3.1-8b"].params_b * 1e9 * 2
    kv = 131_072 * (512 + 128)
    expected = (weights + kv) / (3350e9 * eff_bw) + 32 * 60e-6
    assert m.step_s(1) == pytest.approx(expected, rel=1e-9)


def test_memory_bounds_concurrency_by_hand() -> None:
    """Llama-3.1-70B fp8 on one H200 (141 GB): 0.9 x 141e9 / 1.1 (10% runtime overhead) - 70.6e9
    weights free, over the fp8 KV of 2 x 80 x 8 x 128 x 1 B = 163,840 B/token x 2000 tokens."""
    m = _model("llama-3.1-70b", "h200-sxm", precision="fp8", inp=1000, out=1000)
    params = CAT.models["llama-3.1-70b"].params_b * 1e9
    assert m.max_concurrency() == int((0.9 * 141e9 / 1.1 - params) // (163_840 * 2000))
