"""The fleet review: analysis (outliers, savings, efficiency, workload costs) with hand-worked
numbers, SVG and HTML escaping, the page's sections, the CLI end to end, and GET /v1/review."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import markupsafe
import pytest
from fastapi.testclient import TestClient

from advisor import Catalog, load_catalog
from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.catalog.models import Accelerator, InstanceType, Price, WorkloadProfile
from advisor.fleet.digest import digest_of
from advisor.fleet.records import CheckResult, GpuRecord, ProbeRecord, probe_record
from advisor.perf.calibration import LINK_CHECK, NETWORK_CHECK, Calibration
from advisor.perf.efficiency import relative_efficiency
from advisor.planning.estimate import estimate
from advisor.request import EstimateRequest
from advisor.review import build_review, from_dir, render_html
from advisor.review.analysis import band, find_outliers, named_statistics
from advisor.review.costs import (
    GB_PER_MIB,
    CostedJob,
    commitments,
    savings,
    workload_costs,
)
from advisor.review.data import GpuUsage, ReviewData, UsageRecord
from advisor.review.html import templates
from advisor.review.svg import Bar, RatioBar, bar_chart, ratio_chart
from probes.report import ProbeReport
from tests import synthetic_fleet as synthetic
from tests.api_server import live_server
from tests.factories import TODAY, acc, inst, price
from tests.memory_store import MemoryStore
from tests.test_sized import LLAMA3_8B_P5_HOURS

HOURS_PER_MONTH = 730  # by hand: the month cloud price calculators use (365 x 24 / 12)

FIXTURES = Path(__file__).parents[1] / (
    "benchmarks/results/probe-2026-11-30-nvidia-h200-driver580.159.04-torch2.11.0+cu130"
)
TOKEN = "review-t0ken"
SECTIONS = ("inventory", "measured", "outliers", "savings", "workloads")


# --- helpers ------------------------------------------------------------------------------------


def rec(
    host: str, accelerator: str, checks: dict[str, tuple[float | None, float | None, str]]
) -> ProbeRecord:
    return ProbeRecord(
        id=f"{host}-{len(checks)}",
        host=host,
        accelerator=accelerator,
        matched=accelerator,
        verdict="fail" if any(s == "fail" for _, _, s in checks.values()) else "pass",
        created_at="2026-11-30T00:00:00Z",
        driver_version="580.159.04",
        gpu_name=None,
        gpu_id=f"{host}#0",
        checks=tuple(CheckResult(n, s, m, e, "TFLOP/s") for n, (m, e, s) in checks.items()),
        gpus=(GpuRecord(f"{host}#0", 0, None, "pass"),),
    )


def fleet(
    ratios: dict[str, float], check: str = "matmul_bf16", acc_id: str = "big"
) -> list[ProbeRecord]:
    return [rec(h, acc_id, {check: (r * 100, 100.0, band(r))}) for h, r in ratios.items()]


PRETRAIN = {  # scales out; at least 8 GPUs; MFU 0.4
    "id": "pretrain",
    "description": "t",
    "job": "train",
    "form_factors": ["datacenter"],
    "scale_out": True,
    "default_gpu_count": 8,
    "key_precision": "bf16",
    "rationale": "t",
    "sizing": "training",
    "efficiency": 0.4,
}
FINETUNE = {**PRETRAIN, "id": "finetune", "scale_out": False, "default_gpu_count": 0}


def tiny_catalog() -> Catalog:
    """Three accelerators, five instance types, two training profiles; per-GPU prices worked
    out by hand below."""
    accs = [
        acc("big", memory_gb=80, peak_tflops={"bf16": 989, "fp16": 989}),
        acc("small", memory_gb=24, peak_tflops={"bf16": 121, "fp16": 121}),
        acc("old", memory_gb=16, peak_tflops={"fp16": 65}),
    ]
    its = [
        inst("big8", "big", 8, [price("us-east-1", 80), price("eu-west-1", 64)]),
        inst("big1", "big", 1, [price("us-east-1", 12)]),
        inst("small1", "small", 1, [price("us-east-1", 1.0), price("eu-west-1", 0.9)]),
        inst("small4", "small", 4, [price("us-east-1", 3.5), price("us-east-1", 0.5, "spot")]),
        inst("old1", "old", 1, [price("us-east-1", 0.3)]),
    ]
    return Catalog(
        accelerators={a["id"]: Accelerator.model_validate(a) for a in accs},
        instance_types={i["id"]: InstanceType.model_validate(i) for i in its},
        workloads={w["id"]: WorkloadProfile.model_validate(w) for w in (PRETRAIN, FINETUNE)},
    )


def gpu(
    finding: str, memory_gb: float | None, p95: float | None, accelerator: str | None = "big"
) -> GpuUsage:
    return GpuUsage(
        index=0,
        uuid=None,
        name=None,
        accelerator=accelerator,
        util_mean_pct=p95,
        util_p95_pct=p95,
        memory_used_max_mib=None if memory_gb is None else memory_gb / GB_PER_MIB,
        memory_total_mib=80 / GB_PER_MIB,
        finding=finding,
        reason_codes=("GPU_UTIL_LOW",),
        evidence=(),
    )


# The real H200 runs, by name: "full" and "quick" pass, "expect-h200" passes its --expect,
# "expect-mi300x" fails (gpu_model, matmul_fp32, matmul_fp8: an H200 is not an MI300X).
REAL_RUNS = ("expect-h200", "expect-mi300x", "full", "quick")
SICK = 3  # the synthetic fleet's one throttled host (by index); every other host is well


def real_run(name: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((FIXTURES / f"probe-{name}.json").read_text())
    return report


def healthy_fleet(catalog: Catalog, n_reports: int, n_hosts: int) -> list[dict[str, Any]]:
    """Grown from the passing full run: no host is sick, no check fails."""
    return synthetic.probe_reports(catalog, real_run("full"), n_reports, n_hosts, sick={})


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def reports_dir(tmp_path_factory: pytest.TempPathFactory, catalog: Catalog) -> Path:
    """The four real H200 reports, a synthetic fleet of 300 runs on 30 hosts grown from the
    passing full run with exactly one throttled host (SICK), its utilisation reports."""
    d = tmp_path_factory.mktemp("reports")
    for name in REAL_RUNS:
        (d / f"real-{name}.json").write_text(json.dumps(real_run(name)))
    fleet = synthetic.probe_reports(catalog, real_run("full"), 300, 30, sick={SICK: "throttled"})
    for i, r in enumerate(fleet):
        (d / "fleet" / f"p-{i:03d}.json").parent.mkdir(exist_ok=True)
        (d / "fleet" / f"p-{i:03d}.json").write_text(json.dumps(r))
    for i, u in enumerate(synthetic.utilisation_reports(catalog, 30)):
        (d / f"u-{i:02d}.json").write_text(json.dumps(u))
    (d / "notes.json").write_text('{"hello": "not a report"}')
    (d / "broken.json").write_text("{not json")
    return d


# --- bands, fleet statistics, outliers ----------------------------------------------------------


@pytest.mark.parametrize(
    ("ratio", "expected"),
    [
        (1.02, "pass"),
        (0.90, "pass"),
        (0.8999, "warn"),
        (0.75, "warn"),
        (0.7499, "fail"),
        (None, "none"),
    ],
)
def test_band_thresholds(ratio: float | None, expected: str) -> None:
    assert band(ratio) == expected


def test_aggregate_matches_the_service_fleet_summary(catalog: Catalog) -> None:
    """The review's per-check figures are the ones GET /v1/fleet/summary serves."""
    store = MemoryStore()
    for r in synthetic.probe_reports(catalog, real_run("expect-mi300x"), 120, 12):
        # grown from a failing run: the summary's statuses include failures
        store.add(ProbeReport.model_validate(r))
    stats, _ = named_statistics(store.fleet_digest().statistics)
    for summary in store.fleet():
        for name, st in summary.checks.items():
            mine = stats[(summary.accelerator or "unknown", name)]
            assert mine.runs == st["count"]
            for key, value in (
                ("ratio_median", mine.median),
                ("ratio_p10", mine.p10),
                ("ratio_p90", mine.p90),
            ):
                assert value == pytest.approx(st[key]) if st[key] is not None else value is None


