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
    # both pools inside one NVL72 rack: 8 GPUs x 1,800 / 2 GB/s x 43/50 = 6,192 GB/s
    rack = EpLayout(8, 4, 1, 100.0, 1800.0, domain_gpus=72)
    inside = kv_transfer_requests_s(V3, "fp8", rack, 2000, over_nvlink=True)
    assert inside == pytest.approx(6192e9 / 70.272e6, rel=1e-6)


def test_pools_inside_an_nvlink_rack_move_the_kv_over_it() -> None:
    """18 trays of 4 GB300 in one rack, or the same trays apart: a prefill pool of n trays
    carries 8,000-token prompts' KV (35,136 bytes a token in FP8: 281.088 MB) at 4n GPUs x
    1,800 / 2 GB/s x 43/50 inside the rack, at 4n x 100 GB/s x 43/50 over the network."""
    gb300 = CAT.accelerators["gb300"]
    prompt = 35_136 * 8000
    for domain, per_gpu in ((72, 900e9), (0, 100e9)):
        base = EpLayout(72, 4, 1, 100.0, 1800.0, domain_gpus=domain)
        got = compare(V3, gb300, "fp8", base, (8000, 100), 0.1).disaggregated
        assert got is not None
        trays = int(got.detail.split(" prefill node(s)")[0])
        bound = float(got.detail.split("KV transfer ")[1].split(" req/s")[0])
        expected = 4 * trays * per_gpu * 43 / 50 / prompt
        assert bound == pytest.approx(expected, abs=0.051), (domain, got.detail)


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
