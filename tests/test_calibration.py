"""Every published inference row predicted within x1.5 (tests/data/published.yaml and
published-2.yaml; sources in docs/reference-figures.md). Rows outside the bound are xfail with the
reason; rows the model cannot be asked are skipped, each with its reason."""

from __future__ import annotations

import statistics

import pytest

from advisor.catalog.loading import load_catalog
from benchmarks.bench_calibration import compare, rows, run, skip_reason

CATALOG = load_catalog()
ROWS = rows("inference")
# Known miss (ratio 1.50 > 1.5), left as it is: no sourced effect explains it. At the decode batch
# Little's law gives for that run (8291 tok/s x 21 ms ITL = 174 sequences; 240 in the system
# with the 1.66 s TTFT) the model's ITL matches the published 21 ms, yet the run's output rate is
# lower, and its sibling in the same table (467x256, same GPU and stack) is under-predicted
# (0.85): the two saturated runs reach almost the same request rate (39 vs 37 req/s) whatever
# their lengths, i.e. the Triton serving run of 500 requests is bound per request, not per token.
# The engine's batch limits do not explain it (trtllm-bench sizes max_batch_size to the KV-cache
# bound, tensorrt_llm/bench/build/tuning.py), and no per-request cost of the serving stack is
# published, so none is modelled. Simulated as it was run (500 requests at once,
# benchmarks/bench_calibration.py _burst), the model's batch reaches all 500 and its mean ITL is
# 31 ms against the published 21 ms: the run held fewer sequences than its KV cache allows.
# The B200 FP4 run at 20,000/2,000 tokens (ratio ~1.54): 33 sequences of 22k tokens fill the KV
# cache and the model's ITL is the KV-read bound (17.7 of 36.8 ms); its three siblings at short
# lengths are within 12%. The published page states neither the batch the run reached nor its
# chunked-prefill budget, so what the run lost at that length has no sourced figure.
OUTSIDE = {
    # vLLM 0.6 scheduled at most 256 sequences a step by default (EngineArgs max_num_seqs); the
    # model compares the offline run at the memory-bound concurrency (1,034 sequences of 70B on
    # 4 x H100), which its measured GEMMs make 1.55x the published rate (the roofline: 1.43x)
    "vllm060-l31-70b-4xh100-tp4-sharegpt-offline": "vLLM 0.6's 256-sequence default not modelled",
    "trt014srv-l31-8b-h100-tp1-202x214-qpsinf": "serving run bound per request (~39 req/s), "
    "not per token: no sourced per-request cost",
    "trt019-l33-70b-b200-fp4-tp1-20000x2000": "long-context run below the KV-read bound: "
    "batch and prefill budget not published",
    # 32 QPS offered, 14 req/s achieved with a TTFT of 116 ms (no growing queue): the same
    # stack's 70B TP4 run at 467/256 reaches 16 req/s saturated, so this run too is bound per
    # request (its sibling above), where the model completes 27 req/s of 202/214 tokens.
    "trt014srv-l31-70b-h100-tp4-202x214-qps32": "serving run bound per request (~14-16 req/s "
    "for 70B TP4 whatever the lengths): no sourced per-request cost",
    # SGLang under a Poisson load of ShareGPT requests, medians: the model knows only the mean
    # lengths (230 in, 203 out; the rows state no distribution), and at 8 req/s (70B: from 4)
    # the long prompts of a heavy-tailed mix stall the decode iterations they are packed into,
    # which mean lengths cannot show: TPOT and TTFT under-predicted by 0.61-0.67.
    "sgl030-l31-70b-4xh100-tp4-sharegpt-rps8": "ShareGPT length mix at 8 req/s: mean lengths only",
}
# Rows not put to the model, by the reason bench_calibration.skip_reason gives.
SKIPPED = {
    "mlperf41-llama2-70b-99-8xmi300x-9374f-offline": "lengths not stated",
    "mlperf41-llama2-70b-99-8xmi300x-9374f-server": "lengths not stated",
    "mlperf41-llama2-70b-99-8xmi300x-turin-offline": "lengths not stated",
    "mlperf41-llama2-70b-99-8xmi300x-turin-server": "lengths not stated",
    "mlperf41-llama2-70b-99.9-1xmi300x-offline": "lengths not stated",
    "mlperf31-gptj-6b-99-1xl4-offline": "not in the catalog",
    "mlperf31-gptj-6b-99-1xl4-server": "not in the catalog",
}


def _params() -> list[object]:
    out: list[object] = []
    for row in ROWS:
        if row["id"] in SKIPPED:
            continue
        marks = (
            [pytest.mark.xfail(reason=OUTSIDE[row["id"]], strict=True)]
            if row["id"] in OUTSIDE
            else []
        )
        out.append(pytest.param(row, id=row["id"], marks=marks))
    return out


@pytest.mark.parametrize("row", _params())
def test_row_within_1_5(row: dict[str, object]) -> None:
    for c in compare(row, CATALOG):
        assert 1 / 1.5 <= c.ratio <= 1.5, f"{c.metric}: {c.predicted:.1f} vs {c.published}"


