"""Sizing reproduces published figures; these are the issue's acceptance tests."""

from __future__ import annotations

import pytest

from advisor import Catalog
from advisor.errors import InputError
from advisor.perf.headroom import min_gpus_for
from advisor.perf.sizing import (
    Shape,
    inference_memory,
    kv_cache_bytes_per_token,
    training_flops,
    training_memory,
)


# ZeRO paper (Rajbhandari et al. 2019), section 5.1: 7.5B parameters on 64 GPUs.
@pytest.mark.parametrize(
    ("stage", "ranks", "gb"),
    [
        (0, 64, 120.0),  # no sharding: 16 bytes x 7.5B
        (1, 64, 31.4),  # optimizer states sharded
        (2, 64, 16.6),  # + gradients
        (3, 64, 1.9),  # + parameters
    ],
)
def test_zero_paper_example(stage: int, ranks: int, gb: float) -> None:
    (states, total) = training_memory(Shape.bare(7.5), zero_stage=stage, ranks=ranks)
    assert round(states.value, 1) == gb
    assert total.value == states.value


def test_llama2_7b_kv_cache_is_half_a_mib_per_token_in_fp16(shipped: Catalog) -> None:
    per_token = kv_cache_bytes_per_token(Shape.of(shipped.models["llama-2-7b"]), "fp16")
    assert per_token.value == 0.5 * 2**20


def test_gpt3_training_flops(shipped: Catalog) -> None:
    flops = training_flops(Shape.of(shipped.models["gpt-3-175b"]), 300e9)
    assert f"{flops.value:.2e}" == "3.14e+23"
    assert training_flops(
        Shape.of(shipped.models["gpt-3-175b"]), 300e9, recompute=True
    ).value == pytest.approx(flops.value * 8 / 6)


def test_inference_memory_llama2_70b_fp16(shipped: Catalog) -> None:
    figures = {
        f.name: f
        for f in inference_memory(
            Shape.of(shipped.models["llama-2-70b"]),
            precision="fp16",
            context_tokens=4096,
            batch=1,
        )
    }
    assert figures["weights_gb"].value == pytest.approx(138.0)
    # GQA: 2 x 80 layers x 8 KV heads x 128 x 2 bytes = 327,680 bytes per token
    assert figures["kv_cache_bytes_per_token"].value == 327_680
    assert figures["kv_cache_gb"].value == pytest.approx(327_680 * 4096 / 1e9)
    assert figures["memory_total_gb"].value == pytest.approx(138.0 + 327_680 * 4096 / 1e9)


@pytest.mark.parametrize(
    ("precision", "bytes_"), [("fp32", 4), ("bf16", 2), ("fp8", 1), ("int8", 1), ("int4", 0.5)]
)
def test_weight_precisions(precision: str, bytes_: float) -> None:
    weights = inference_memory(Shape.bare(10), precision=precision)[0]
    assert weights.value == pytest.approx(10 * bytes_)


def test_activations_with_and_without_recomputation(shipped: Catalog) -> None:
    shape = Shape.of(shipped.models["llama-2-7b"])
    full = training_memory(
        shape, zero_stage=3, ranks=8, seq_len=4096, micro_batch=1, recompute=False
    )
    lean = training_memory(
        shape, zero_stage=3, ranks=8, seq_len=4096, micro_batch=1, recompute=True
    )
    act_full = next(f.value for f in full if f.name == "activations_per_gpu_gb")
    act_lean = next(f.value for f in lean if f.name == "activations_per_gpu_gb")
    # Korthikanti et al. Table 2 with FlashAttention (no 5*a*s/h score term): per layer s*b*h x
    # (attention 11 + norms 4 + Llama 2's SwiGLU MLP of width 11,008: 3 + 6 x 11,008 / 4,096 =
    # 19.125) = 34.125, less the two 1-byte dropout masks (attention output, MLP) Llama 2 was
    # trained without (its config: no dropout) = 32.125, vs 2*s*b*h with full recomputation; the
    # fp32 logits 4*s*b*vocab either way
    assert not shape.dropout
    assert act_full == pytest.approx(32.125 * 4096 * 4096 * 32 / 1e9)
    assert act_lean == pytest.approx(2 * 4096 * 4096 * 32 / 1e9)
    for figures in (full, lean):
        logits = next(f.value for f in figures if f.name == "logits_per_gpu_gb")
        assert logits == pytest.approx(4 * 4096 * 32000 / 1e9)


def test_errors_are_input_errors() -> None:
    with pytest.raises(InputError, match="ZeRO stage 4"):
        training_memory(Shape.bare(1), zero_stage=4, ranks=1)
    with pytest.raises(InputError, match="needs the model's shape"):
        kv_cache_bytes_per_token(Shape.bare(7))
    with pytest.raises(InputError, match="unknown precision"):
        inference_memory(Shape.bare(7), precision="fp12")


def test_min_gpus_keeps_headroom() -> None:
    assert min_gpus_for(72, 80) == 1
    assert min_gpus_for(73, 80) == 2
    assert min_gpus_for(0.1, 80) == 1
