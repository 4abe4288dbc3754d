"""Recommendations and estimates sized from a model: GPU counts, cost to completion, cost per
million tokens, fleet calibration; and the invariant that no proposal is too small to hold it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from advisor import Catalog, InputError, Workload, recommend
from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.perf.calibration import Calibration
from advisor.perf.sizing import Shape, inference_memory
from advisor.planning.estimate import estimate
from advisor.request import EstimateRequest


def test_fine_tuning_ranks_by_cost_to_completion(shipped: Catalog) -> None:
    result = recommend(
        shipped, Workload(workload="fine_tuning", model="llama-3-8b", tokens=2e9, limit=50)
    )
    assert result.objective == "cost_to_completion" and result.ok
    # among options the profile does not penalise, ranking is by cost to completion
    plain = [r for r in result.recommendations if not any("worse" in x for x in r.reasons)]
    costs = [r.sizing.cost_to_completion_usd for r in plain if r.sizing]
    assert len(costs) == len(plain) >= 5  # every recommendation is sized
    assert costs == sorted(costs)
    top = result.recommendations[0]
    assert (
        top.sizing
        and top.sizing.memory_per_gpu_gb <= 0.9 * shipped.accelerators[top.accelerator].memory_gb
    )
    assert any("to completion" in reason for reason in top.reasons)


def test_time_objective_prefers_more_compute(shipped: Catalog) -> None:
    w = Workload(workload="fine_tuning", model="llama-3-8b", tokens=2e9, objective="time", limit=5)
    hours = [r.sizing.hours for r in recommend(shipped, w).recommendations if r.sizing]
    assert len(hours) == 5 and hours == sorted(hours)


def test_inference_ranks_by_cost_per_million_tokens(shipped: Catalog) -> None:
    w = Workload(
        workload="high_throughput_inference",
        model="llama-2-70b",
        precision="fp16",
        context_tokens=4096,
        throughput_tokens_s=5000,
        limit=20,
    )
    result = recommend(shipped, w)
    assert result.objective == "cost_per_million_tokens" and result.ok
    cpm = [r.sizing.cost_per_million_tokens_usd for r in result.recommendations if r.sizing]
    assert len(cpm) == len(result.recommendations) >= 5 and cpm == sorted(cpm)
    assert all(r.sizing and r.sizing.tokens_per_s >= 5000 for r in result.recommendations)


def test_fleet_calibration_replaces_the_catalog_efficiency(shipped: Catalog) -> None:
    """The fleet's own H100s (matmul at 0.5 of the expected, 12 reports) replace the calibrated
    value and the lent H100's table alike (both are a GEMM's speed against the same reference);
    the H200 without fleet reports keeps its table's factor."""
    w = Workload(workload="fine_tuning", model="llama-3-8b", tokens=2e9, limit=1000)
    fleet = {"h100-sxm": Calibration(0.5, 12), "a100-80gb-sxm": Calibration(0.5, 2)}
    result = recommend(shipped, w, fleet, min_fleet_reports=5)
    by_acc = {r.accelerator: r.sizing for r in result.recommendations if r.sizing}
    assert by_acc["h100-sxm"].efficiency == pytest.approx(0.51 * 0.5)
    assert "fleet-calibrated" in by_acc["h100-sxm"].efficiency_source
    assert "operator table" not in by_acc["h100-sxm"].efficiency_source
    assert "operator table of h200-sxm" in by_acc["h200-sxm"].efficiency_source
    assert by_acc["a100-80gb-sxm"].efficiency == 0.51  # too few reports
    assert "only 2 report(s)" in by_acc["a100-80gb-sxm"].efficiency_source


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        (dict(workload="fine_tuning", model="llama-9"), "did you mean"),
        (dict(workload="edge_inference", model="llama-3-8b"), "not sized from a model"),
        (
            dict(workload="high_throughput_inference", model="llama-2-7b", context_tokens=100_000),
            "beyond",
        ),
    ],
)
def test_bad_sizing_requests(shipped: Catalog, kwargs: dict[str, object], error: str) -> None:
    with pytest.raises(InputError, match=error):
        recommend(shipped, Workload(**kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [dict(model="llama-3-8b", params_b=8), dict(model="llama-3-8b", memory_gb=80)],
)
def test_contradictory_sizing_fields(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Workload(workload="fine_tuning", **kwargs)  # type: ignore[arg-type]


def test_estimate_reports_every_figure(shipped: Catalog) -> None:
    r = estimate(
        shipped,
        EstimateRequest(
            workload="fine_tuning",
            model="llama-3-8b",
            tokens=2e9,
            instance_type="p5.48xlarge",
            zero_stage=3,
        ),
    )
    names = [f.name for f in r.figures]
    assert names == [
        "model_states_per_gpu_gb",
        "activations_per_gpu_gb",
        "logits_per_gpu_gb",
        "memory_per_gpu_gb",
        "training_flops",
        "attention_flops",
        "parallel_layout",
        "compute_s_per_step",
        "dp_comm_s_per_step",
        "step_s",
        "mfu",
        "hours",
        "recompute",
    ]
    assert all(f.formula for f in r.figures)
    assert r.fits and r.hours is not None and r.hourly_usd is not None
    assert r.cost_usd == pytest.approx(r.hours * r.hourly_usd)
    # states + activations without recomputation (34*s*b*h per layer: GQA attention 2 + 2 +
    # 2 x 2 x 8/32 + 2 = 7, norms 4, Llama 3's SwiGLU MLP of width 14,336 2 + 6 x 14,336/4,096
    # = 23, no dropout: they fit) + fp32 logits
    assert r.memory_per_gpu_gb == pytest.approx(
        8.03e9 * 16 / 8 / 1e9 + 34 * 4096 * 4096 * 32 / 1e9 + 4 * 4096 * 128256 / 1e9
    )


def test_estimate_says_when_it_cannot_fit(shipped: Catalog) -> None:
    r = estimate(
        shipped,
        EstimateRequest(
            workload="fine_tuning",
            model="llama-3.1-405b",
            zero_stage=0,
            instance_type="p5.48xlarge",
        ),
    )
    # ZeRO stage 0 keeps 16 bytes per parameter on every data-parallel rank: 405e9 x 16 / (TP 8
    # x PP 8) = 101 GB does not fit 72 GB usable; PP 16 gives 50.6 GB: 16 nodes, and fine-tuning
    # runs on one node
    assert not r.fits and "needs 16 nodes and fine_tuning runs on one node" in r.notes[0]
    assert r.layout is not None and (r.layout.tensor_parallel, r.layout.pipeline_parallel) == (
        8,
        16,
    )


def test_an_unfit_estimate_names_activations_and_what_one_gpu_needs(shipped: Catalog) -> None:
    """Llama-3-8B without recomputation at 131,072 tokens: ZeRO-3 shards every state away and
    tensor parallelism (sequence parallel) splits activations at most 8 ways inside a p5 node,
    but one micro-batch's stay. Korthikanti et al. (2022) Table 2 with FlashAttention (no s x s
    scores), 16-bit, grouped-query attention and Llama 3's SwiGLU MLP, no dropout (7 + 4 + 2 +
    6 x 14,336 / 4,096 = 34): 34*s*b*h per layer x 32 layers = 584.1 GB, + fp32 logits
    4*s*vocab = 67.2 GB: 81.4 GB per GPU over TP 8, above 72 GB usable of an 80 GB H100
    whatever the GPU count. Context parallelism over 2 ranks halves them: 16 GPUs, two nodes,
    where fine_tuning runs on one. The estimate says so and keeps every figure at that layout:
    states 16 x 8.03e9 over 2 ZeRO ranks / TP 8 = 8.03 GB + 81.4 / 2 GB."""
    r = estimate(
        shipped,
        EstimateRequest(
            workload="fine_tuning",
            model="llama-3-8b",
            tokens=2e9,
            seq_len=131072,
            recompute=False,
            instance_type="p5.48xlarge",
            zero_stage=3,
        ),
    )
    assert not r.fits
    assert r.layout is not None and r.layout.context_parallel == 2
    activations = (34 * 131072 * 4096 * 32 + 4 * 131072 * 128256) / 1e9
    assert r.memory_per_gpu_gb == pytest.approx(16 * 8.03e9 / 2 / 8 / 1e9 + activations / 16)
    assert "needs 2 nodes and fine_tuning runs on one node" in r.notes[0]
    activations_figure = next(f for f in r.figures if f.name == "activations_per_gpu_gb")
    assert "/ TP 8 / CP 2" in activations_figure.formula
    assert r.hardware.gpus == 16


def test_tensor_parallel_splits_activations_so_no_recompute_fits(shipped: Catalog) -> None:
    """The same model at 16,384 tokens: 73.0 GB of activations (34 x s x h x 32 layers) + 8.4 GB
    of logits do not fit one H100 (72 GB usable), but TP 2 with sequence parallelism halves
    them; the narrowest layout that holds it, TP 2, widened over the node's 8 GPUs: DP 4 x TP 2,
    states 8.03e9 x 16 bytes / (DP 4 x TP 2) + 81.4 / 2 = 56.8 GB."""
    r = estimate(
        shipped,
        EstimateRequest(
            workload="fine_tuning",
            model="llama-3-8b",
            tokens=2e9,
            seq_len=16384,
            recompute=False,
            instance_type="p5.48xlarge",
            zero_stage=3,
        ),
    )
    assert r.fits and r.layout is not None
    assert (r.layout.data_parallel, r.layout.tensor_parallel) == (4, 2)
    activations = (34 * 16384 * 4096 * 32 + 4 * 16384 * 128256) / 1e9
    expected = 8.03e9 * 16 / 8 / 1e9 + activations / 2
    assert r.memory_per_gpu_gb == pytest.approx(expected, rel=1e-6)
    # no recomputation: hardware FLOPs are the model FLOPs (summed in another order)
    assert r.hfu == pytest.approx(r.mfu, rel=1e-12)


def test_estimate_on_an_unpriced_accelerator(shipped: Catalog) -> None:
    r = estimate(
        shipped,
        EstimateRequest(
            workload="high_throughput_inference",
            model="mixtral-8x7b",
            accelerator="h200-sxm",
            gpus_per_node=8,
            context_tokens=8192,
        ),
    )
    assert r.hourly_usd is None and r.tokens_per_s and "no price" in r.notes[-1]


@pytest.mark.usefixtures("roofline")
def test_estimate_cli_json_and_exit_codes() -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "advisor", "estimate", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    ok = run(
        "--workload",
        "fine_tuning",
        "--model",
        "llama-3-8b",
        "--tokens",
        "2e9",
        "--instance-type",
        "p5.48xlarge",
        "--json",
    )
    assert ok.returncode == 0, ok.stderr
    body = json.loads(ok.stdout)
    # the contract: these keys, in this order (the last five for training only)
    assert list(body) == [*TRAINING_KEYS, "gpu_hours", "mfu", "hfu", "layout", "hours_range"]
    low, high = body["hours_range"]
    assert low < body["hours"] < high  # the efficiency's measured range around the estimate
    assert list(body["hardware"]) == [
        "instance_type",
        "accelerator",
        "gpus_per_node",
        "nodes",
        "gpus",
    ]
    assert list(body["figures"][0]) == ["name", "value", "unit", "formula"]
    assert body["hours"] == pytest.approx(LLAMA3_8B_P5_HOURS, rel=1e-3)
    assert body["mfu"] == pytest.approx(LLAMA3_8B_P5_MFU, rel=1e-3)
    assert body["gpu_hours"] == pytest.approx(8 * body["hours"])
    assert body["hfu"] == pytest.approx(body["mfu"])  # no recomputation: HFU is MFU
    assert body["layout"] == {
        "data_parallel": 8,
        "tensor_parallel": 1,
        "pipeline_parallel": 1,
        "zero_stage": 1,
        "context_parallel": 1,
        "expert_parallel": 1,
    }
    serve = run(
        "--workload",
        "high_throughput_inference",
        "--model",
        "llama-3-8b",
        "--instance-type",
        "p5.48xlarge",
        "--purchase",
        "any",
        "--json",
    )
    assert serve.returncode == 0, serve.stderr
    body = json.loads(serve.stdout)
    assert list(body) == [*TRAINING_KEYS, "cost_per_million_tokens_usd", *INFERENCE_KEYS]
    assert body["price"]["purchase"] == "spot"  # any: the cheaper of on demand and spot
    unfit = run(
        "--workload",
        "fine_tuning",
        "--model",
        "llama-3.1-405b",
        "--zero-stage",
        "0",
        "--instance-type",
        "p5.48xlarge",
    )
    assert unfit.returncode == 1
    bad = run(
        "--workload",
        "fine_tuning",
        "--model",
        "llama-3-8b",
        "--zero-stage",
        "5",
        "--accelerator",
        "h100-sxm",
    )
    # the CLI names the field by its flag
    assert bad.returncode == 2 and "--zero-stage" in bad.stderr and "Traceback" not in bad.stderr


# Llama-3-8B (8.03e9 parameters), 2e9 tokens, fine-tuning on one p5.48xlarge (8 H100 SXM, dense
# BF16 989.5 TFLOP/s, whitepaper; NVSwitch 900 GB/s both ways), by hand (perf/training.py):
# a step is the 4M-token batch (1,024 x 4,096: Llama 2), 128 micro-batches of one sequence per
# GPU; the planner's ZeRO-1 (2 + 2 + 12/8 = 5.5 bytes a parameter, 44.2 GB) and one sequence's
# activations (34 x 4,096 x 4,096 x 32 layers + 4 x 4,096 x 128,256 fp32 logits = 20.4 GB) fit
# the 72 GB usable, so neither ZeRO-3 nor recomputation: the GEMMs' 6ND
# at fine_tuning's 0.51 kernel efficiency, causal attention's 6 x 32 x 4,096 x 4,096 per token
# at the attention kernels' 0.65; ZeRO-1 reduce-scatters the gradients and all-gathers the
# weights once a step (2 x 8.03e9 x 2 bytes x 7/8) at 370 GB/s (NCCL's bus bandwidth on
# NVSwitch), plus ceil(16.06e9 / 25 MiB) = 613 bucket all-reduces at NCCL's ring latency in one
# node (8.4 + 2 x 7 x 3.4 = 56 us), hidden under the compute but for the 20% that never
# overlaps. 476.8 steps; a
# 7-hour run has no goodput loss. MFU counts 6ND + attention.
_GEMM_S = 6 * 8.03e9 * 4_194_304 / (8 * 989.5e12 * 0.51)
_ATTENTION_FLOPS = 6 * 32 * 4096 * 4096 * 4_194_304
_COMPUTE_S = _GEMM_S + _ATTENTION_FLOPS / (8 * 989.5e12 * 0.65)
_COMM_S = 2 * 8.03e9 * 2 * 7 / 8 / 370e9 + 613 * 56e-6
LLAMA3_8B_P5_MFU = (6 * 8.03e9 * 4_194_304 + _ATTENTION_FLOPS) / (
    8 * 989.5e12 * (_COMPUTE_S + 0.2 * _COMM_S)
)
LLAMA3_8B_P5_HOURS = 2e9 / 4_194_304 * (_COMPUTE_S + 0.2 * _COMM_S) / 3600

INFERENCE_KEYS = [
    "ttft_ms",
    "itl_ms",
    "throughput_tokens_s",
    "concurrency",
    "tensor_parallel",
    "speed_source",
]
TRAINING_KEYS = [
    "workload",
    "model",
    "sizing",
    "hardware",
    "fits",
    "figures",
    "memory_per_gpu_gb",
    "memory_total_gb",
    "efficiency",
    "efficiency_source",
    "hours",
    "hourly_usd",
    "price",
    "cost_usd",
    "tokens_per_s",
    "replicas",
    "notes",
]
INFERENCE = ["high_throughput_inference", "low_latency_inference"]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_no_proposal_too_small_for_weights_plus_kv(shipped: Catalog, data: st.DataObject) -> None:
    """For every preset (70B fp16 included): rented GPU memory >= weights + KV cache."""
    model = data.draw(st.sampled_from(sorted(shipped.models)))
    preset = shipped.models[model]
    precision = data.draw(st.sampled_from(["fp16", "bf16", "fp8", "int4"]))
    context = data.draw(st.integers(1, preset.context_length))
    batch = data.draw(st.integers(1, 64))
    w = Workload(
        workload=data.draw(st.sampled_from(INFERENCE)),
        model=model,
        precision=precision,
        context_tokens=context,
        batch=batch,
        limit=1000,
        purchase=None,
    )
    need = inference_memory(
        Shape.of(preset),
        precision=precision,
        context_tokens=context,
        batch=batch,
        kv_precision="fp8" if precision == "fp8" else "bf16",  # the inference model's KV rule
    )
    weights_plus_kv = need[-1].value
    for r in recommend(shipped, w).recommendations:
        per_gpu = shipped.accelerators[r.accelerator].memory_gb
        assert r.gpu_count * per_gpu >= weights_plus_kv, (model, r.instance_type)
        assert r.sizing is not None
        replica_gpus = r.sizing.gpus_needed // r.sizing.replicas
        assert replica_gpus * per_gpu >= weights_plus_kv  # one replica holds a whole copy


def test_llama2_70b_fp16_never_undersized(shipped: Catalog) -> None:
    w = Workload(
        workload="high_throughput_inference",
        model="llama-2-70b",
        precision="fp16",
        context_tokens=4096,
        limit=1000,
        purchase=None,
    )
    result = recommend(shipped, w)
    assert result.ok
    for r in result.recommendations:
        assert r.sizing is not None and r.sizing.concurrency and r.sizing.replicas
        # one replica's usable 90% (the one headroom rule) holds 138 GB of fp16 weights and
        # 327,680 bytes of KV per token for each of its sequences of 4,096 tokens
        replica_gpus = r.sizing.gpus_needed // r.sizing.replicas
        usable = 0.9 * replica_gpus * shipped.accelerators[r.accelerator].memory_gb
        assert usable >= 138 + 327_680 * 4096 * r.sizing.concurrency / 1e9, r.instance_type
    rejected = {r.id: r for r in result.rejected}
    assert "MEMORY_INSUFFICIENT" in rejected["g6.xlarge"].codes  # one 24 GB L4 cannot hold 138 GB


@pytest.mark.usefixtures("roofline")
def test_post_estimates_serves_the_estimate(shipped: Catalog, tmp_path: Path) -> None:
    """POST /v1/estimates answers what estimate() does, keys and figures alike; an inference
    body carries cost_per_million_tokens_usd, a training body does not."""
    settings = Settings(database_url=f"sqlite:///{tmp_path}/api.db")  # type: ignore[arg-type]
    training = {
        "workload": "fine_tuning",
        "model": "llama-3-8b",
        "tokens": 2e9,
        "instance_type": "p5.48xlarge",
    }
    serving = {
        "workload": "high_throughput_inference",
        "model": "llama-3-8b",
        "instance_type": "p5.48xlarge",
        "throughput_tokens_s": 5000,
    }
    with TestClient(create_app(settings)) as client:
        for body in (training, serving):
            r = client.post("/v1/estimates", json=body)
            assert r.status_code == 200, r.text
            expected = estimate(shipped, EstimateRequest.model_validate(body))
            assert r.json() == expected.model_dump(mode="json")
            assert ("cost_per_million_tokens_usd" in r.json()) is (body is serving)
        hours = client.post("/v1/estimates", json=training).json()["hours"]
        assert hours == pytest.approx(LLAMA3_8B_P5_HOURS, rel=1e-3)
        bad = client.post("/v1/estimates", json={**training, "instance_type": "p5.48xlarg"})
        # an id in a body that the catalog lacks is an invalid field: 422 (404 is for paths)
        assert bad.status_code == 422 and "did you mean 'p5.48xlarge'" in bad.json()["detail"]
        schema = client.get("/openapi.json").json()
        ok = schema["paths"]["/v1/estimates"]["post"]["responses"]["200"]
        assert ok["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Estimate"
        }


def test_estimate_does_not_spread_training_over_a_slow_network(shipped: Catalog) -> None:
    """large_scale_training plans at least 8 GPUs; on g6e.xlarge (one L40S) that is 8 nodes,
    joined by a 20 Gbit/s network where the profile asks for 400 between nodes: no fit. On
    p5.48xlarge the 8 GPUs are one node."""
    request = dict(workload="large_scale_training", params_b=7, tokens=1e11)
    slow = estimate(shipped, EstimateRequest(**request, instance_type="g6e.xlarge"))  # type: ignore[arg-type]
    assert not slow.fits and slow.hardware.nodes == 8
    assert slow.notes == [
        "needs 8 nodes and g6e.xlarge's 20 Gbit/s network is below the 400 Gbit/s "
        "large_scale_training needs between nodes"
    ]
    one_node = estimate(shipped, EstimateRequest(**request, instance_type="p5.48xlarge"))  # type: ignore[arg-type]
    assert one_node.fits and one_node.hardware.nodes == 1
    # nothing in the way: the one note says how the run is best bought (a p5 is sold four ways)
    assert [n for n in one_node.notes if "cheapest way to buy" not in n] == []