STEADY = {f"h{i:02d}": 1.0 + (i % 5 - 2) * 0.005 for i in range(20)}  # 0.99 .. 1.01


@pytest.mark.parametrize(
    ("extra", "flagged"),
    [
        ({"sick": 0.80}, {("sick", 0.80)}),  # far below p10 and the median
        ({"sick": 0.70, "slow": 0.85}, {("sick", 0.70), ("slow", 0.85)}),
        ({"meh": 0.98}, set()),  # below p10, but within 3% of the median: noise
        ({}, set()),
    ],
)
def test_outliers_below_p10_and_clearly_below_the_median(
    extra: dict[str, float], flagged: set[tuple[str, float]]
) -> None:
    stats, hosts = named_statistics(digest_of(fleet({**STEADY, **extra})).statistics)
    found = {(o.host, round(o.ratio or 0, 2)) for o in find_outliers(stats, hosts)}
    assert found == flagged


def test_outliers_include_failed_runs_and_checks_without_a_ratio() -> None:
    probes = fleet(STEADY)
    probes.append(rec("h00", "big", {"matmul_bf16": (101.0, 100.0, "fail")}))  # odd, but failed
    probes.append(rec("wrong", "big", {"gpu_model": (None, None, "fail")}))
    stats, hosts = named_statistics(digest_of(probes).statistics)
    out = {(o.host, o.check): o for o in find_outliers(stats, hosts)}
    assert set(out) == {("h00", "matmul_bf16"), ("wrong", "gpu_model")}
    assert out[("h00", "matmul_bf16")].why == "failed 1 of 2 runs"
    assert out[("wrong", "gpu_model")].ratio is None


def test_a_single_host_is_never_its_own_outlier() -> None:
    stats, hosts = named_statistics(
        digest_of(fleet({"only": 0.95}) + fleet({"only": 0.96})).statistics
    )
    assert find_outliers(stats, hosts) == []


# --- savings ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "instance_type", "g", "region", "suggested", "saving", "basis"),
    [
        # big8 is cheapest in eu-west-1: $64/h / 8 = $8 per GPU; small1 there costs $0.90
        (
            "instance type, any region",
            "big8",
            gpu("idle", 2, 2),
            None,
            "small1",
            (8 - 0.9) * HOURS_PER_MONTH,
            "instance type big8: $64.00/h on demand in eu-west-1 / 8 GPUs",
        ),
        # in us-east-1: $80/h / 8 = $10 per GPU; an idle GPU's 2% of 989 TFLOP/s fits
        # old1 (16 GB, fp16 65 TFLOP/s) at $0.30
        (
            "instance type, region",
            "big8",
            gpu("idle", 2, 2),
            "us-east-1",
            "old1",
            (10 - 0.3) * HOURS_PER_MONTH,
            "instance type big8: $80.00/h on demand in us-east-1",
        ),
        # no instance type: the cheapest per-GPU price of big ($8, big8 in eu-west-1)
        (
            "accelerator's cheapest",
            None,
            gpu("over_provisioned", 10, 10),
            None,
            "small1",
            (8 - 0.9) * HOURS_PER_MONTH,
            "cheapest per-GPU on-demand price of big in the catalog",
        ),
        # the one headroom rule (90% usable, as the estimates): 21.6 GB is small's (24 GB)
        # usable memory, so a 21.5 GB peak fits small and a 21.7 GB peak does not
        (
            "memory within small's usable share",
            "big8",
            gpu("over_provisioned", 21.5, 10),
            "us-east-1",
            "small1",
            (10 - 1.0) * HOURS_PER_MONTH,
            "instance type big8",
        ),
        (
            "memory above small's usable share",
            "big8",
            gpu("over_provisioned", 21.7, 10),
            "us-east-1",
            None,
            None,
            "instance type big8",
        ),
        # 30 GB peak: only big fits, big1 at $12 > $10: nothing cheaper
        (
            "memory too big",
            "big8",
            gpu("over_provisioned", 30, 5),
            "us-east-1",
            None,
            None,
            "instance type big8",
        ),
        # 20% of 989 TFLOP/s = 198 > small's 121: nothing cheaper
        (
            "compute too big",
            "big8",
            gpu("over_provisioned", 5, 20),
            "us-east-1",
            None,
            None,
            "instance type big8",
        ),
        # 10% of 989 = 99 <= 121: small fits; old (fp16 65) does not, though cheaper
        (
            "compute fits small",
            "big8",
            gpu("over_provisioned", 5, 10),
            "us-east-1",
            "small1",
            (10 - 1.0) * HOURS_PER_MONTH,
            "instance type big8",
        ),
        # a GPU the catalog does not know and no instance type: no price, no suggestion
        (
            "unknown GPU",
            None,
            gpu("idle", 1, 1, accelerator="mystery"),
            None,
            None,
            None,
            "unknown",
        ),
    ],
)
def test_savings_with_known_prices(
    case: str,
    instance_type: str | None,
    g: GpuUsage,
    region: str | None,
    suggested: str | None,
    saving: float | None,
    basis: str,
) -> None:
    usage = [UsageRecord("host-a", instance_type, "2026-11-30T00:00:00Z", 3600.0, (g,))]
    (s,) = savings(tiny_catalog(), usage, region)
    assert (s.suggestion.instance_type if s.suggestion else None) == suggested, case
    assert s.monthly_saving_usd == (pytest.approx(saving) if saving is not None else None), case
    assert s.current_basis.startswith(basis), (case, s.current_basis)


def test_savings_only_for_idle_and_over_provisioned_latest_report() -> None:
    old = UsageRecord("h", "big8", "2026-11-01T00:00:00Z", 1.0, (gpu("idle", 1, 1),))
    new = UsageRecord(
        "h",
        "big8",
        "2026-11-30T00:00:00Z",
        1.0,
        (gpu("optimized", 50, 80), gpu("under_provisioned", 79, 99), gpu("over_provisioned", 5, 5)),
    )
    found = savings(tiny_catalog(), [old, new], None)
    assert [s.finding for s in found] == ["over_provisioned"]  # the old idle report is superseded


