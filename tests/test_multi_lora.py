"""Multi-LoRA serving's added time per pass (advisor/perf/multi_lora.py)."""

from __future__ import annotations

import pytest

from advisor.catalog.loading import load_catalog
from advisor.errors import InputError
from advisor.perf.multi_lora import distinct_adapters, lora_pass_s, lora_width
from advisor.perf.sizing import Shape

LLAMA_8B = Shape.of(load_catalog().models["llama-3.1-8b"])


def test_width_of_llama_8b_by_hand() -> None:
    # hidden 4096, 32 heads x 128 = 4096, 8 KV heads x 128 = 1024, MLP 14336 gated:
    # q 8192 + k 5120 + v 5120 + o 8192 + 3 x (4096 + 14336) = 26624 + 55296 = 81920.
    assert lora_width(LLAMA_8B) == 81920


def test_distinct_adapters_by_hand() -> None:
    # 2 adapters, 2 sequences: both the same with chance 1/2: 2 x (1 - 1/4) = 1.5.
    assert distinct_adapters(2, 2) == pytest.approx(1.5)
    assert distinct_adapters(1000, 1) == pytest.approx(1.0)


def test_a_pass_by_hand() -> None:
    # rank 16, 32 layers, 2 bytes: one adapter is 16 x 81920 x 32 x 2 = 83,886,080 bytes; 8
    # sequences of 100 adapters read 100 (1 - 0.99^8) = 7.7255 of them: 648.06 MB at 2.68 TB/s
    # = 241.8 us; FLOPs 2 x 16 x 81920 x 32 x 8 tokens = 671 MFLOP, negligible.
    got = lora_pass_s(LLAMA_8B, 16, 100, (8, 8.0), 2, (2.68e12, 495e12))
    assert got == pytest.approx(100 * (1 - 0.99**8) * 83_886_080 / 2.68e12, rel=1e-9)


def test_bad_rank_names_the_field() -> None:
    with pytest.raises(InputError) as e:
        lora_pass_s(LLAMA_8B, 0, 10, (1, 1.0), 2, (1e12, 1e14))
    assert e.value.field == "lora_rank"


def test_adapters_are_a_request_field_the_model_adds_to_each_pass() -> None:
    """--lora-adapters 100 on Llama 3.1 8B (rank 16): each pass adds the distinct adapters'
    reads and FLOPs (lora_pass_s) on top of the base iteration, so ITL and TTFT grow and the
    throughput at the same concurrency falls; a higher rank costs more."""
    import json

    from tests.test_planning_questions import run

    base = ["estimate", "-w", "high_throughput_inference", "-m", "llama-3.1-8b", "-i",
            "p5en.48xlarge", "--concurrency", "64", "--json"]  # fmt: skip
    plain = json.loads(run(*base).stdout)
    lora = json.loads(run(*base, "--lora-adapters", "100").stdout)
    wider = json.loads(run(*base, "--lora-adapters", "100", "--lora-rank", "64").stdout)
    assert plain["itl_ms"] < lora["itl_ms"] < wider["itl_ms"]
    assert plain["ttft_ms"] < lora["ttft_ms"]
    assert lora["tokens_per_s"] < plain["tokens_per_s"]


def test_the_itl_adds_the_adapters_pass_by_hand() -> None:
    """The model's ITL with adapters is its base iteration plus lora_pass_s over the pass's
    sequences (64 decode + 64 x 1000 / 200 / 1000 prompts) and tokens at the replica's rates."""
    from advisor.perf.inference import Deployment, InferenceModel

    cat = load_catalog()
    preset, acc = cat.models["llama-3.1-8b"], cat.accelerators["h100-sxm"]
    shape = Shape.of(preset)
    plain = InferenceModel(shape, Deployment(acc, 1, 1, "bf16", 0.0), 1000, 200)
    lora = InferenceModel(shape, Deployment(acc, 1, 1, "bf16", 0.0, lora=(100, 16)), 1000, 200)
    b = 64
    prompt = b * 1000 / 200
    added = lora_pass_s(
        shape,
        16,
        100,
        (round(b + prompt / 1000), b + prompt),
        2,
        (plain.bw_bytes_s, plain.peak_flops),
    )
    assert lora.itl_s(b) == pytest.approx(plain.itl_s(b) + added)
