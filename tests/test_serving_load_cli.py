"""The serving-under-load fields through the command line: percentile, KV precision, prefix
cache; each refused value named by its flag."""

from __future__ import annotations

import json

from tests.test_planning_questions import run

ASK = (
    "estimate", "-w", "low_latency_inference", "-m", "llama-3.1-8b", "-a", "h100-sxm",
    "--input-tokens", "467", "--output-tokens", "256",
)  # fmt: skip


def _figures(out: str) -> dict[str, float]:
    return {f["name"]: f["value"] for f in json.loads(out)["figures"]}


def test_percentile_99_reports_the_tail() -> None:
    p = run(*ASK, "--request-rate", "120", "--percentile", "99", "--json")
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    figures = _figures(p.stdout)
    assert got["ttft_ms"] == figures["ttft_p99_s"] * 1e3
    p50 = run(*ASK, "--request-rate", "120", "--json")
    assert json.loads(p50.stdout)["ttft_ms"] <= got["ttft_ms"]


def test_a_percentile_the_simulation_does_not_report_is_refused() -> None:
    p = run(*ASK, "--request-rate", "10", "--percentile", "95")
    assert p.returncode == 2
    assert "--percentile" in p.stderr and "50, 90, 99" in p.stderr


def test_kv_precision_is_its_own_choice() -> None:
    bf16 = run(*ASK, "--json")
    fp8 = run(*ASK, "--kv-precision", "fp8", "--json")
    assert bf16.returncode == fp8.returncode == 0
    # the same sequences in half the KV bytes
    assert _figures(fp8.stdout)["kv_cache_bytes_per_token"] == (
        _figures(bf16.stdout)["kv_cache_bytes_per_token"] / 2
    )
    assert json.loads(fp8.stdout)["concurrency"] >= json.loads(bf16.stdout)["concurrency"]
    bad = run(*ASK, "--kv-precision", "fp4")
    assert bad.returncode == 2 and "--kv-precision" in bad.stderr and "fp8" in bad.stderr


def test_prefix_cache_hit_rate_is_bounded() -> None:
    p = run(*ASK, "--prefix-cache-hit-rate", "1")
    assert p.returncode == 2 and "--prefix-cache-hit-rate" in p.stderr
