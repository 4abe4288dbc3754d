"""POST /v1/estimates and `advisor estimate`: figures worked out by hand from published numbers,
and the fleet's calibration of the efficiency from stored probe reports, end to end.

Independent sources used below:
- Llama 2 7B (Touvron et al. 2023, config.json): 6.74e9 parameters, 32 layers, 32 heads, 32 KV
  heads, hidden 4096 (head dim 4096 / 32 = 128).
- Llama 3 8B (config.json): 8.03e9 parameters, 32 layers, hidden 4096, 32 heads.
- H100 SXM5 datasheet: bf16 1,979 TFLOP/s with sparsity, so 989.5 dense; 80 GB.
- A10G: 24 GB, 600 GB/s.
- Kaplan et al. 2020: training costs 6·N·D FLOPs without recomputation.
- Korthikanti et al. 2022: activations of one layer without recomputation s·b·h·(34 + 5·a·s/h) B.
- ZeRO (Rajbhandari et al. 2019): 16 bytes of model states per parameter, stage 3 shards all of
  them over the data-parallel ranks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from advisor import Catalog, load_catalog
from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.fleet.verification import catalog_expectation
from tests.api_server import REPO, LiveServer, live_server
from tests.reports import RECENT

TOKEN = "estimate-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
GB = 1e9

FINE_TUNE = {
    "workload": "fine_tuning",
    "model": "llama-3-8b",
    "tokens": 2e9,
    "instance_type": "p5.48xlarge",  # 8 x H100 SXM5
}

# measured / expected matmul_bf16 of five H100 hosts; the median is the third, 0.80
RATIOS = (0.70, 0.74, 0.80, 0.86, 0.90)
MEDIAN_RATIO = 0.80
# the catalog's own: the service grades a check against the measured accelerator's expectation
_H100_BF16 = catalog_expectation(load_catalog(), "h100-sxm", "matmul_bf16")
assert _H100_BF16 is not None, "the shipped catalog expects an H100's bf16 matmul"
EXPECTED_TFLOPS = _H100_BF16


def probe_report(host: str, ratio: float) -> dict[str, Any]:
    return {
        "created_at": RECENT,
        "mode": "quick",
        "device": 0,
        "verdict": "pass",
        "accelerator": "h100-sxm",
        "inventory": {"hostname": host, "python": "3.11.9", "device_count": 8},
        "checks": [
            {
                "name": "matmul_bf16",
                "status": "pass",
                "measured": ratio * EXPECTED_TFLOPS,
                "expected": EXPECTED_TFLOPS,
                "unit": "TFLOP/s",
                "detail": "test",
            }
        ],
        "duration_s": 10.0,
    }


def app_client(tmp_path: Path, name: str) -> TestClient:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/{name}.db", api_tokens=(TOKEN,))  # type: ignore[arg-type]
    return TestClient(create_app(settings))


def figure(result: dict[str, Any], name: str) -> float:
    values = [f["value"] for f in result["figures"] if f["name"] == name]
    assert len(values) == 1, (name, [f["name"] for f in result["figures"]])
    return float(values[0])


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with app_client(tmp_path, "api") as c:
        yield c


# -- content, by hand ---------------------------------------------------------------------------


def test_inference_memory_and_price(client: TestClient, shipped: Catalog) -> None:
    body = {
        "workload": "low_latency_inference",
        "model": "llama-2-7b",
        "context_tokens": 1024,
        "batch": 1,
        "instance_type": "g5.xlarge",  # 1 x A10G 24 GB
        "region": "eu-west-1",
    }
    r = client.post("/v1/estimates", json=body)
    assert r.status_code == 200, r.text
    result = r.json()
    weights_gb = 6.74e9 * 2 / GB  # bf16: 2 bytes per parameter
    assert figure(result, "weights_gb") == pytest.approx(13.48)
    assert weights_gb == pytest.approx(13.48)
    kv_per_token = 2 * 32 * 32 * 128 * 2  # K and V x layers x KV heads x head dim x 2 bytes
    assert kv_per_token == 512 * 1024  # Llama-2-7B's well-known 0.5 MiB per token
    assert figure(result, "kv_cache_bytes_per_token") == kv_per_token
    kv_gb = kv_per_token * 1024 / GB
    assert figure(result, "kv_cache_gb") == pytest.approx(kv_gb)
    # weights + KV; the headroom is the GPU's usable 90%, once (README)
    total_gb = weights_gb + kv_gb
    assert result["memory_per_gpu_gb"] == pytest.approx(total_gb)  # 14.02 GB on one GPU
    assert result["fits"] is True  # 14.02 GB <= 90% of 24 GB
    assert result["hardware"] == {
        "instance_type": "g5.xlarge",
        "accelerator": "a10g",
        "gpus_per_node": 1,
        "nodes": 1,
        "gpus": 1,
    }
    # decode at batch 1 is bandwidth bound (advisor/perf/inference.py): each iteration reads
    # every weight but the untied input embedding (32,000 x 4,096, only indexed) and the KV
    # cache at the mean context (512 in + 512 / 2 out, the context split in half) at 80% of
    # 600 GB/s, and one token's sampling (FP32 logits over the 32,000-token vocabulary, read 4
    # times) at the same bandwidth, plus the fixed time: (32 layers x 10 kernels + 3 sampling
    # kernels) x 3.8 us launches and 32 x 22 us unexplained. In-flight batching packs the
    # prompt into the decode iterations (1 x 512 / 512 = one prompt token each): still
    # bandwidth bound, so the rate is one token per step. TTFT is the prompt alone: 2 x (params -
    # embedding) x 512 + attention 2 x 32 x 512^2 x 32 x 128 FLOPs at 60% of the bf16 peak, its
    # last token's sampling and the fixed time.
    peak = shipped.accelerators["a10g"].peak_tflops.bf16
    assert peak is not None
    read = 6.74e9 - 32_000 * 4096
    sampling = 32_000 * 4 * 4 / (600e9 * 0.8)
    fixed = (32 * 10 + 3) * 3.8e-6 + 32 * 22e-6
    step = (read * 2 + kv_per_token * (512 + 256)) / (600e9 * 0.8) + sampling + fixed
    prefill = (2 * read * 512 + 2 * 32 * 512**2 * 32 * 128) / (peak * 1e12 * 0.6) + sampling + fixed
    rate = 1 / step
    assert result["tokens_per_s"] == pytest.approx(rate)
    assert result["ttft_ms"] == pytest.approx(prefill * 1e3)
    # The catalog's price rows are the input of the lookup under test: it must pick the
    # eu-west-1 on-demand row, not the cheaper us-east-1 one nor a spot row.
    rows = {
        (p.region, p.purchase.value): p.hourly_usd
        for p in shipped.instance_types["g5.xlarge"].prices
    }
    assert rows[("eu-west-1", "on_demand")] > rows[("us-east-1", "on_demand")]
    assert result["hourly_usd"] == rows[("eu-west-1", "on_demand")]
    assert (result["price"]["region"], result["price"]["purchase"]) == ("eu-west-1", "on_demand")
    assert result["hours"] is None and result["cost_usd"] is None  # serving has no end


def test_spot_price_is_the_spot_row(client: TestClient, shipped: Catalog) -> None:
    body = {"workload": "low_latency_inference", "model": "llama-2-7b"}
    body |= {"instance_type": "g5.xlarge", "region": "us-east-1", "purchase": "spot"}
    body |= {"concurrency": 1}  # one replica: one instance's price
    result = client.post("/v1/estimates", json=body).json()
    rows = {
        (p.region, p.purchase.value): p.hourly_usd
        for p in shipped.instance_types["g5.xlarge"].prices
    }
    assert result["hourly_usd"] == rows[("us-east-1", "spot")] < rows[("us-east-1", "on_demand")]


@pytest.mark.usefixtures("roofline")
def test_fine_tuning_memory_time_and_cost(client: TestClient, shipped: Catalog) -> None:
    body = {**FINE_TUNE, "recompute": False, "seq_len": 1024, "batch": 1, "zero_stage": 3}
    r = client.post("/v1/estimates", json=body)
    assert r.status_code == 200, r.text
    result = r.json()
    params, layers, hidden, heads, seq = 8.03e9, 32, 4096, 32, 1024
    # activations without recomputation (Korthikanti Table 2 without the 5·a·s/h score term,
    # which FlashAttention never stores, and without dropout masks): per layer s·b·h x
    # (attention: input 2 + Q 2 + K and V at 8 of 32 heads 2 x 2 / 4 + output-projection
    # input 2 = 7, norms 4, the SwiGLU MLP's 2 + 6 x 14,336 / 4,096 = 23) = 34·s·b·h bytes,
    # + fp32 logits 4·s·b·vocab
    per_hidden = 7 + 4 + 2 + 6 * 14336 / hidden
    assert per_hidden == 34
    activations_gb = (per_hidden * seq * 1 * hidden * layers + 4 * seq * 1 * 128256) / GB
    assert activations_gb == pytest.approx(5.09, abs=0.01)
    assert heads == 32  # no term of a x s: the attention scores are not stored
    # ZeRO-3 needs ceil(16 B x 8.03e9 / (0.9 x 80 GB - activations)) = 2 GPUs; one node of 8
    # is rented. At 1,024 tokens ZeRO-3 over 8 ranks would gather the parameters for each of
    # 512 micro-batches (3 x 512 x N x 2 bytes x 7/8 at 370 GB/s = 58 s a step, 20% exposed:
    # 11.6 s); TP 8 (sequence parallel) moves 4 all-reduces of the hidden state per layer and
    # token instead, 60% hidden by TP overlap: the planner takes TP 8 (DP 1), states 16 x N / 8
    # and activations / 8
    assert result["hardware"]["gpus"] == 8 and result["hardware"]["nodes"] == 1
    assert result["layout"]["tensor_parallel"] == 8 and result["layout"]["data_parallel"] == 1
    states_gb = 16 * params / 8 / GB
    assert figure(result, "model_states_per_gpu_gb") == pytest.approx(16.06)
    assert result["memory_per_gpu_gb"] == pytest.approx(states_gb + activations_gb / 8)
    assert result["fits"] is True
    # 6·N·D GEMM FLOPs over 8 GPUs at 989.5 dense TFLOP/s x the profile's kernel efficiency,
    # causal attention's 6 x layers x s x heads x 128 per token at the attention kernels' 0.65,
    # plus the 40% of TP's traffic TP overlap does not hide (advisor/perf/training.py): per step
    # 4 x layers x hidden x 2 bytes x 4,194,304 tokens x 2 x 7/8 at 370 GB/s
    efficiency = shipped.workloads["fine_tuning"].efficiency
    assert result["efficiency"] == efficiency
    attention = 6 * layers * seq * heads * 128 * 4_194_304 / (8 * 989.5e12 * 0.65)
    compute_s = 6 * params * 4_194_304 / (8 * 989.5e12 * efficiency) + attention
    tp_s = 4 * layers * hidden * 2 * 4_194_304 * 2 * 7 / 8 / 370e9
    # over the goodput of 8 GPUs: Llama 3's interruption rate per GPU-hour, each costing what
    # makes its 16,384 GPUs 90% effective, 1 / (1 + 8 / 16,384 x (1/0.9 - 1))
    hours = 2e9 / 4_194_304 * (compute_s + 0.4 * tp_s) / 3600 * (1 + 8 / 16_384 / 9)
    assert figure(result, "training_flops") == pytest.approx(6 * params * 2e9)
    assert result["hours"] == pytest.approx(hours)
    # the cheapest on-demand row of p5.48xlarge: $55.04/h (us-east-1, us-east-2 and us-west-2 in
    # the shipped snapshot; the lookup takes the cheapest, ties by region name)
    on_demand = min(
        (p for p in shipped.instance_types["p5.48xlarge"].prices if p.purchase == "on_demand"),
        key=lambda p: (p.hourly_usd, p.region),
    )
    assert (on_demand.hourly_usd, on_demand.region) == (55.04, "us-east-1")
    assert result["hourly_usd"] == on_demand.hourly_usd
    assert result["cost_usd"] == pytest.approx(on_demand.hourly_usd * hours)


# -- fleet calibration end to end ---------------------------------------------------------------


def compute_hours(efficiency: float) -> float:
    """The compute part of FINE_TUNE's hours: 6 x 8.03e9 x 2e9 / (8 x 989.5e12 x efficiency),
    over the goodput of 8 GPUs (1 / (1 + 8 / 16,384 x (1/0.9 - 1)), advisor/perf/training.py)."""
    return 6 * 8.03e9 * 2e9 / (8 * 989.5e12 * efficiency) / 3600 * (1 + 8 / 16_384 / 9)


def post_reports(post: Any, ratios: tuple[float, ...], first_host: int = 0) -> None:
    for i, ratio in enumerate(ratios, first_host):
        r = post("/v1/probe-reports", json=probe_report(f"h100-host-{i}", ratio), headers=AUTH)
        assert r.status_code == 201, r.text


@pytest.mark.usefixtures("roofline")
def test_the_service_calibrates_from_five_reports_not_four(
    tmp_path: Path, shipped: Catalog
) -> None:
    base = shipped.workloads["fine_tuning"].efficiency
    with app_client(tmp_path, "four") as four:
        post_reports(four.post, RATIOS[:4])
        uncalibrated = four.post("/v1/estimates", json=FINE_TUNE).json()
    with app_client(tmp_path, "five") as five:
        post_reports(five.post, RATIOS)
        calibrated = five.post("/v1/estimates", json=FINE_TUNE).json()
    assert uncalibrated["efficiency"] == base
    assert "fleet-calibrated" not in uncalibrated["efficiency_source"]
    assert calibrated["efficiency"] == pytest.approx(base * MEDIAN_RATIO)
    assert "fleet-calibrated" in calibrated["efficiency_source"]
    # the same work at 80% of the efficiency: its compute (6ND at the MFU) takes 1 / 0.8 as
    # long; the communication that never hides does not change; the cost follows the hours
    slower = compute_hours(base) * (1 / MEDIAN_RATIO - 1)
    assert calibrated["hours"] == pytest.approx(uncalibrated["hours"] + slower)
    assert calibrated["cost_usd"] / calibrated["hours"] == pytest.approx(
        uncalibrated["cost_usd"] / uncalibrated["hours"]
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with live_server(tmp_path, TOKEN) as srv:
        yield srv


def cli_estimate(server: LiveServer) -> dict[str, Any]:
    args = ["estimate", "--workload", "fine_tuning", "--model", "llama-3-8b", "--tokens", "2e9"]
    args += ["--instance-type", "p5.48xlarge", "--server", server.base_url, "--json"]
    p = subprocess.run(
        [sys.executable, "-m", "advisor", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    result: dict[str, Any] = json.loads(p.stdout)
    return result


@pytest.mark.usefixtures("roofline")
def test_cli_and_service_calibrate_alike_from_a_live_fleet(
    server: LiveServer, shipped: Catalog
) -> None:
    base = shipped.workloads["fine_tuning"].efficiency
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        post_reports(http.post, RATIOS[:4])
        four = cli_estimate(server)
        assert four["efficiency"] == base
        assert "fleet-calibrated" not in four["efficiency_source"]
        post_reports(http.post, RATIOS[4:], first_host=4)
        cli = cli_estimate(server)
        served = http.post("/v1/estimates", json=FINE_TUNE).json()
    assert cli["efficiency"] == pytest.approx(base * MEDIAN_RATIO)
    assert "fleet-calibrated" in cli["efficiency_source"]
    assert cli["hours"] == pytest.approx(four["hours"] + compute_hours(base) * (1 / 0.8 - 1))
    # one function answers both: the service's figures are the CLI's
    for key in ("efficiency", "efficiency_source", "hours", "cost_usd", "memory_per_gpu_gb"):
        assert served[key] == cli[key], key
