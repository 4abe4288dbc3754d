"""Aggregated against disaggregated serving of an MoE model (advisor/perf/disaggregated.py)."""

from __future__ import annotations

import pytest

from advisor.catalog.loading import load_catalog
from advisor.perf.disaggregated import compare, kv_transfer_requests_s
from advisor.perf.moe_serving import EpLayout
from advisor.perf.sizing import Shape

CAT = load_catalog()
V3 = Shape.of(CAT.models["deepseek-v3"])
H100 = CAT.accelerators["h100-sxm"]


def _base(gpus: int) -> EpLayout:
    return EpLayout(gpus, 8, 1, 50.0, H100.interconnect_gb_s)


def test_kv_transfer_by_hand() -> None:
    # MLA in FP8: (512 latent + 64 RoPE key) x 61 layers x 1 byte = 35,136 bytes a token; a
    # 2,000-token prompt 70.272 MB; 8 GPUs x 50 GB/s x 43/50 = 344 GB/s: 4,895.3 prompts/s.
    got = kv_transfer_requests_s(V3, "fp8", _base(8), 2000)
    assert got == pytest.approx(344e9 / 70.272e6, rel=1e-6)


def test_two_nodes_cannot_split_deepseek_v3() -> None:
    # 671B parameters in FP8 are 671 GB: more than one node of 8 x 80 GB H100s holds, so a
    # prefill or decode pool of one node cannot exist; 16 H100s serve it aggregated only.
    got = compare(V3, H100, "fp8", _base(16), (2000, 100), 0.05)
    assert got.disaggregated is None and got.aggregated is not None
    assert got.winner is got.aggregated
    assert "holds the weights" in got.why()


def test_long_prompts_favour_disaggregation_on_nine_nodes() -> None:
    # 2,000 in / 100 out packs 20 prompt tokens into every aggregated decode step (DeepSeek and
    # SGLang serve V3 disaggregated at these lengths); 200 in / 2,000 out packs 0.1 and a split
    # of whole nodes leaves decode capacity on the prefill side.
    long_in = compare(V3, H100, "fp8", _base(72), (2000, 100), 0.05)
    assert long_in.winner is long_in.disaggregated
    assert "carry no prompt tokens" in long_in.why()
    long_out = compare(V3, H100, "fp8", _base(72), (200, 2000), 0.05)
    assert long_out.winner is long_out.aggregated
