"""advisor.fleet.statistics: the service's fleet summary and the review's measured / expected rows
come from one computation, so they agree; and a run that reached no GPU (a real report of this CPU
machine, probed with --expect h200-sxm) is filed under no accelerator and counted as no GPU.

Figures are worked out by hand below, with numpy's default quantile (linear interpolation
between closest ranks): for n sorted values, q sits at position (n - 1) x q.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor import Catalog
from advisor.fleet.statistics import fleet_statistics
from advisor.review import build_review, from_store
from probes.report import ProbeReport
from tests.memory_store import MemoryStore
from tests.reports import as_probe_report

DATA = Path(__file__).parent / "data"
CPU_MACHINE = DATA / "probe-report-cpu-machine.json"  # `advisor probe --expect h200-sxm --json`
H200_RUN = (
    Path(__file__).parents[1]
    / "benchmarks/results/probe-2026-11-30-nvidia-h200-driver580.159.04-torch2.11.0+cu130"
    / "probe-expect-h200.json"
)

EXPECTED_TFLOPS = 800.0  # a round expectation: each ratio below is measured / 800
# host -> (measured bf16 TFLOP/s, its status by the probe's bands)
MEASURED = {
    "a": (800.0, "pass"),  # 1.00
    "b": (760.0, "pass"),  # 0.95
    "c": (680.0, "warn"),  # 0.85
    "d": (560.0, "fail"),  # 0.70
    "e": (720.0, "pass"),  # 0.90
}
# Sorted ratios 0.70, 0.85, 0.90, 0.95, 1.00 (n = 5):
MEDIAN = 0.90  # position 2
P10 = 0.70 + 0.4 * (0.85 - 0.70)  # position 0.4: 0.76
P90 = 0.95 + 0.6 * (1.00 - 0.95)  # position 3.6: 0.98


def gpu_report(host: str) -> ProbeReport:
    measured, status = MEASURED[host]
    return as_probe_report(
        {
            "verdict": "fail" if status == "fail" else "pass",
            "accelerator": "h200-sxm",
            "expected_accelerator": "h200-sxm",
            "created_at": "2026-11-30T12:00:00+00:00",
            "inventory": {"hostname": host, "gpu": {"name": "NVIDIA H200", "uuid": f"GPU-{host}"}},
            "checks": [
                {
                    "name": "matmul_bf16",
                    "status": status,
                    "measured": measured,
                    "expected": EXPECTED_TFLOPS,
                    "unit": "TFLOP/s",
                },
                {"name": "ecc", "status": "pass", "detail": "ECC is on"},
            ],
        }
    )


def cpu_machine_report() -> ProbeReport:
    report: dict[str, Any] = json.loads(CPU_MACHINE.read_text())
    report["inventory"]["hostname"] = "cpu-vm"  # this machine's name, kept apart from a..e
    return ProbeReport.model_validate(report)


@pytest.fixture
def store() -> MemoryStore:
    s = MemoryStore()
    for host in MEASURED:
        s.add(gpu_report(host))
    s.add(cpu_machine_report())
    return s


def test_the_cpu_report_is_what_a_cpu_machine_says() -> None:
    report = cpu_machine_report()
    assert report.verdict == "error" and report.expected_accelerator == "h200-sxm"
    assert report.inventory.gpu is None
    assert {d.code for d in report.diagnosis} >= {"torch_without_cuda"}


def test_the_store_summary_has_the_hand_figures(store: MemoryStore) -> None:
    (summary,) = store.fleet("h200-sxm")
    assert (summary.reports, summary.hosts) == (5, 5)  # the CPU machine's run is not one of them
    assert summary.verdicts == {"pass": 4, "fail": 1}
    bf16 = summary.checks["matmul_bf16"]
    assert bf16["ratio_median"] == pytest.approx(MEDIAN)
    assert bf16["ratio_p10"] == pytest.approx(P10)
    assert bf16["ratio_p90"] == pytest.approx(P90)
    assert (bf16["count"], bf16["status_pass"], bf16["status_warn"], bf16["status_fail"]) == (
        5,
        3,
        1,
        1,
    )
    assert summary.checks["ecc"] == {
        "count": 5,
        "ratios": 0,
        "ratios_ignored": 0,
        "ratio_median": None,
        "ratio_p10": None,
        "ratio_p90": None,
        "status_pass": 5,
    }
    assert summary.failing_hosts == ["d"]


def test_the_review_rows_agree_with_the_store_summary(store: MemoryStore, shipped: Catalog) -> None:
    review = build_review(from_store(store), shipped)
    (row,) = [r for r in review.ratios if r.accelerator == "h200-sxm"]
    (summary,) = store.fleet("h200-sxm")
    bf16 = summary.checks["matmul_bf16"]
    assert row.check == "matmul_bf16" and row.unit == "TFLOP/s"
    assert (row.median, row.p10, row.p90) == (
        bf16["ratio_median"],
        bf16["ratio_p10"],
        bf16["ratio_p90"],
    )
    assert row.median == pytest.approx(MEDIAN) and row.band == "pass"
    assert (row.reports, row.failed, row.warned) == (5, 1, 1)
    flagged = {o.host for o in review.outliers if o.accelerator == "h200-sxm"}
    assert flagged == set(summary.failing_hosts) == {"d"}


def test_a_run_without_a_gpu_is_filed_under_no_accelerator(store: MemoryStore) -> None:
    # a real run on an H200, for contrast
    h200 = store.add(ProbeReport.model_validate_json(H200_RUN.read_text()))
    assert h200.accelerator == "h200-sxm"
    cpu = store.add(cpu_machine_report())
    assert cpu.accelerator is None and cpu.verdict == "error"
    unfiled = [s for s in store.fleet() if s.accelerator is None]
    assert [(s.reports, s.hosts, s.verdicts) for s in unfiled] == [(2, 1, {"error": 2})]


def test_the_review_counts_a_machine_without_a_gpu_as_a_host_not_a_gpu(
    store: MemoryStore, shipped: Catalog
) -> None:
    inv = build_review(from_store(store), shipped).inventory
    assert (inv.hosts, inv.hosts_without_gpu, inv.gpus) == (6, 1, 5)
    assert inv.gpus_by_accelerator == [("h200-sxm", 5)]
    assert inv.latest_verdicts == {"fail": 1, "pass": 4}  # per GPU: the CPU run is none
    assert inv.verdicts == {"error": 1, "fail": 1, "pass": 4}  # every report


def test_host_medians_and_unknown_accelerators() -> None:
    """Per host: its own median ratio; runs matched to no accelerator keep their key (None)."""
    runs = [
        (None, "x", [("d2d", "pass", 90.0, 100.0, "GB/s")]),
        (None, "x", [("d2d", "fail", 50.0, 100.0, "GB/s")]),
        (None, "x", [("d2d", "pass", 80.0, 100.0, "GB/s")]),
        ("h100-sxm", "y", [("d2d", "pass", 10.0, 0.0, "GB/s")]),  # expected 0: no ratio
    ]
    found = fleet_statistics(runs)
    assert list(found.checks) == [("h100-sxm", "d2d"), (None, "d2d")]  # None sorts last
    (x,) = [h for h in found.hosts if h.host == "x"]
    assert (x.runs, x.failed, x.median) == (3, 1, pytest.approx(0.80))  # of 0.5, 0.8, 0.9
    (y,) = [h for h in found.hosts if h.host == "y"]
    assert (y.runs, y.failed, y.median) == (1, 0, None)
    assert found.checks[("h100-sxm", "d2d")].ratios == 0
    assert found.failing_hosts(None) == ["x"] and found.failing_hosts("h100-sxm") == []
