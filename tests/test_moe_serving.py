"""Expert-parallel serving of an MoE model (advisor/perf/moe_serving.py), held to hand
arithmetic and to published measurements it was not set from."""

from __future__ import annotations

import json

import pytest

from advisor.catalog.loading import load_catalog
from advisor.errors import InputError
from advisor.perf.moe_serving import EpLayout, EpModel, best_layout
from advisor.perf.sizing import Shape

CAT = load_catalog()
V3 = Shape.of(CAT.models["deepseek-v3"])
H100 = CAT.accelerators["h100-sxm"]


def _ep(gpus: int, tp: int = 1, imbalance: float = 1.2, packed: bool = True) -> EpModel:
    layout = EpLayout(gpus, 8, tp, 50.0, H100.interconnect_gb_s, imbalance)
    return EpModel(V3, H100, "fp8", layout, 2000, 100, packed_prefill=packed)


def test_all_to_all_by_hand_and_against_deepep() -> None:
    # 128 tokens per GPU, top-8, hidden 7,168, FP8 out + BF16 back: 128 x 8 x 7168 x 3 =
    # 22,020,096 bytes; EP 16 over 2 nodes of 8: 8/16 leave the node at 50 x 43/50 = 43 GB/s
    # (256.05 us), 7/16 stay on NVLink at 900 / 2 x 370/450 = 370 GB/s (26.04 us); the slower
    # plus 2 x 30 us: 316.05 us.
    got = _ep(16, imbalance=1.0).all_to_all_s(128)
    assert got == pytest.approx(316.05e-6, rel=1e-4)
    # DeepEP README, low-latency kernels on H800 + 400 Gb/s CX7, 128 tokens, EP 16: dispatch
    # 118 us + combine 195 us = 313 us measured.
    assert got == pytest.approx(313e-6, rel=0.15)


def test_an_nvlink_domain_keeps_the_all_to_all_on_nvlink_by_hand() -> None:
    # GB200 NVL72 trays of 4 GPUs, link 1,800 GB/s both ways: EP 16 over 4 trays of one rack
    # sends 15/16 of the 22,020,096 bytes (128 tokens, top-8, FP8 out + BF16 back) over NVLink
    # at 1800 / 2 x 370/450 = 740 GB/s (27.90 us) and none over the network: 27.90 + 2 x 30 us.
    # The same trays outside a rack send 12/16 over their 50 GB/s at 43 GB/s: 384.07 + 60 us.
    def a2a(gpus: int, domain: int) -> float:
        layout = EpLayout(gpus, 4, 1, 50.0, 1800.0, 1.0, domain_gpus=domain)
        return EpModel(V3, H100, "fp8", layout, 2000, 100).all_to_all_s(128)

    per_token = 128 * 8 * 7168 * 3
    assert a2a(16, 72) == pytest.approx(per_token * 15 / 16 / 740e9 + 60e-6, rel=1e-9)
    assert a2a(16, 0) == pytest.approx(per_token * 12 / 16 / 43e9 + 60e-6, rel=1e-9)
    # 144 GPUs over two racks of 72: half of the pairs leave the rack over the network
    assert a2a(144, 72) == pytest.approx(per_token * 72 / 144 / 43e9 + 60e-6, rel=1e-9)
    inside = EpLayout(16, 4, 1, 50.0, 1800.0, 1.0, domain_gpus=72)
    assert "EP 16 over 4 node(s) of 4 in one NVLink domain of 72 GPUs" in inside.describe()
    assert "NVLink domain" not in EpLayout(16, 4, 1, 50.0, 1800.0, 1.0).describe()


def test_wide_ep_decode_near_sglang_96_h100() -> None:
    # SGLang's DeepSeek deployment (lmsys.org blog 2025-05-05): decode on 9 nodes (72 H100s,
    # EP 72, DP attention), 22.3k output tokens/s per node at 2,000-token inputs = 2,788 per GPU.
    model = _ep(72, packed=False)
    best = model.best(None)
    assert best is not None
    assert model.tokens_per_gpu_s(best[0]) == pytest.approx(22_300 / 8, rel=0.25)


def test_dp_attention_holds_more_sequences_for_mla() -> None:
    # MLA at attention TP 8 keeps the latent on all 8 ranks (8 copies a sequence); DP attention
    # one: per GPU the DP layout holds several times the sequences, less what the replicated
    # dense weights take.
    dp = _ep(16).max_sequences_per_rank() * 16
    tp8 = _ep(16, tp=8).max_sequences_per_rank() * 2
    assert dp > 3 * tp8


@pytest.mark.parametrize("gpus", [16, 72])
def test_deepseek_v3_answered_with_ep(gpus: int) -> None:
    base = EpLayout(gpus, 8, 1, 50.0, H100.interconnect_gb_s)
    got = best_layout(V3, H100, "fp8", base, (2000, 100), max_itl_s=0.1)
    assert got is not None
    layout, per_rank, itl_s = got
    assert layout.gpus == gpus and per_rank >= 1 and itl_s <= 0.1


def test_imbalance_slows_the_busiest_gpu() -> None:
    assert _ep(16, imbalance=1.5).itl_s(64) > _ep(16, imbalance=1.0).itl_s(64)


def test_bad_layouts_name_the_field() -> None:
    with pytest.raises(InputError) as e:
        _ep(16, tp=3)
    assert e.value.field == "tensor_parallel"
    with pytest.raises(InputError) as e:
        EpModel(V3, H100, "fp8", EpLayout(512, 8), 100, 100)
    assert e.value.field == "gpus"
    with pytest.raises(InputError) as e:
        EpModel(Shape.of(CAT.models["llama-3.1-70b"]), H100, "fp8", EpLayout(8, 8), 100, 100)
    assert e.value.field == "model"


@pytest.mark.parametrize("gpus", ["16", "72"])
def test_estimate_answers_deepseek_v3_with_ep(gpus: str) -> None:
    # No TP degree inside one node of 8 H100s holds 671 GB of FP8 weights (8 x 72 GB usable =
    # 576 GB): the estimate serves one replica over the GPUs asked for with expert parallelism.
    from tests.test_planning_questions import run

    got = run("estimate", "-w", "high_throughput_inference", "-m", "deepseek-v3", "-a",
              "h100-sxm", "-g", gpus, "--precision", "fp8", "--json")  # fmt: skip
    assert got.returncode == 0, got.stderr
    out = json.loads(got.stdout)
    assert out["fits"] and out["hardware"]["gpus"] == int(gpus)
    layout = next(f for f in out["figures"] if f["name"] == "gpus_per_replica")
    assert f"EP {gpus} over {int(gpus) // 8} node(s) of 8" in layout["formula"]


def test_a_dense_model_gets_no_ep_answer() -> None:
    from tests.test_planning_questions import run

    got = run("estimate", "-w", "high_throughput_inference", "-m", "llama-3.1-405b", "-a",
              "h100-sxm", "-g", "16", "--precision", "bf16", "--json")  # fmt: skip
    assert got.returncode == 0, got.stderr  # 810 GB of BF16 weights: over two nodes
    assert "EP " not in got.stdout and "expert parallelism" not in got.stdout
