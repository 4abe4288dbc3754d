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
# Known misses (ratio > 1.5): long-output (2048) runs at TP8 and a short-prompt saturated serving
# run, where the model's concurrency (all memory for KV) exceeds what the runtime scheduled;
# the runtime's batch/token limits are not published per row.
OUTSIDE = {
    "trt017-l31-70b-h100-fp8-tp8-128x2048": "runtime batch limit below memory-bound concurrency",
    "trt017-l31-70b-l40s-fp8-tp8-128x2048": "runtime batch limit; TP8 over PCIe on L40S",
    "trt014srv-l31-8b-h100-tp1-202x214-qpsinf": "serving stack at 39 req/s is scheduler-bound",
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