def test_median_error_at_most_15_percent() -> None:
    comps, skipped = run(CATALOG)
    assert len(comps) >= 50
    assert statistics.median(abs(c.ratio - 1) for c in comps) <= 0.15
    assert sorted(s.split(":")[0] for s in skipped) == sorted(SKIPPED)


@pytest.mark.parametrize("row_id", sorted(SKIPPED))
def test_a_skipped_row_says_why(row_id: str) -> None:
    row = next(r for r in ROWS if r["id"] == row_id)
    assert SKIPPED[row_id] in str(skip_reason(row))


def test_a_static_batch_row_is_compared_on_its_ttft() -> None:
    # published-3.yaml: TensorRT-LLM 0.5, Llama 2 70B FP8 on 4 H100 (TP 4), one sequence of 2,048
    # tokens, output length 1: the TTFT at batch 1, 109 ms. Compared on it (it had been dropped
    # without a word: "batch 1" is neither a rate nor a request count).
    import yaml

    from benchmarks.calibration_rows import DATA_DIR

    data = yaml.safe_load((DATA_DIR / "published-3.yaml").read_text())
    row = next(r for r in data["inference"] if r["id"] == "trt05-l2-70b-h100-fp8-tp4-bs1-isl2048")
    [ttft] = compare(row, CATALOG)
    assert ttft.metric == "ttft_ms" and ttft.published == 109
    assert 1 / 1.5 <= ttft.ratio <= 1.5


def test_a_row_with_nothing_to_compare_is_listed_as_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A row whose figures are all of a kind the comparison does not read is reported, not lost.
    from benchmarks import bench_calibration

    row = {**ROWS[0], "id": "figureless", "ttft_ms": None, "itl_ms": None}
    row["throughput_tokens_s"] = None
    monkeypatch.setattr(bench_calibration, "rows", lambda kind: [row])
    monkeypatch.setattr(bench_calibration, "skip_reason", lambda r: None)
    comps, skipped = run(CATALOG)
    assert comps == [] and skipped and skipped[0].startswith("figureless: no figure")


def test_vllm_ci_latency_rows_are_compared_on_the_batchs_e2e_time() -> None:
    # published-3.yaml: vLLM's CI latency test, Llama 3.1 8B on one H200, a fixed batch of 8
    # sequences of 32 in and 128 out: the batch's mean end-to-end latency 833.4 ms, dtype not
    # stated (vLLM's default runs the BF16 checkpoint in BF16).
    import yaml

    from benchmarks.calibration_rows import DATA_DIR

    data = yaml.safe_load((DATA_DIR / "published-3.yaml").read_text())
    row = next(r for r in data["inference"] if r["id"] == "vllm-ci9515-l31-8b-h200-tp1-bs8-32x128")
    assert row["precision"] is None and skip_reason(row) is None
    [e2e] = compare(row, CATALOG)
    assert (e2e.metric, e2e.published) == ("e2e_latency_ms", 833.421)
    assert 1 / 1.5 <= e2e.ratio <= 1.5
    # at the row's batch of 8, not one sequence alone
    from benchmarks.bench_calibration import _filled, _model

    model = _model(_filled(row), CATALOG)
    assert e2e.predicted == pytest.approx(model.e2e_s(8) * 1e3)
    assert abs(model.e2e_s(1) / model.e2e_s(8) - 1) > 0.002


def test_each_row_with_the_operator_tables_off_and_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # --tables: every row both ways, file by file. A row on a GPU without a table (A100) has the
    # same ratio both ways; an H200 row the table times differently; the variable is restored.
    import os

    from benchmarks.bench_calibration import tables_side_by_side

    monkeypatch.delenv("ADVISOR_OPERATOR_TABLES", raising=False)
    lines = tables_side_by_side(CATALOG).splitlines()
    assert "ADVISOR_OPERATOR_TABLES" not in os.environ

    def ratios(row_id: str, metric: str) -> tuple[str, str]:
        found = next(ln.split() for ln in lines if ln.split()[:2] == [row_id, metric])
        return found[3], found[4]

    off, on = ratios("trt017-l31-8b-a100-fp16-tp1-128x128", "throughput_tokens_s")
    assert off == on
    off, on = ratios("trt017-l31-70b-h200-fp8-tp1-1000x1000", "throughput_tokens_s")
    assert off != on
    assert sum(ln.startswith("tables off: rows compared") for ln in lines) == 3


def test_explain_prints_a_rows_passes_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    # --explain ROW: the roofline's formula with the tables off, the table's with them on.
    from benchmarks.bench_calibration import explain

    monkeypatch.delenv("ADVISOR_OPERATOR_TABLES", raising=False)
    text = explain(CATALOG, "trt017-l31-70b-h200-fp8-tp1-1000x1000")
    off, on = text.split("-- tables on: ")
    assert "-- tables off: roofline" in off and "weight bytes" in off
    assert on.startswith("operator table of h200-sxm") and "memory-bound operators" in on
    with pytest.raises(SystemExit):
        explain(CATALOG, "no-such-row")
