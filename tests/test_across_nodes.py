"""Serving replicas that span nodes where no node holds the model (advisor/planning/across_nodes.py),
in the estimate and in recommend."""

from __future__ import annotations

import math
from typing import Any

import pytest

from advisor import Catalog, recommend
from advisor.perf.sizing import Shape
from advisor.perf.targets import Targets
from advisor.perf.work import Work
from advisor.planning.across_nodes import ep_replica, pp_replica, serve_across_nodes, tp_replica
from advisor.planning.estimate import estimate
from advisor.request import EstimateRequest, RecommendRequest

P5 = (8, 900.0, 3200.0)  # p5.48xlarge: 8 H100 on NVLink, 3,200 Gbit/s EFA


def _v3(shipped: Catalog) -> Shape:
    return Shape.of(shipped.models["deepseek-v3"])


def _work(**kw: object) -> Work:
    return Work(**{"workload": "high_throughput_inference", "model": "deepseek-v3", **kw})  # type: ignore[arg-type]


def test_the_fewest_nodes_that_hold_the_experts_by_hand(shipped: Catalog) -> None:
    """DeepSeek-V3 in BF16 on nodes of 8 H100 (72 GB usable each): 634e9 routed-expert
    parameters over (1 - 8/256) = 654.45e9, 256 experts of 2.5565e9 (5.11 GB); the dense rest
    16.55e9 (33.1 GB). EP 16 holds 16 experts a GPU, 81.8 GB: no. EP 24 holds 11, 56.2 GB, plus
    33.1 GB / 4 with attention TP 4: 64.5 GB: yes. No target: the fewest GPUs, 3 nodes."""
    h100 = shipped.accelerators["h100-sxm"]
    fit = serve_across_nodes(_v3(shipped), h100, _work(precision="bf16"), Targets(), P5)
    assert fit is not None and fit.spans_nodes
    assert fit.serving_layout is not None and fit.serving_layout.startswith("EP 24 over 3 node")
    assert fit.gpus_needed == 24 and fit.nodes == 3 and fit.rented_gpus == 24
    assert fit.memory_per_gpu_gb <= 72.0


def test_fp8_holds_on_two_nodes(shipped: Catalog) -> None:
    """671 GB of FP8 weights: above one node's 8 x 72 = 576 GB, within two nodes'."""
    h100 = shipped.accelerators["h100-sxm"]
    fit = serve_across_nodes(_v3(shipped), h100, _work(precision="fp8"), Targets(), P5)
    assert fit is not None and fit.gpus_needed == 16 and fit.nodes == 2


def test_without_a_network_or_with_a_tp_degree_asked_none(shipped: Catalog) -> None:
    h100 = shipped.accelerators["h100-sxm"]
    shape = _v3(shipped)
    assert serve_across_nodes(shape, h100, _work(precision="fp8"), Targets(), (8, 900.0, 0)) is None
    asked = _work(precision="fp8", tensor_parallel=8)
    assert serve_across_nodes(shape, h100, asked, Targets(), P5) is None


def test_the_busiest_rank_carries_a_whole_prompt(shipped: Catalog) -> None:
    """Attention ranks step together (the all-to-all holds them) and a prompt is not split
    across ranks: a step with one 2,000-token prompt costs what a step with one on every rank
    costs (the busiest rank's), more than its tokens spread over the ranks would."""
    h100 = shipped.accelerators["h100-sxm"]
    r = ep_replica(_v3(shipped), h100, _work(precision="fp8"), (2, *P5), None)
    assert r is not None
    ranks = r.gpus // r.tensor_parallel
    one_prompt = r.step(ranks, float(r.inp))
    assert one_prompt == pytest.approx(r.step(ranks, float(r.inp * ranks)), rel=0.05)
    assert one_prompt > r.step(ranks, r.inp / ranks)


def test_a_rate_is_served_within_the_targets_at_p99(shipped: Catalog) -> None:
    """20 requests/s of 1,000 output tokens: replicas enough that the simulated p99 TTFT and
    mean token gap meet 450 ms and 40 ms; p99 at or above p50; the tokens served are the
    rate's (20 x 1,000)."""
    h100 = shipped.accelerators["h100-sxm"]
    work = _work(precision="fp8", request_rate=20.0, workload="low_latency_inference")
    fit = serve_across_nodes(_v3(shipped), h100, work, Targets(450, 40, 99), P5)
    assert fit is not None and fit.latency_met
    assert fit.ttft_ms is not None and fit.ttft_ms <= 450
    assert fit.itl_ms is not None and fit.itl_ms <= 40
    assert fit.tokens_per_s == pytest.approx(20_000)
    figures = {f.name: f for f in fit.figures}
    assert figures["ttft_p99_s"].value * 1e3 == pytest.approx(fit.ttft_ms)
    assert "p50" in figures["ttft_p99_s"].formula
    assert fit.replicas is not None and fit.replicas >= 2