def test_a_host_in_use_is_told_what_its_cheapest_term_saves_a_month() -> None:
    """big8 at $80/h on demand in us-east-1 with a 1-year term at $50 and a 3-year one at $35
    there (and $20 in eu-west-1, not its offer's region): a host on it with every GPU in use saves
    ($80 - $35) x 730 = $32,850 a month on the 3-year term; a host with an idle GPU is a saving
    of the other kind (none here), a type without a term none, and only the latest report counts
    for the suggestion; the host's other reports say how steady its use is."""
    base = tiny_catalog()
    big8 = base.instance_types["big8"]
    terms = [
        Price(region="us-east-1", purchase="reserved_1y", hourly_usd=50, as_of=TODAY, source="t"),
        Price(region="us-east-1", purchase="reserved_3y", hourly_usd=35, as_of=TODAY, source="t"),
        Price(region="eu-west-1", purchase="reserved_3y", hourly_usd=20, as_of=TODAY, source="t"),
    ]
    catalog = dataclasses.replace(
        base,
        instance_types={
            **base.instance_types,
            "big8": big8.model_copy(update={"prices": (*big8.prices, *terms)}),
        },
    )
    busy = (gpu("under_provisioned", 79, 99), gpu(None, 60, 80))  # type: ignore[arg-type]
    usage = [
        UsageRecord("busy", "big8", "2026-11-30T00:00:00Z", 1.0, busy),
        UsageRecord("mixed", "big8", "2026-11-30T00:00:00Z", 1.0, (*busy, gpu("idle", 1, 1))),
        UsageRecord("no-term", "small1", "2026-11-30T00:00:00Z", 1.0, busy),
        UsageRecord("was-idle", "big8", "2026-11-01T00:00:00Z", 1.0, (gpu("idle", 1, 1),)),
        UsageRecord("was-idle", "big8", "2026-11-30T00:00:00Z", 1.0, busy),
    ]
    found = commitments(catalog, usage, "us-east-1")
    assert [(c.host, c.term, c.term_hourly_usd) for c in found] == [
        ("busy", "reserved_3y", 35),
        ("was-idle", "reserved_3y", 35),
    ]
    assert found[0].monthly_saving_usd == pytest.approx((80 - 35) * HOURS_PER_MONTH)
    assert found[0].region == "us-east-1" and found[0].on_demand_hourly_usd == 80
    # how steady the use is: was-idle's first report found an idle GPU
    assert [(c.reports_in_use, c.reports, c.since) for c in found] == [
        (1, 1, "2026-11-30T00:00:00Z"),
        (1, 2, "2026-11-01T00:00:00Z"),
    ]
    data = ReviewData(source="t", usage=usage)
    review = build_review(data, catalog, region="us-east-1", workloads=[])
    html = render_html(review)
    assert "4c. Reservation terms for hosts in use" in html and "$32,850" in html
    assert "1 of 2 reports since 2026-11-01" in html
    assert review.to_dict()["commitments"][0]["host"] == "busy"


def test_idle_gpu_also_says_what_releasing_it_saves() -> None:
    usage = [UsageRecord("h", "big8", None, 1.0, (gpu("idle", 1, 1),))]
    (s,) = savings(tiny_catalog(), usage, "us-east-1")
    assert "releasing it instead saves $7,300/month" in s.note  # $10 x 730


# --- efficiency and workload costs ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("ratios", "median", "reports", "applied"),
    [
        ([1.0, 1.02, 0.98, 1.01, 0.99], 1.0, 5, True),
        ([0.9] * 6, 0.9, 6, True),
        ([0.5] * 4, 0.5, 4, False),  # 4 reports: fewer than 5
        ([], None, 0, False),
    ],
)
def test_fleet_calibration_applies_from_five_reports(
    ratios: list[float], median: float | None, reports: int, applied: bool
) -> None:
    data = ReviewData("test", fleet({f"h{i}": r for i, r in enumerate(ratios)}))
    review = build_review(data, tiny_catalog(), workloads=[])
    (mine,) = [f for f in review.calibration if f.accelerator == "big"]
    assert mine.ratio == (pytest.approx(median) if median is not None else None)
    assert (mine.reports, mine.applied) == (reports, applied)


def test_the_gpu_links_vote_is_shown_beside_the_matmul() -> None:
    """Node reports' all_reduce_vs_plan: one vote per host (medians 0.8, 0.85, 0.9, 0.95, 0.9 ->
    0.9), applied from five reports as the matmul's is; four reports are shown, not applied."""
    link = {"h0": 0.8, "h1": 0.85, "h2": 0.9, "h3": 0.95, "h4": 0.9}
    probes = [
        rec(h, "big", {"matmul_bf16": (99.0, 100.0, "pass"), LINK_CHECK: (r * 100, 100.0, "pass")})
        for h, r in link.items()
    ]
    (mine,) = [
        f
        for f in build_review(ReviewData("t", probes), tiny_catalog(), workloads=[]).calibration
        if f.accelerator == "big"
    ]
    assert (mine.link_ratio, mine.link_reports, mine.link_applied) == (pytest.approx(0.9), 5, True)
    review = build_review(ReviewData("t", probes[:4]), tiny_catalog(), workloads=[])
    (few,) = [f for f in review.calibration if f.accelerator == "big"]
    assert (few.link_reports, few.link_applied) == (4, False)
    assert "GPU link all-reduce measured / planned" in render_html(review)


