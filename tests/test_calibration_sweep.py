"""The NIM 1.8.0 concurrency sweep of published-3.yaml (Llama 3.3 70B FP8 on 2 x H100, TP 2,
5000 in / 500 out, AIPerf closed loop at 1, 50 and 250 users): each row compared at its own
concurrency, the modelled decode step growing with the batch as the published one does."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from advisor.catalog.loading import load_catalog
from benchmarks.bench_calibration import compare

ROWS = {
    r["id"]: r
    for r in yaml.safe_load(
        (Path(__file__).resolve().parent / "data" / "published-3.yaml").read_text()
    )["inference"]
}
SWEEP = [f"nim180-l33-70b-2xh100-fp8-tp2-5000x500-c{n}" for n in (1, 50, 250)]


def test_the_sweep_is_compared_at_each_concurrency_within_1_5() -> None:
    cat = load_catalog()
    itl = []
    for rid in SWEEP:
        comps = {c.metric: c for c in compare(ROWS[rid], cat)}
        assert "itl_ms" in comps and "throughput_tokens_s" in comps
        assert ("ttft_ms" in comps) == rid.endswith("-c1")  # a closed loop's TTFT queues above 1
        for c in comps.values():
            assert 1 / 1.5 <= c.ratio <= 1.5, (rid, c)
        itl.append((comps["itl_ms"].predicted, comps["itl_ms"].published))
    # step time against batch: the model's grows as the published one does (x3.2 and x5.0 at
    # 50 and 250 users), each within 15%
    base_model, base_published = itl[0]
    for model, published in itl[1:]:
        assert model / base_model == pytest.approx(published / base_published, rel=0.15)