def test_estimate_states_the_layout_and_the_disaggregated_comparison(shipped: Catalog) -> None:
    e = estimate(
        shipped,
        EstimateRequest(
            workload="high_throughput_inference",
            model="deepseek-v3",
            instance_type="p5.48xlarge",
            gpu_count=72,
            precision="fp8",
        ),
    )
    assert e.fits and e.hardware.nodes == 9
    assert any(
        n.startswith("no node holds the model: one replica spans nodes, EP") for n in e.notes
    )
    assert any(n.startswith("disaggregated prefill/decode on these") for n in e.notes)


def test_recommend_serves_deepseek_v3_on_h100_nodes_with_ep(shipped: Catalog) -> None:
    result = recommend(
        shipped,
        RecommendRequest(
            workload="low_latency_inference",
            model="deepseek-v3",
            precision="fp8",
            gpu_count=16,
            limit=50,
        ),
    )
    p5 = next(r for r in result.recommendations if r.instance_type == "p5.48xlarge")
    assert p5.nodes == 2 and p5.gpu_count == 16
    assert p5.sizing is not None and p5.sizing.layout is not None
    assert p5.sizing.layout.startswith("EP 16 over 2 node(s) of 8")
    assert any(r.startswith("one replica spans nodes over") for r in p5.reasons)


def test_memory_alone_still_stays_in_one_node(shipped: Catalog) -> None:
    """Without a model there is no layout to split a replica by: a serving request for more
    memory than a node holds is rejected as before."""
    result = recommend(
        shipped,
        RecommendRequest(workload="low_latency_inference", memory_gb=2000, show_rejected=True),
    )
    p5 = next(r for r in result.rejected if r.id.startswith("p5.48xlarge"))
    assert "MEMORY_INSUFFICIENT" in p5.codes
    assert math.isfinite(len(result.recommendations))


def test_a_model_one_gpu_holds_never_spans_nodes(shipped: Catalog) -> None:
    """Llama 3.1 8B fits one A10G (16 GB of 21.6 usable): a rate one node cannot carry is not
    a reason to lay one replica over 16 single-GPU nodes on 10 Gbit/s."""
    e = estimate(
        shipped,
        EstimateRequest(
            workload="low_latency_inference",
            model="llama-3.1-8b",
            instance_type="g5.xlarge",
            request_rate=50,
        ),
    )
    assert not any("spans nodes" in n for n in e.notes)
    assert e.hardware.nodes != 48


def test_a_slow_network_holds_no_replica(shipped: Catalog) -> None:
    """Llama 2 70B in fp16 (138 GB) on single-L4 VMs: no replica over eight of them on
    general-purpose Ethernet (below 100 Gbit/s); on p5's 3,200 Gbit/s two nodes serve 405B."""
    from advisor.planning.across_nodes import MIN_NETWORK_GBPS

    l4 = shipped.accelerators["l4"]
    shape = Shape.of(shipped.models["llama-2-70b"])
    work = Work(workload="high_throughput_inference", model="llama-2-70b", precision="fp16")
    assert serve_across_nodes(shape, l4, work, Targets(), (1, 0.0, MIN_NETWORK_GBPS - 1)) is None
    h100 = shipped.accelerators["h100-sxm"]
    big = Work(workload="high_throughput_inference", model="llama-3.1-405b")
    fit = serve_across_nodes(Shape.of(shipped.models["llama-3.1-405b"]), h100, big, Targets(), P5)
    assert fit is not None and fit.nodes == 2


