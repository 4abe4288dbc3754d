"""`advisor calibrate ingest`: result files of vllm bench serve, AIPerf and GuideLLM (shaped as
each tool writes them; the numbers in tests/data/bench_results are made up for the test, not
measurements) read into runs, compared with the model, and the bounded ITL correction with its
leave-one-out residuals worked by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from advisor.errors import InputError
from advisor.fleet.bench_results import Comparison, correction, detect, read_runs
from advisor.perf.correction import StoredCorrection
from tests.test_cli import run

DATA = Path(__file__).resolve().parent / "data" / "bench_results"


def _runs(name: str) -> list:  # type: ignore[type-arg]
    return read_runs(json.loads((DATA / name).read_text()), name)


def test_each_tool_is_recognised_and_read() -> None:
    (vllm,) = _runs("vllm-bench-serve-c16.json")
    assert (vllm.tool, vllm.concurrency, vllm.request_rate) == ("vllm", 16, None)
    assert (vllm.input_tokens, vllm.output_tokens) == (1024, 128)  # totals / completed
    assert (vllm.ttft_ms, vllm.itl_ms, vllm.throughput_tokens_s) == (142.0, 12.6, 1180.2)
    (aiperf,) = _runs("profile_export_aiperf.json")
    assert (aiperf.tool, aiperf.concurrency, aiperf.model) == (
        "aiperf",
        16,
        "meta-llama/Llama-3.1-8B-Instruct",
    )
    assert (aiperf.ttft_ms, aiperf.itl_ms, aiperf.throughput_tokens_s) == (115.9, 10.12, 1512.9)
    assert (aiperf.input_tokens, aiperf.output_tokens) == (1024, 256)
    g0, g1 = _runs("guidellm-benchmarks.json")
    assert (g0.tool, g0.source, g1.source) == (
        "guidellm",
        "guidellm-benchmarks.json#0",
        "guidellm-benchmarks.json#1",
    )
    assert (g1.concurrency, g1.ttft_ms, g1.itl_ms, g1.throughput_tokens_s) == (32, 260, 16.4, 1810)


def test_an_unknown_file_is_refused_naming_the_formats() -> None:
    with pytest.raises(InputError, match="vllm bench serve.*AIPerf.*GuideLLM"):
        detect({"hello": 1})


def test_the_correction_and_its_held_out_residuals_by_hand() -> None:
    comps = [
        Comparison("a", "itl_ms", 10.0, 12.0),  # measured / predicted 1.2
        Comparison("b", "itl_ms", 10.0, 15.0),  # 1.5
        Comparison("c", "itl_ms", 20.0, 20.0),  # 1.0
        Comparison("c", "ttft_ms", 5.0, 50.0),  # not ITL: not in the factor
    ]
    fix = correction(comps)
    assert fix is not None and fix.runs == 3 and not fix.bounded
    assert fix.factor == pytest.approx((1.2 * 1.5 * 1.0) ** (1 / 3))
    held = dict(fix.held_out)
    assert held["a"] == pytest.approx(10 * math.sqrt(1.5 * 1.0) / 12 - 1)
    assert held["b"] == pytest.approx(10 * math.sqrt(1.2 * 1.0) / 15 - 1)
    assert held["c"] == pytest.approx(20 * math.sqrt(1.2 * 1.5) / 20 - 1)


def test_a_factor_beyond_the_bounds_is_bounded_and_said() -> None:
    fix = correction([Comparison("a", "itl_ms", 1.0, 5.0)])
    assert fix is not None and fix.factor == 2.0 and fix.bounded and fix.held_out == ()


def test_cli_ingest_json() -> None:
    files = [str(p) for p in sorted(DATA.glob("*.json"))]
    p = run("calibrate", "ingest", *files, "--accelerator", "h100-sxm", "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    itl = [r for r in data["rows"] if r["metric"] == "itl_ms"]
    assert len(itl) == 5  # two vllm files, one AIPerf, two GuideLLM benchmarks
    assert all(r["ratio"] == pytest.approx(r["predicted"] / r["measured"]) for r in data["rows"])
    fix = data["correction"]
    ratios = [r["measured"] / r["predicted"] for r in itl]
    assert fix["itl_factor"] == pytest.approx(math.prod(ratios) ** (1 / len(ratios)))
    assert len(fix["held_out_errors"]) == 5


def test_cli_ingest_refuses_a_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    p = run("calibrate", "ingest", str(bad), "--accelerator", "h100-sxm")
    assert p.returncode == 2 and "AIPerf" in p.stderr
    p = run("calibrate", "ingest", str(DATA / "vllm-bench-serve-c1.json"), "--accelerator", "h1")
    assert p.returncode == 2 and "h100-sxm" in p.stderr


def test_a_saved_correction_scales_the_estimate_of_its_engine(tmp_path: Path) -> None:
    """`--save DIR` stores the factor with its runs; an estimate on that accelerator with
    `--engine vllm` (DIR a catalog directory) has every iteration x the factor: at a fixed
    concurrency the ITL and TTFT are the uncorrected ones x the factor, and the estimate says
    where the factor came from; another engine gets the model as it is, and says so."""
    (tmp_path / "empty.yaml").write_text("accelerators: []\n")  # a catalog directory
    files = [str(p) for p in sorted(DATA.glob("*.json"))]
    saved = run("calibrate", "ingest", *files, "--accelerator", "h100-sxm", "--save", str(tmp_path))
    assert saved.returncode == 0, saved.stderr
    stored = StoredCorrection.model_validate_json(
        (tmp_path / "corrections" / "h100-sxm--vllm.json").read_text()
    )
    assert len(stored.runs) == 5 and len(stored.held_out) == 5
    ratios = [r.measured_itl_ms / r.predicted_itl_ms for r in stored.runs]
    assert stored.itl_factor == pytest.approx(math.prod(ratios) ** (1 / 5))
    ask = ["estimate", "-w", "low_latency_inference", "-m", "llama-3.1-8b", "-a", "h100-sxm"]
    ask += ["-g", "1", "--concurrency", "4", "--json"]
    env = {"ADVISOR_CATALOG": str(tmp_path)}
    plain, vllm, other = (
        json.loads(run(*ask, *extra, env=env).stdout)
        for extra in ([], ["--engine", "vllm"], ["--engine", "sglang"])
    )
    assert vllm["itl_ms"] == pytest.approx(plain["itl_ms"] * stored.itl_factor, rel=1e-9)
    assert vllm["ttft_ms"] == pytest.approx(plain["ttft_ms"] * stored.itl_factor, rel=1e-9)
    assert "stored correction x" in vllm["speed_source"] and "5 run(s)" in vllm["speed_source"]
    assert other["itl_ms"] == plain["itl_ms"]
    assert "no stored correction for h100-sxm x sglang" in other["speed_source"]
