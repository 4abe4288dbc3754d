"""advisor.fleet.grading: the one pass / warn / fail banding, and its users agreeing on it.

The bands are the README's: a check passes at >= 90% of its expectation, warns at >= 75% (DCGM's
diagnostic threshold) and fails below. The probe's verdicts, the review's colours and the review
chart's threshold lines must all put a ratio in the same band.
"""

from __future__ import annotations

import pytest

from advisor import Catalog
from advisor.fleet.grading import grade
from advisor.fleet.verification import verify
from advisor.review.analysis import band
from advisor.review.svg import RatioBar, ratio_chart
from probes.report import GpuInventory, Inventory
from probes.stats import summarize

# (case guarded, measured / expected, its band by the README's rule)
EDGES = [
    ("exactly 90% passes", 0.90, "pass"),
    ("just below 90% warns", 0.8999, "warn"),
    ("exactly 75% warns", 0.75, "warn"),
    ("just below 75% fails", 0.7499, "fail"),
    ("above the expectation passes", 1.3, "pass"),
    ("nothing measured fails", 0.0, "fail"),
]


@pytest.mark.parametrize(("ratio", "band_name"), [e[1:] for e in EDGES], ids=[e[0] for e in EDGES])
def test_grade_at_the_band_edges(ratio: float, band_name: str) -> None:
    assert grade(ratio) == band_name
    assert band(ratio) == band_name  # the review's colour of a fleet median


def test_the_review_has_no_band_without_a_ratio() -> None:
    assert band(None) == "none"


def test_other_bands_are_passed_explicitly() -> None:
    # stream_overlap's own bands (0.80 / 0.50): 0.6 warns there, would fail at the defaults
    assert grade(0.6, 0.80, 0.50) == "warn"
    assert grade(0.6) == "fail"


# Ratios a hair inside each band: measured = ratio x reference is not exact in floating point.
INSIDE = [(0.9001, "pass"), (0.8999, "warn"), (0.7501, "warn"), (0.7499, "fail")]


@pytest.mark.parametrize(("ratio", "status"), INSIDE)
def test_the_probe_grades_a_measurement_in_the_same_band(
    shipped: Catalog, ratio: float, status: str
) -> None:
    reference = shipped.probe_expectations["h200-sxm"].matmul_tflops.get("bf16")
    assert reference is not None  # the band is under test here, not the reference's value
    measured = summarize("matmul_bf16", "TFLOP/s", [ratio * reference], "max")
    inventory = Inventory(hostname="t", python="3.11", gpu=GpuInventory(name="NVIDIA H200"))
    result = verify(shipped, inventory, [], [measured], "h200-sxm")
    (check,) = [c for c in result.checks if c.name == "matmul_bf16"]
    assert check.status == status == band(ratio)


def test_the_chart_draws_the_same_thresholds() -> None:
    svg = ratio_chart([RatioBar("h200-sxm matmul_bf16", 0.95, 0.9, 1.0, "pass", "t")])
    assert "pass threshold: 90% of expected" in svg
    assert "warn threshold: 75% of expected" in svg