def test_the_kv_cache_format_asked_holds_over_several_nodes(shipped: Catalog) -> None:
    """--kv-precision reaches a replica over nodes as on one: DeepSeek-V3's MLA caches 512 + 64
    values a layer and token, 61 layers, so a token of context holds 35,136 bytes in FP8 and
    70,272 in BF16 on every attention rank. FP8 weights with a BF16 cache: each sequence's KV
    per GPU doubles, and fewer sequences fit; the dense 405B over PP stages likewise."""
    h100 = shipped.accelerators["h100-sxm"]
    shape = _v3(shipped)
    fp8 = ep_replica(shape, h100, _work(precision="fp8"), (2, *P5), None)
    bf16 = ep_replica(shape, h100, _work(precision="fp8", kv_precision="bf16"), (2, *P5), None)
    assert fp8 is not None and bf16 is not None and fp8.layout == bf16.layout
    ranks = fp8.gpus // fp8.tensor_parallel
    tokens = fp8.inp + fp8.out
    per_sequence_gb = (fp8.memory_gb(ranks) - fp8.memory_gb(0)) / tokens
    assert per_sequence_gb == pytest.approx(35_136 / 1e9)  # the latent whole on every rank
    assert bf16.memory_gb(ranks) - bf16.memory_gb(0) == pytest.approx(
        2 * (fp8.memory_gb(ranks) - fp8.memory_gb(0))
    )
    assert bf16.max_sequences < fp8.max_sequences

    l405 = Shape.of(shipped.models["llama-3.1-405b"])
    work = {"model": "llama-3.1-405b", "precision": "bf16"}
    full = pp_replica(l405, h100, _work(**work), (2, *P5))
    half = pp_replica(l405, h100, _work(**work, kv_precision="fp8"), (2, *P5))
    assert full is not None and half is not None
    assert half.memory_gb(64) - half.memory_gb(0) == pytest.approx(
        (full.memory_gb(64) - full.memory_gb(0)) / 2
    )


def test_prefix_cache_hits_are_not_computed_again_over_several_nodes(shipped: Catalog) -> None:
    """Half the prompt tokens in the prefix cache: an expert-parallel pass over an I-token prompt
    costs what a pass over I / 2 computed tokens costs without one, a decode step is unchanged,
    and a pipeline sends only the computed prompt tokens between stages (I / O x 0.5 of them a
    decode token)."""
    from advisor.perf.moe_serving import EpLayout, EpModel, KvCache, best_layout
    from advisor.perf.pipeline_serving import PipelineServing

    h100 = shipped.accelerators["h100-sxm"]
    shape = _v3(shipped)
    io = (2000, 500)
    base = EpLayout(16, 8, 1, 3200 / 8 / 8, 900.0)
    got = best_layout(shape, h100, "fp8", base, io)
    assert got is not None
    layout = got[0]
    half = EpModel(shape, h100, "fp8", layout, *io, cache=KvCache(None, 0.5))
    whole = EpModel(shape, h100, "fp8", layout, *io)
    assert half.forward(0, 2000).seconds == pytest.approx(whole.forward(0, 1000).seconds)
    assert half.forward(8, 0).seconds == pytest.approx(whole.forward(8, 0).seconds)

    r0 = ep_replica(shape, h100, _work(precision="fp8"), (2, *P5), None)
    r5 = ep_replica(shape, h100, _work(precision="fp8", prefix_cache_hit_rate=0.5), (2, *P5), None)
    assert r0 is not None and r5 is not None
    assert r5.step(16, 0.0) == pytest.approx(r0.step(16, 0.0))
    assert r5.step(16, float(r5.inp * 16)) < r0.step(16, float(r0.inp * 16))

    l405 = Shape.of(shipped.models["llama-3.1-405b"])
    pp = PipelineServing.build(l405, h100, (8, 900.0, 50.0), 2, io, "bf16", KvCache(None, 0.5))
    assert pp.hop_s(4) == pytest.approx(pp.hop_tokens_s(4 * (1 + 2000 / 500 * 0.5)))


GB300_TRAY = (4, 1800.0, 3200.0)  # BM.GPU.GB300.4: 4 GPUs, NVLink 1,800 GB/s, 3,200 Gbit/s


