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
