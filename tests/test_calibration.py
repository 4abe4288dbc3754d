"""Every published inference row predicted within x1.5 (tests/data/published.yaml, copied from
../shared/calibration/published.yaml). Rows outside the bound are xfail with the reason."""

from __future__ import annotations

import statistics

import pytest
import yaml

from advisor.catalog.loading import load_catalog
from benchmarks.bench_calibration import DATA, compare, run

CATALOG = load_catalog()
ROWS = yaml.safe_load(DATA.read_text())["inference"]
# Known miss (ratio 1.50 > 1.5), left as it is: no sourced effect explains it. At the decode batch
# Little's law gives for that run (8291 tok/s x 21 ms ITL = 174 sequences; 240 in the system
# with the 1.66 s TTFT) the model's ITL matches the published 21 ms, yet the run's output rate is
# lower, and its sibling in the same table (467x256, same GPU and stack) is under-predicted
# (0.85): the two saturated runs reach almost the same request rate (39 vs 37 req/s) whatever
# their lengths, i.e. the Triton serving run of 500 requests is bound per request, not per token.
# The engine's batch limits do not explain it (trtllm-bench sizes max_batch_size to the KV-cache
# bound, tensorrt_llm/bench/build/tuning.py), and no per-request cost of the serving stack is
# published, so none is modelled.
OUTSIDE = {
    "trt014srv-l31-8b-h100-tp1-202x214-qpsinf": "serving run bound per request (~39 req/s), "
    "not per token: no sourced per-request cost",
}
SKIPPED = {"trt014srv-l31-70b-h100-tp4-202x214-qps32"}  # 32 QPS below saturation: queueing


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


def test_median_error_at_most_20_percent() -> None:
    comps, skipped = run(CATALOG)
    assert len(comps) >= 30
    assert statistics.median(abs(c.ratio - 1) for c in comps) <= 0.20
    assert [s.split(":")[0] for s in skipped] == sorted(SKIPPED)