def test_a_replica_inside_an_nvlink_rack_talks_over_nvlink(shipped: Catalog) -> None:
    """DeepSeek-V3 in FP8 on GB300 trays of 4: a replica over two trays of one NVL72 rack sends
    its experts' all-to-all over NVLink (740 GB/s a GPU where NCCL gets 370 of 450) instead of
    its 100 GB/s network share, so the same replica serves more at a lower ITL; the layout and
    the recommendation say so. A dense 405B over PP stages passes its activations over
    NVLink too (one direction of the link: 900 GB/s a GPU against 100)."""
    gb300 = shipped.accelerators["gb300"]
    rack = serve_across_nodes(
        _v3(shipped), gb300, _work(precision="fp8"), Targets(), GB300_TRAY, 72
    )
    trays = serve_across_nodes(_v3(shipped), gb300, _work(precision="fp8"), Targets(), GB300_TRAY)
    assert rack is not None and trays is not None and rack.gpus_needed == trays.gpus_needed
    assert (
        rack.serving_layout is not None and "in one NVLink domain of 72 GPUs" in rack.serving_layout
    )
    assert trays.serving_layout is not None and "NVLink domain" not in trays.serving_layout
    assert rack.itl_ms is not None and trays.itl_ms is not None and rack.itl_ms < trays.itl_ms
    assert (rack.tokens_per_s or 0) > (trays.tokens_per_s or 0)

    l405 = Shape.of(shipped.models["llama-3.1-405b"])
    work = _work(model="llama-3.1-405b", precision="bf16")
    inside = pp_replica(l405, gb300, work, (2, *GB300_TRAY), 72)
    outside = pp_replica(l405, gb300, work, (2, *GB300_TRAY))
    assert inside is not None and outside is not None
    assert inside.step(64, 0.0) < outside.step(64, 0.0)
    assert "PP 2 across nodes of one NVLink domain of 72 GPUs" in inside.layout
    assert "NVLink" not in outside.layout

    result = recommend(
        shipped,
        # bf16 weights: 2 TB, two trays of 1.1 TB
        RecommendRequest(workload="high_throughput_inference", model="deepseek-v3", limit=50),
    )
    tray = next(r for r in result.recommendations if r.instance_type == "BM.GPU.GB300.4")
    assert any(
        reason.startswith("one replica spans nodes over NVLink (1800 GB/s a GPU): EP")
        and "in one NVLink domain of 72 GPUs" in reason  # the layout planned on it
        for reason in tray.reasons
    ), tray.reasons
    # the table's replicas x GPUs: one replica of 8 GPUs, though its attention's TP is 1
    from advisor.cli.recommend_cmd import _replicas_cell

    assert tray.sizing is not None and tray.sizing.tensor_parallel == 1
    assert _replicas_cell(tray.sizing) == "1 x 8"


def test_a_bare_rack_scale_accelerator_is_estimated_on_its_trays_nvlink(shipped: Catalog) -> None:
    """--accelerator gb300 is estimated on its host instance type's trays (BM.GPU.GB300.4),
    their NVLink domain included: the same replica and speed as the instance type itself, and
    the note says what it was taken to be."""

    def run(**kw: object) -> Any:
        req = {"workload": "high_throughput_inference", "model": "deepseek-v3", **kw}
        return estimate(shipped, EstimateRequest(**req))  # type: ignore[arg-type]

    bare, tray = run(accelerator="gb300", gpu_count=8), run(instance_type="BM.GPU.GB300.4")
    assert bare.tokens_per_s == pytest.approx(tray.tokens_per_s, rel=1e-12)
    assert any("in one NVLink domain of 72 GPUs" in n for n in bare.notes)
    assert any("1800 GB/s GPU link across an NVLink domain of 72 GPUs" in n for n in bare.notes)


GB200_TRAY = (4, 1800.0, 1600.0)  # BM.GPU.GB200.4: 4 GPUs, NVLink 1,800 GB/s, 1,600 Gbit/s


def test_tensor_parallelism_spans_the_trays_of_a_rack(shipped: Catalog) -> None:
    """Llama 3.1 405B in bf16 (810 GB) holds in no tray of 4 GB200s: inside an NVL72 rack TP 8
    spans two trays over their NVLink, and a token passes one replica of all 8 GPUs once instead
    of two pipeline stages of 4 in turn: each GPU reads the same eighth of the weights, so TP 8's
    ITL is below PP 2's (about half, plus its all-reduces). Outside a rack, or at a degree that
    does not divide the 128 heads (12 GPUs), there is none; a low-latency estimate takes it."""
    gb200 = shipped.accelerators["gb200"]
    l405 = Shape.of(shipped.models["llama-3.1-405b"])
    work = _work(model="llama-3.1-405b", workload="low_latency_inference")
    tp = tp_replica(l405, gb200, work, (2, *GB200_TRAY), 72)
    pp = pp_replica(l405, gb200, work, (2, *GB200_TRAY), 72)
    assert tp is not None and pp is not None
    assert tp.layout.startswith("TP 8 over 2 nodes of one NVLink domain of 72 GPUs")
    assert tp.gpus == pp.gpus == 8 and tp.tensor_parallel == 8
    assert pp.itl_s(1) / 2 < tp.itl_s(1) < pp.itl_s(1)
    assert tp_replica(l405, gb200, work, (2, *GB200_TRAY)) is None
    assert tp_replica(l405, gb200, work, (3, *GB200_TRAY), 72) is None
    e = estimate(
        shipped,
        EstimateRequest(
            workload="low_latency_inference",
            model="llama-3.1-405b",
            instance_type="BM.GPU.GB200.4",
        ),
    )
    assert any("TP 8 over 2 nodes of one NVLink domain" in n for n in e.notes), e.notes