def _hand_hours(
    peak_tflops: float,
    eff: float,
    per_node: int,
    link_gb_s: float,
    gpus: int,
    recompute: bool,
    zero_stage: int = 3,
) -> float:
    """7B parameters (a bare size: the assumed shape of 32 layers x 4,096, 32 heads), 1e11
    tokens on `gpus` GPUs under ZeRO-3, by hand (the training model, advisor/perf/training.py):
    steps of the 4M-token batch (1,024 x 4,096), ceil(1,024 / gpus) micro-batches per GPU; the
    GEMMs' 6ND (8ND recomputing) at the efficiency, causal attention's 6 (8) x 32 x 4,096 x
    4,096 per token at the attention kernels' 0.65; ZeRO-3 gathers twice and reduce-scatters
    once per micro-batch, 3 x micro x 7e9 x 2 bytes x (n-1)/n, over the link (one direction;
    25 GB/s PCIe without one) inside a node, over the 100 Gbit/s network between 1- or 4-GPU
    nodes (a ring with k GPUs per node gets k x 100/8/per-node GB/s = 12.5 GB/s). Each phase
    (forward 1/3, backward 2/3) exposes what its compute does not cover, at least 20%. Over a
    run, the goodput of its GPUs: Llama 3's interruptions per GPU-hour, each costing what makes
    its 16,384 GPUs 90% effective, 1 / (1 + gpus / 16,384 x (1/0.9 - 1)). ZeRO-1 instead
    reduce-scatters the gradients and all-gathers the weights once a step, 2 x 7e9 x 2 bytes,
    half under each phase. Each
    collective adds NCCL's latency (src/graph/tuning.cc, Simple protocol): 8.4 us + 3.4 us a
    step over the link (5.7 over PCIe), 14 us a step across nodes; ZeRO-3's 3 per layer and
    micro-batch are rings of n-1 steps; ZeRO-1's all-reduce per 25 MiB bucket takes the lower of
    the ring's 2(n-1) steps and the tree's 2 x ((per node - 1) x 4.0 + log2(nodes) x 14) us."""
    k = 8 if recompute else 6
    tokens = 4_194_304
    gemm = k * 7e9 * tokens / (gpus * peak_tflops * 1e12 * eff)
    attention = k * 32 * 4096 * 4096 * tokens / (gpus * peak_tflops * 1e12 * 0.65)
    compute = gemm + attention
    bw = link_gb_s / 2 if link_gb_s else 25.0
    if per_node < gpus:
        bw = min(bw, 100 / 8)
    micro = -(-1024 // gpus)
    on_node = min(per_node, gpus)
    nodes = gpus // on_node
    hop = 3.4 if link_gb_s else 5.7
    if zero_stage == 3:
        comm = 3 * micro * 7e9 * 2 * (gpus - 1) / gpus / (bw * 1e9)
        ring_us = 8.4 + (gpus - nodes) * hop + (nodes - 1) * 14.0
        comm += 3 * micro * 32 * ring_us * 1e-6
        shares = ((1 / 3, 1 / 3), (2 / 3, 2 / 3))  # (share of comm, share of compute) per phase
    else:
        comm = 2 * 7e9 * 2 * (gpus - 1) / gpus / (bw * 1e9)
        ring_us = 8.4 + 2 * (gpus - nodes) * hop + 2 * (nodes - 1) * 14.0
        tree_us = 8.4 + 2 * ((on_node - 1) * 4.0 + math.log2(nodes) * 14.0)
        comm += math.ceil(7e9 * 2 / (25 * 2**20)) * min(ring_us, tree_us) * 1e-6
        shares = ((1 / 2, 1 / 3), (1 / 2, 2 / 3))
    exposed = sum(max(comm * c - compute * k, 0.2 * comm * c) for c, k in shares)
    raw = 1e11 / tokens * (compute + exposed) / 3600
    return raw * (1 + gpus / 16_384 / 9)


def _hand_pipeline_hours(peak_tflops: float, dp: int, pp: int) -> float:
    """The same 7B run recomputing over DP x PP GPUs of 1-GPU nodes on the 100 Gbit/s network
    (12.5 GB/s a GPU): compute over dp x pp GPUs x (1 + bubble (pp-1)/(v m)), v = 32 layers //
    (pp x 2 layers a virtual stage) (the NeMo recipes' median), m = 1,024 / dp micro-batches;
    2 x v x m hidden states of a sequence (4,096 x 4,096 x 2 bytes) to the next stage and back,
    exposed beyond the compute but for 20%; ZeRO-1 over the DP ranks: 2 x the 7e9 / pp x 2
    bytes of gradients a rank holds x (dp-1)/dp, plus one all-reduce per 25 MiB at NCCL's tree
    latency over dp nodes of one GPU (8.4 + 2 x log2(dp) x 14 us), half under each phase."""
    tokens = 4_194_304
    gpus = dp * pp
    compute = 8 * 7e9 * tokens / (gpus * peak_tflops * 1e12 * 0.4)
    compute += 8 * 32 * 4096 * 4096 * tokens / (gpus * peak_tflops * 1e12 * 0.65)
    virtual, micro = 32 // (pp * 2), 1024 // dp
    compute *= 1 + (pp - 1) / (virtual * micro)
    pipe = 2 * virtual * micro * 4096 * 4096 * 2 / 12.5e9
    exposed = max(pipe - compute, 0.2 * pipe)
    if dp > 1:
        grads = 7e9 / pp * 2
        comm = 2 * grads * (dp - 1) / dp / 12.5e9
        comm += math.ceil(grads / (25 * 2**20)) * (8.4 + 2 * math.log2(dp) * 14) * 1e-6
        shares = ((1 / 2, 1 / 3), (1 / 2, 2 / 3))
        exposed += sum(max(comm * c - compute * k, 0.2 * comm * c) for c, k in shares)
    raw = 1e11 / tokens * (compute + exposed) / 3600
    return raw * (1 + gpus / 16_384 / 9)


def _hand_context_hours(peak_tflops: float, dp: int, cp: int, recomputed: float) -> float:
    """The same 7B run over DP x CP GPUs of 1-GPU nodes on the 100 Gbit/s network (12.5 GB/s a
    GPU) with ZeRO-3 over all of them and `recomputed` of the layers recomputed whole: (6 + 2 x
    recomputed) x N x D FLOPs; each of the 1,024 / dp micro-batches a DP rank runs gathers the
    weights twice and reduces the gradients once (3 x 7e9 x 2 bytes x (n-1)/n, n = dp x cp) in
    rings of n-1 network steps (8.4 + (n-1) x 14 us) 3 times a layer; context parallelism passes
    a sequence's keys and values (2 x 4,096 x 32 heads x 128 x 2 bytes) round its ring, (cp-1)/cp
    of them 3 times a layer and micro-batch, which only attention's compute covers (at most 80%);
    ZeRO-3's gather under the forward (1/3), the rest under the backward (2/3)."""
    tokens, gpus = 4_194_304, dp * cp
    k = 6 + 2 * recomputed
    gemm = k * 7e9 * tokens / (gpus * peak_tflops * 1e12 * 0.4)
    attention = k * 32 * 4096 * 4096 * tokens / (gpus * peak_tflops * 1e12 * 0.65)
    compute = gemm + attention
    micro = 1024 // dp
    zero3 = 3 * micro * 7e9 * 2 * (gpus - 1) / gpus / 12.5e9
    zero3 += 3 * micro * 32 * (8.4 + (gpus - 1) * 14.0) * 1e-6
    ring = 3 * 32 * micro * (2 * 4096 * 32 * 128 * 2) * (cp - 1) / cp / 12.5e9
    exposed = sum(max(zero3 * c - compute * c, 0.2 * zero3 * c) for c in (1 / 3, 2 / 3))
    exposed += max(ring - attention, 0.2 * ring)
    raw = 1e11 / tokens * (compute + exposed) / 3600
    return raw * (1 + gpus / 16_384 / 9)


def _hand_tensor_pipeline_hours(peak_tflops: float, tp: int, pp: int, per_node: int) -> float:
    """The same 7B run without recomputation over TP x PP GPUs (one data-parallel rank, TP inside
    a node over its 25 GB/s link, PP across nodes of `per_node` GPUs sharing the 12.5 GB/s
    network): compute x (1 + bubble (pp-1)/(v m)), v = 32 // (pp x 2) virtual stages, m = 1,024
    micro-batches; TP's 4 all-reduces a layer and token (no recomputation) of its 32 / pp layers'
    hidden states, 2 x (tp-1)/tp of 4,096 x 2 bytes each for all 4,194,304 tokens, 60% hidden
    under the GEMMs; PP's 2 x v x m hidden states a sequence (4,096 x 4,096 x 2 bytes / tp) over
    12.5 / per_node GB/s, exposed beyond the compute but for 20%."""
    tokens = 4_194_304
    gpus = tp * pp
    compute = 6 * 7e9 * tokens / (gpus * peak_tflops * 1e12 * 0.4)
    compute += 6 * 32 * 4096 * 4096 * tokens / (gpus * peak_tflops * 1e12 * 0.65)
    virtual, micro = 32 // (pp * 2), 1024
    compute *= 1 + (pp - 1) / (virtual * micro)
    tensor = 4 * 32 / pp * 4096 * 2 * tokens * 2 * (tp - 1) / tp / 25e9
    pipe = 2 * virtual * micro * 4096 * 4096 * 2 / tp / (12.5e9 / per_node)
    exposed = max(tensor - compute, 0.4 * tensor) + max(pipe - compute, 0.2 * pipe)
    raw = 1e11 / tokens * (compute + exposed) / 3600
    return raw * (1 + gpus / 16_384 / 9)


def test_job_cost_is_six_n_d_at_the_mfu_with_communication_times_the_nodes_price() -> None:
    """7B parameters, 1e11 tokens: 6·N·D = 4.2e21 model FLOP. The profile asks for at least 8
    GPUs, so a 1-GPU type rents 8 nodes and a 4-GPU type 2; old (16 GB, 14.4 usable) holds 112 GB
    of ZeRO-3 states and a recomputed micro-batch's 1.9 GB of activations (2 x 4,096 x 4,096 x
    32 layers + 4 x 4,096 x 50,257 fp32 logits) on 9 GPUs only. Without recomputation one
    micro-batch's activations are 19.1 GB (34 x 4,096 x 4,096 x 32 + the logits): they fit on
    big (72 GB usable) even beside ZeRO-1's 5.5 bytes a parameter (38.5 GB), which moves far
    less than ZeRO-3, so big plans ZeRO-1; not on small (21.6) or old, where ZeRO-1's 4 bytes a
    parameter kept whole (28 GB) do not fit either. Efficiency 0.4, times the fleet's 0.9 on
    `big` (10 reports). old has no bf16 but an fp16 peak of 65 TFLOP/s. A pretraining profile
    scales out, so the planner weighs pipeline stages too: on the 1-GPU types over the 100 Gbit/s
    network they move hidden states instead of ZeRO-3's weights and cost less: small1 on 8 (PP
    8), and on old1 16 nodes of DP 4 x PP 4 (ZeRO-1: the stages hold ZeRO-1's 28 GB over 4) cost
    less than ZeRO-3 on 9. Cheaper still on old1: ZeRO-3 over DP 8 x CP 2 with a quarter of the
    layers recomputed (context parallelism halves each rank's activations, which lets three
    quarters of the layers keep theirs; the recomputed forward shrinks from 2ND to 0.5ND). On
    small4's two nodes TP 4 x PP 2 holds the work without recomputation (TP inside the node, one
    stage a node) and costs less than ZeRO-3 recomputing over all eight."""
    cat = tiny_catalog()
    job = CostedJob("7B x 1e11", "pretrain", 1e11, params_b=7)
    (result,) = workload_costs(cat, [job], {"big": Calibration(0.9, 10)}, "us-east-1")
    flops = 6 * 7e9 * 1e11
    links = {i.id: i.interconnect_gb_s for i in cat.instance_types.values()}
    expected = {  # instance type: (nodes, GPUs, hours, $/h of all nodes)
        "old1": (16, 16, _hand_context_hours(65, 8, 2, 0.25), 16 * 0.3),
        "small4": (2, 8, _hand_tensor_pipeline_hours(121, 4, 2, 4), 2 * 3.5),
        "small1": (8, 8, _hand_pipeline_hours(121, 1, 8), 8 * 1.0),
        "big8": (1, 8, _hand_hours(989, 0.36, 8, links["big8"], 8, False, 1), 80),
        "big1": (8, 8, _hand_hours(989, 0.36, 1, links["big1"], 8, False, 1), 8 * 12),
    }
    # cheaper than ZeRO-3 alone on as many GPUs as it needs (9 of old's, 8 of small's)
    piped = _hand_pipeline_hours(65, 4, 4)
    assert piped * 16 * 0.3 < _hand_hours(65, 0.4, 1, 0, 9, True) * 9 * 0.3
    assert expected["old1"][2] < piped
    sharded = _hand_hours(121, 0.4, 4, links["small4"], 8, True)
    assert expected["small4"][2] < sharded
    assert expected["small1"][2] < _hand_hours(121, 0.4, 1, 0, 8, True)
    cheapest_first = sorted(expected, key=lambda k: expected[k][2] * expected[k][3])
    assert [c.instance_type for c in result.costs] == cheapest_first
    for c in result.costs:
        nodes, gpus, hours, hourly = expected[c.instance_type]
        assert (c.nodes, c.gpus) == (nodes, gpus), c.instance_type
        assert c.hours == pytest.approx(hours), c.instance_type
        assert c.cost_usd == pytest.approx(hours * hourly), c.instance_type
        assert c.usd_per_billion_tokens == pytest.approx(hours * hourly / 100)
    assert result.flops == pytest.approx(flops)
    by_type = {c.instance_type: c for c in result.costs}
    assert by_type["big8"].efficiency_source.startswith("fleet-calibrated: 0.40 x")
    assert by_type["small1"].efficiency_source == "catalog default for pretrain"
    assert result.left_out == []


def test_a_one_node_job_leaves_out_types_that_need_more_nodes() -> None:
    """112 GB of ZeRO-3 states (16 bytes x 7e9) and, per GPU, a recomputed micro-batch's 1.9 GB of
    activations and logits (the assumed shape of a bare 7B: 2 x 4,096 x 4,096 x 32 + 4 x 4,096 x
    50,257) over GPUs with 90% usable: big (72 GB) needs 2 GPUs, small (21.6 GB) 6, old (14.4
    GB) 9; only big8 holds them on one node. Each left-out line names the lighter methods, which
    the assumed shape lets the planner count."""
    cat = tiny_catalog()
    job = CostedJob("7B x 1e9", "finetune", 1e9, params_b=7)
    (result,) = workload_costs(cat, [job], {}, "us-east-1")
    assert [c.instance_type for c in result.costs] == ["big8"]
    per_gpu = (2 * 4096 * 4096 * 32 + 4 * 4096 * 50257) / 1e9
    expected = [  # (the line's start, GB of states and activations on the GPUs it needs)
        ("big1: needs 2 nodes and finetune runs on one node; ", 112 + 2 * per_gpu),
        ("old1: needs 9 nodes and finetune runs on one node; ", 112 + 9 * per_gpu),
        ("small1: needs 6 nodes and finetune runs on one node; ", 112 + 6 * per_gpu),
        ("small4: needs 2 nodes and finetune runs on one node; ", 112 + 8 * per_gpu),
    ]
    assert len(result.left_out) == len(expected)
    for line, (start, gb) in zip(result.left_out, expected, strict=True):
        assert line.startswith(start), line
        assert f"{gb:.0f} GB of training states and activations" in line, line
        # on one GPU of the 1-GPU types (LoRA's 16.5 GB, the bf16 base and the adapters' states,
        # does not fit old's 14.4); on the 4-GPU node's four, sharded
        assert "--method qlora fits" in line, line
        assert ("--method lora fits" in line) == (not start.startswith("old1")), line


@pytest.mark.usefixtures("roofline")
def test_review_and_estimate_give_one_answer_for_the_llama_fine_tune(catalog: Catalog) -> None:
    """The review's row and `advisor estimate --workload fine_tuning --model llama-3-8b --tokens
    2e9 --instance-type p5.48xlarge` agree, and both match a hand calculation: N = 8.03e9
    (Meta's Llama 3 8B model card) and D = 2e9, over 8 H100 SXM GPUs at 989.4 TFLOP/s dense
    BF16 (NVIDIA H100 Tensor Core GPU Architecture whitepaper, table "H100 SXM5": 1978.9 with
    sparsity, 989.4 dense): ZeRO-1 without recomputation (states and activations fit), the
    GEMMs' 6ND at fine_tuning's kernel efficiency 0.51, causal attention at 0.65, plus the ZeRO-1
    traffic that never hides: 7.0 h (the hand calculation is tests/test_sized.py's
    LLAMA3_8B_P5_HOURS)."""
    hand_hours = LLAMA3_8B_P5_HOURS
    review = build_review(ReviewData("empty"), catalog)
    (job,) = [w for w in review.workloads if w.label.startswith("fine-tune llama-3-8b")]
    (row,) = [c for c in job.costs if c.instance_type == "p5.48xlarge"]
    est = estimate(
        catalog,
        EstimateRequest(
            workload="fine_tuning", model="llama-3-8b", tokens=2e9, instance_type="p5.48xlarge"
        ),
    )
    assert est.hours is not None and est.cost_usd is not None
    assert (row.hours, row.cost_usd) == (est.hours, est.cost_usd)
    assert row.hours == pytest.approx(hand_hours, rel=1e-3)
    assert row.hours == pytest.approx(7.0, abs=0.05)
    assert row.cost_usd == pytest.approx(hand_hours * row.hourly_usd, rel=1e-3)
    assert row.gpus == 8 and row.nodes == 1


def test_workload_costs_cheapest_first(catalog: Catalog) -> None:
    review = build_review(ReviewData("empty"), catalog)
    assert [(w.label, w.workload) for w in review.workloads] == [
        ("fine-tune llama-3-8b on 2e9 tokens", "fine_tuning"),
        ("train a 7B model on 1e11 tokens", "large_scale_training"),
    ]
    for w in review.workloads:
        costs = [c.cost_usd for c in w.costs]
        assert costs == sorted(costs) and len(costs) >= 5
        # an empty fleet calibrates nothing: the profile's own efficiency, times the sourced
        # factor of the accelerator's generation where it differs from the calibrated Hopper
        for c in w.costs:
            factor = relative_efficiency(catalog.accelerators[c.accelerator])
            source = f"catalog default for {w.workload}"
            if factor.factor != 1.0:
                source += f" {factor.words()}"
            assert c.efficiency == pytest.approx(w.profile_efficiency * factor.factor)
            assert c.efficiency_source == source


# --- SVG and HTML -------------------------------------------------------------------------------

EVIL = "<script>alert('x')</script>&\""


def test_svg_charts_escape_text_and_are_well_formed() -> None:
    charts = [
        bar_chart([Bar(EVIL, 3.0, EVIL), Bar("ok", 1.0, "ok")], "c1", EVIL),
        ratio_chart([RatioBar(EVIL, 0.95, 0.9, 1.0, "pass", EVIL)], "c2", EVIL),
        bar_chart([], "c3", "empty"),
        ratio_chart([], "c4"),
    ]
    for svg in charts:
        assert "<script" not in svg
        root = ET.fromstring(svg)  # well-formed XML: every text was escaped
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&amp;&quot;" in charts[0]
    texts = ET.fromstring(charts[0]).itertext()
    assert any("<script>" in t for t in texts)  # what a reader sees is the original text


def section(page: str, name: str) -> str:
    found = re.search(rf'<section id="{name}">.*?</section>', page, flags=re.S)
    assert found is not None, name
    return found.group(0)


def hostile(field: str) -> str:
    """Text that breaks out of an attribute (either quote) and opens a script, named by field."""
    return f"\"'><script>alert('{field}')</script><img src=x onerror=alert(1)>"


class PageParts(HTMLParser):
    """What a browser builds from the page: element names, attributes and decoded text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.values: list[str] = []  # text and attribute values, entities decoded

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for name, value in attrs:
            self.attributes.add(name)
            self.values.append(value or "")

    def handle_data(self, data: str) -> None:
        self.values.append(data)


def test_hostile_text_from_reports_is_escaped_everywhere_on_the_page(
    catalog: Catalog, tmp_path: Path
) -> None:
    """Every text a report (or a report's file name) carries onto the page, made hostile:
    each reaches the page, as text, and opens no element or attribute anywhere."""
    # (a verdict outside pass/warn/fail/error is refused by the report model: never shown)
    fields = ("hostname", "driver", "check", "unit", "usage-host", "instance-type")
    fields += ("reason-code",)
    report = real_run("expect-mi300x")  # it fails gpu_model: its host is an outlier
    report["inventory"]["hostname"] = hostile("hostname")
    report["inventory"]["driver_version"] = hostile("driver")
    ratio_checks = [c for c in report["checks"] if c.get("measured") and c.get("expected")]
    ratio_checks[0]["name"] = hostile("check")
    ratio_checks[0]["unit"] = hostile("unit")
    (tmp_path / "probe.json").write_text(json.dumps(report))
    for i, u in enumerate(synthetic.utilisation_reports(catalog, 3, share=1.0)):
        u["host"] = hostile("usage-host") + u["host"]
        u["instance_type"] = hostile("instance-type")
        for g in u["gpus"]:
            g["reason_codes"] = [hostile("reason-code"), *g["reason_codes"]]
        (tmp_path / f"usage-{i}.json").write_text(json.dumps(u))
    file_name = hostile("file-name").replace("/", "|")  # a file name has no "/"
    (tmp_path / f"{file_name}.json").write_text("{}")  # not a report: a note names it
    data = from_dir(tmp_path)
    assert {o.host for o in build_review(data, catalog).outliers} == {hostile("hostname")}
    page = render_html(build_review(data, catalog))

    parts = PageParts()
    parts.feed(page)
    assert parts.tags.isdisjoint({"script", "img", "iframe", "object", "embed", "link"})
    assert not {a for a in parts.attributes if a.startswith("on") or a == "src"}
    shown = "\n".join(parts.values)
    for field in fields:  # each reached the page, as text a reader sees
        assert f"<script>alert('{field}')</script>" in shown, field
    assert file_name in shown
    assert "<script" not in page and "<img" not in page
    for name in ("outliers", "savings", "inventory", "measured"):
        assert "&lt;script&gt;" in section(page, name), name
    for svg in re.findall(r"<svg.*?</svg>", page, flags=re.S):
        ET.fromstring(svg)  # well-formed: the charts escaped their text too


def test_the_page_comes_from_autoescaping_templates_in_the_package() -> None:
    """Escaping is the template engine's default, not every call site's duty; the templates
    ship inside the package and jinja2 is a dependency of it."""
    env = templates()
    assert env.autoescape is True
    assert env.from_string("<p title='{{ x }}'>{{ x }}</p>").render(x=hostile("t")) == (
        "<p title='{0}'>{0}</p>".format(markupsafe.escape(hostile("t")))
    )
    shipped = resources.files("advisor.review") / "templates"
    assert {"review.html.j2", "macros.html.j2", "review.css"} <= {p.name for p in shipped.iterdir()}
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert any(d.startswith("jinja2") for d in pyproject["project"]["dependencies"])


def test_only_the_throttled_host_is_an_outlier(catalog: Catalog) -> None:
    """A fleet grown from a passing run, one host throttled (matmuls at 72-86% of the rest):
    that host, and no other, is flagged, and only for matmul checks."""
    n_hosts, sick = 12, 5
    reports = synthetic.probe_reports(
        catalog, real_run("full"), 120, n_hosts, sick={sick: "throttled"}
    )
    data = ReviewData(
        "test", [probe_record(str(i), ProbeReport.model_validate(r)) for i, r in enumerate(reports)]
    )
    outliers = build_review(data, catalog, workloads=[]).outliers
    sick_host = synthetic.hosts(n_hosts)[sick].name
    assert {o.host for o in outliers} == {sick_host}
    assert {o.check for o in outliers} <= set(synthetic.MATMULS)
    assert {"matmul_bf16", "matmul_fp16"} <= {o.check for o in outliers}


def test_a_healthy_fleet_has_no_outliers(catalog: Catalog) -> None:
    reports = healthy_fleet(catalog, 120, 12)
    data = ReviewData(
        "test", [probe_record(str(i), ProbeReport.model_validate(r)) for i, r in enumerate(reports)]
    )
    assert build_review(data, catalog, workloads=[]).outliers == []


def test_page_has_every_section_and_makes_no_requests(reports_dir: Path, catalog: Catalog) -> None:
    review = build_review(from_dir(reports_dir), catalog)
    page = render_html(review)
    for name in SECTIONS:
        assert f'<section id="{name}">' in page
    for heading in (
        "1. Fleet inventory",
        "2. Measured / expected",
        "3. Outlier hosts",
        "4. Idle and over-provisioned GPUs",
        "5. Cost per unit of work",
    ):
        assert heading in page
    assert page.count("<svg") >= 5  # GPUs, ratios, savings, one per workload
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "<script" not in page and "<link" not in page and "<img" not in page
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}  # the SVG namespace is a name, not a request
    # the real runs' host "vm" failed its --expect mi300x run; the throttled host is slow
    assert {o.host for o in review.outliers} == {"vm", synthetic.hosts(30)[SICK].name}
    assert review.savings and review.ratios
    assert {n for n in review.notes} >= {
        "notes.json: not a valid probe report (created_at: Field required), left out",
        "broken.json: not readable JSON (JSONDecodeError), left out",
    }


def test_the_stored_reading_gives_the_whole_models_records() -> None:
    """The store reads each stored text through StoredView (only what the review keeps);
    every recorded GPU probe and node report, a CPU machine's and a node report with a failed rank
    give the same record as through the whole ProbeReport."""
    from advisor.fleet.records import StoredView

    root = Path(__file__).parents[1]
    texts = [p.read_text() for p in sorted(FIXTURES.glob("probe-*.json"))]
    node = root / (
        "benchmarks/results/node-probe-2026-12-01-nvidia-h200-driver580.159.04-torch2.11.0+cu130"
    )
    texts += [p.read_text() for p in sorted(node.glob("*.json")) if '"checks"' in p.read_text()]
    texts.append((root / "tests/data/probe-report-cpu-machine.json").read_text())
    two = next(b for b in map(json.loads, texts) if b.get("gpu_verdicts"))
    one = two["gpu_verdicts"][0]
    two["gpu_verdicts"] = [one, {**one, "gpu": 1, "uuid": "GPU-two", "verdict": "fail"}]
    two["failed_ranks"] = [{"rank": 1, "gpu": 1, "detail": "exit 9"}]
    texts.append(json.dumps(two))
    assert len(texts) >= 10
    for i, text in enumerate(texts):
        whole = probe_record(str(i), ProbeReport.model_validate_json(text))
        assert probe_record(str(i), StoredView.model_validate_json(text)) == whole, i
    last = probe_record("f", StoredView.model_validate_json(texts[-1]))
    assert (len(last.gpus), last.gpus[1].verdict, last.failed_ranks) == (2, "fail", 1)


def test_from_dir_reads_probe_and_utilisation_reports(reports_dir: Path) -> None:
    data = from_dir(reports_dir)
    assert len(data.probes) == 304 and len(data.usage) > 5
    real = [p for p in data.probes if p.host == "vm"]
    # as the store files them: by what was measured, never by what --expect named
    assert {p.accelerator for p in real} == {"h200-sxm"}
    assert {p.matched for p in real} == {"h200-sxm"}  # what the GPU really is
    assert all(p.driver_version == "580.159.04" for p in real)


def test_inventory_counts_each_gpu_once(reports_dir: Path, catalog: Catalog) -> None:
    """Counted from the fixture: the 4 real runs are one H200 (one UUID) on host "vm"; each of
    the 30 synthetic hosts runs 10 reports on devices (i // 30) % GPUs for i = 0..299, so every
    one of its 8 (L40S: 4) GPUs reports at least once."""
    inv = build_review(from_dir(reports_dir), catalog).inventory
    per_accelerator: dict[str, int] = {"h200-sxm": 1}
    for h in synthetic.hosts(30):
        per_accelerator[h.accelerator] = per_accelerator.get(h.accelerator, 0) + h.gpus
    assert inv.reports == 304
    assert dict(inv.gpus_by_accelerator) == per_accelerator
    assert inv.gpus == 1 + sum(h.gpus for h in synthetic.hosts(30))
    assert inv.hosts == 31
    # every run passes but the throttled host's 10 (matmuls below 90%) and the mi300x run
    assert inv.verdicts["pass"] == 290 + 3
    assert inv.verdicts.get("fail", 0) + inv.verdicts.get("warn", 0) == 10 + 1


NODE_REPORT = Path(__file__).parents[1] / (
    "benchmarks/results/node-probe-2026-12-01-nvidia-h200-driver580.159.04-torch2.11.0+cu130/"
    "node-quick.json"
)


def test_a_node_report_counts_every_gpu_and_lists_the_node(
    tmp_path: Path, catalog: Catalog
) -> None:
    """The recorded one-GPU node report, widened to eight GPUs of which GPU 5 failed: eight GPUs
    in the inventory, one node row naming GPU 5; an older single-GPU report of another host."""
    body = json.loads(NODE_REPORT.read_text())
    body["verdict"] = "fail"
    body["gpu_verdicts"] = [
        {
            "gpu": i,
            "uuid": f"GPU-n{i}",
            "name": "NVIDIA H200",
            "rank": i,
            "verdict": "fail" if i == 5 else "pass",
        }
        for i in range(8)
    ]
    body["failed_ranks"] = [{"rank": 7, "detail": "stopped"}]
    (tmp_path / "node.json").write_text(json.dumps(body))
    single = json.loads((FIXTURES / "probe-quick.json").read_text())
    single["inventory"]["hostname"] = "other"
    (tmp_path / "single.json").write_text(json.dumps(single))
    review = build_review(from_dir(tmp_path), catalog)
    assert review.inventory.gpus == 9 and review.inventory.hosts == 2
    assert review.inventory.latest_verdicts == {"fail": 1, "pass": 8}
    first, second = review.nodes
    assert (first.host, first.verdict, first.gpus, first.failed_gpus) == ("vm", "fail", 8, [5])
    assert first.gpu_verdicts == {"fail": 1, "pass": 7} and first.failed_ranks == 1
    assert (second.host, second.gpus) == ("other", 1)
    page = render_html(review)
    assert "<h3>Nodes</h3>" in page and "GPU 5" in page


# --- CLI ----------------------------------------------------------------------------------------


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "advisor", "review", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_writes_the_page_from_a_reports_dir(reports_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "review.html"
    p = run("--reports", str(reports_dir), "--output", str(out), "--catalog-region", "us-east-1")
    assert p.returncode == 0, p.stderr
    assert "304 probe reports from 31 hosts" in p.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and all(f'id="{s}"' in page for s in SECTIONS)
    assert "prices: on demand, us-east-1" in page
    assert not list(tmp_path.glob(".*.tmp"))


def test_cli_json(reports_dir: Path) -> None:
    p = run("--reports", str(reports_dir), "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["inventory"]["reports"] == 304
    assert {"ratios", "outliers", "savings", "workloads", "calibration"} <= set(data)
    assert data["workloads"][0]["costs"][0]["cost_usd"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "exactly one of --server URL or --reports DIR"),
        (("--reports", ".", "--server", "http://x"), "exactly one of"),
        (("--reports", "/nonexistent"), "is not a directory"),
        (("--reports", ".", "--catalog-region", "us-east-9"), "did you mean 'us-east-"),
        (("--server", "ftp://x"), "needs an http(s) URL"),
    ],
)
def test_cli_bad_usage_exits_2(args: tuple[str, ...], message: str) -> None:
    p = run(*args)
    assert p.returncode == 2, p.stderr
    assert message in p.stderr and "Traceback" not in p.stderr


def test_cli_unreachable_server_exits_2_in_one_line() -> None:
    p = run("--server", "http://127.0.0.1:9", "--json")
    assert p.returncode == 2
    assert "cannot reach http://127.0.0.1:9" in p.stderr and "Traceback" not in p.stderr


# --- the service --------------------------------------------------------------------------------


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/api.db", api_tokens=(TOKEN,))  # type: ignore[arg-type]
    with TestClient(create_app(settings)) as c:
        yield c


def test_api_review_is_html(client: TestClient, catalog: Catalog) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for report in map(real_run, REAL_RUNS):
        assert client.post("/v1/probe-reports", json=report, headers=auth).status_code == 201
    for u in synthetic.utilisation_reports(catalog, 4, share=1.0):
        r = client.post("/v1/utilisation-reports", json=u, headers=auth)
        assert r.status_code == 201, r.text
    r = client.get("/v1/review")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in r.headers["content-security-policy"]
    assert all(f'<section id="{s}">' in r.text for s in SECTIONS)
    assert "<b>4</b><span>probe reports</span>" in r.text
    assert "idle or over-provisioned GPUs" in r.text
    r = client.get("/v1/review", params={"region": "europe-west4"})
    assert r.status_code == 200 and "prices: on demand, europe-west4" in r.text


def test_api_review_unknown_region_is_a_problem(client: TestClient) -> None:
    r = client.get("/v1/review", params={"region": "us-east-9"})
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "did you mean 'us-east-" in r.json()["detail"]  # us-east-1 and -2 are equally close


@pytest.mark.slow
def test_cli_review_from_a_live_server(tmp_path: Path, catalog: Catalog) -> None:
    """--server: lists the reports, fetches each body, and the utilisation reports."""
    with live_server(tmp_path, TOKEN) as server:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        reports = healthy_fleet(catalog, 520, 20)  # 2 pages
        with httpx.Client(base_url=server.base_url, headers=auth) as http:
            for r in reports:
                assert http.post("/v1/probe-reports", json=r).status_code == 201
            for u in synthetic.utilisation_reports(catalog, 20, share=1.0):
                assert http.post("/v1/utilisation-reports", json=u).status_code == 201
        p = run("--server", server.base_url, "--json", "--output", str(tmp_path / "r.html"))
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["inventory"]["reports"] == 520
    assert data["inventory"]["hosts"] == 20
    assert data["inventory"]["usage_hosts"] == 20
    assert data["source"] == f"service {server.base_url}"
    assert (tmp_path / "r.html").read_text().count("<svg") >= 5


def test_cli_review_page_is_taken_from_the_service(tmp_path: Path, catalog: Catalog) -> None:
    """--server without --json: the service builds the page from its store (one request)."""
    with live_server(tmp_path, TOKEN) as server:
        with httpx.Client(
            base_url=server.base_url, headers={"Authorization": f"Bearer {TOKEN}"}
        ) as http:
            for r in healthy_fleet(catalog, 30, 5):
                assert http.post("/v1/probe-reports", json=r).status_code == 201
        p = run("--server", server.base_url, "--output", str(tmp_path / "served.html"))
    assert p.returncode == 0, p.stderr
    assert "as served by" in p.stderr
    page = (tmp_path / "served.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") >= 3
    assert "<b>30</b><span>probe reports</span>" in page


def test_api_review_applies_the_services_min_fleet_reports(tmp_path: Path) -> None:
    """ADVISOR_MIN_FLEET_REPORTS reaches the review as it reaches /v1/estimates: with 2, the
    three real H200 runs (quick, full, expect-h200) calibrate h200-sxm; with the default 5 they
    do not. A review that ignored the setting would say "fewer than 5" in both."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    pages = {}
    for min_reports in (2, 5):
        settings = Settings(  # type: ignore[call-arg]
            database_url=f"sqlite:///{tmp_path}/api{min_reports}.db",
            api_tokens=(TOKEN,),
            min_fleet_reports=min_reports,
        )
        with TestClient(create_app(settings)) as c:
            for report in map(real_run, REAL_RUNS):
                assert c.post("/v1/probe-reports", json=report, headers=auth).status_code == 201
            pages[min_reports] = c.get("/v1/review").text
    assert "where at least 2 reports give one" in pages[2]
    assert "fewer than 5" not in pages[2] and "fewer than 5" in pages[5]


def test_the_networks_vote_is_shown_beside_the_links() -> None:
    """Several-node probes' cross_node_all_reduce_vs_plan: one vote per host (medians 0.7, 0.75,
    0.8, 0.85, 0.8 -> 0.8), applied from five reports; four are shown, not applied."""
    network = {"h0": 0.7, "h1": 0.75, "h2": 0.8, "h3": 0.85, "h4": 0.8}
    probes = [
        rec(
            h,
            "big",
            {"matmul_bf16": (99.0, 100.0, "pass"), NETWORK_CHECK: (r * 100, 100.0, "warn")},
        )
        for h, r in network.items()
    ]
    review = build_review(ReviewData("t", probes), tiny_catalog(), workloads=[])
    (mine,) = [f for f in review.calibration if f.accelerator == "big"]
    assert (mine.network_ratio, mine.network_reports, mine.network_applied) == (
        pytest.approx(0.8),
        5,
        True,
    )
    assert mine.link_ratio is None  # no GPU link measured against the plan
    review = build_review(ReviewData("t", probes[:4]), tiny_catalog(), workloads=[])
    (few,) = [f for f in review.calibration if f.accelerator == "big"]
    assert (few.network_reports, few.network_applied) == (4, False)
    assert "all-reduce across nodes measured / planned" in render_html(review)
