"""advisor.fleet.verification: a probe run against the shipped catalog, with hand-made inventories and
measurements whose right answers are worked out by hand."""

from __future__ import annotations

from typing import Any

import pytest

from advisor import Catalog
from advisor.errors import NotFoundError
from advisor.fleet.verification import (
    Verification,
    pcie_gbps,
    resolve_expect,
    verify,
    worst_verdict,
)
from probes.report import Check, Diagnosis, GpuInventory, Inventory, LoadSample, ProcessInfo
from probes.stats import Measurement, failed, summarize

H200 = "NVIDIA H200"
H100 = "NVIDIA H100 80GB HBM3"
GEN5_X16 = 3.938 * 16  # 63.008 GB/s one direction
GEN3_X16 = 0.985 * 16  # 15.76 GB/s
UNITS = {"stream_overlap": "ratio", "host_sync_penalty": "us/step"}


def gpu(**kw: Any) -> GpuInventory:
    """A healthy H200 as NVML reports it; override what a case changes."""
    base: dict[str, Any] = dict(
        index=0,
        name=H200,
        uuid="GPU-00000000-fake-h200",
        pcie_gen_current=5,
        pcie_gen_max=5,
        pcie_width_current=16,
        pcie_width_max=16,
        power_limit_w=700.0,
        power_default_limit_w=700.0,
        temperature_c=35,
        throttle_reasons=[],
        ecc_enabled=None,
        mig_enabled=False,
        processes=[],
        compute_capability="9.0",
    )
    base.update(kw)
    return GpuInventory(**base)


def inventory(
    under_load: LoadSample | None = None, device_count: int | None = 1, **gpu_kw: Any
) -> Inventory:
    return Inventory(
        hostname="test",
        python="3.11",
        device_count=device_count,
        gpu=gpu(**gpu_kw),
        under_load=under_load,
    )


def load(*reasons: str, **kw: Any) -> LoadSample:
    return LoadSample(samples=20, throttle_reasons=list(reasons), **kw)


def m(name: str, value: float, **params: Any) -> Measurement:
    unit = UNITS.get(name, "TFLOP/s" if "matmul" in name else "GB/s")
    return summarize(name, unit, [value], "median" if name in UNITS else "max", **params)


def check(result: Verification, name: str) -> Check:
    found = [c for c in result.checks if c.name == name]
    assert len(found) == 1, [c.name for c in result.checks]
    return found[0]


def names(result: Verification) -> list[str]:
    return [c.name for c in result.checks]


# -- measured figures against expectations -------------------------------------------------------

# (case guarded, measurement, --expect, inventory overrides, status, expected value)
GRADES: list[tuple[str, Measurement, str | None, dict[str, Any], str, float | None]] = [
    (
        "bf16 at 91% of the h200-sxm measured reference passes",
        m("matmul_bf16", 0.91 * 781),
        None,
        {},
        "pass",
        781,
    ),
    (
        "bf16 at exactly 90% passes (the bound is inclusive)",
        m("matmul_bf16", 0.90 * 781),
        None,
        {},
        "pass",
        781,
    ),
    ("bf16 at 80% warns", m("matmul_bf16", 0.80 * 781), None, {}, "warn", 781),
    ("bf16 at exactly 75% still warns", m("matmul_bf16", 0.75 * 781), None, {}, "warn", 781),
    ("bf16 at 50% fails", m("matmul_bf16", 0.50 * 781), None, {}, "fail", 781),
    ("fp8 has its own reference", m("matmul_fp8", 1400), None, {}, "pass", 1401),
    ("fp32 has its own reference", m("matmul_fp32", 30), None, {}, "fail", 50.8),
    ("d2d against its measured reference", m("d2d", 0.8 * 4190), None, {}, "warn", 4190),
    (
        "pinned H2D: 85% of the live Gen5 x16 link",
        m("h2d_pinned", 50.0),
        None,
        {},
        "pass",
        0.85 * GEN5_X16,
    ),
    (
        "pinned D2H far below the link fails",
        m("d2h_pinned", 20.0),
        None,
        {},
        "fail",
        0.85 * GEN5_X16,
    ),
    (
        "bidirectional: 80% of the link, both directions",
        m("bidir_pinned", 95.0),
        None,
        {},
        "pass",
        2 * 0.80 * GEN5_X16,
    ),
    (
        "the link seen under load, not the idle one, sets the expectation",
        m("h2d_pinned", 50.0),
        None,
        dict(pcie_gen_current=1, under_load=load(pcie_gen_max_seen=5, pcie_width_max_seen=16)),
        "pass",
        0.85 * GEN5_X16,
    ),
    (
        "a link that trained at Gen3 sets a Gen3 expectation",
        m("h2d_pinned", 12.5),
        None,
        dict(pcie_gen_current=3),
        "pass",
        0.85 * GEN3_X16,
    ),
    (
        "an unreadable link leaves transfers uncompared",
        m("h2d_pinned", 1.0),
        None,
        dict(pcie_gen_current=None),
        "pass",
        None,
    ),
    ("pageable copies are not compared", m("h2d_pageable", 1.0), None, {}, "pass", None),
    ("the host sync penalty is not compared", m("host_sync_penalty", 80.0), None, {}, "pass", None),
    (
        "derived: h100-sxm bf16 = 70% of its dense peak 989.5",
        m("matmul_bf16", 0.95 * 692.65),
        None,
        dict(name=H100),
        "pass",
        0.70 * 989.5,
    ),
    (
        "derived: h100-sxm bf16 at 80% of 692.65 warns",
        m("matmul_bf16", 0.80 * 692.65),
        None,
        dict(name=H100),
        "warn",
        0.70 * 989.5,
    ),
    (
        "derived: h100-sxm d2d = 85% of its 3350 GB/s",
        m("d2d", 2600),
        None,
        dict(name=H100),
        "pass",
        0.85 * 3350,
    ),
    (
        "derived: no fp8 on A100 means not compared",
        m("matmul_fp8", 100),
        None,
        dict(name="NVIDIA A100-SXM4-80GB"),
        "pass",
        None,
    ),
    (
        "--expect sets the reference even when NVML names another model",
        m("matmul_bf16", 700),
        "h100-sxm",
        {},
        "pass",
        0.70 * 989.5,
    ),
    ("overlap 0.98 passes", m("stream_overlap", 0.98), None, {}, "pass", 1.0),
    ("overlap at exactly 0.80 passes", m("stream_overlap", 0.80), None, {}, "pass", 1.0),
    ("overlap 0.6 warns", m("stream_overlap", 0.6), None, {}, "warn", 1.0),
    ("overlap at exactly 0.50 warns", m("stream_overlap", 0.50), None, {}, "warn", 1.0),
    ("overlap 0.3 fails", m("stream_overlap", 0.3), None, {}, "fail", 1.0),
]


@pytest.mark.parametrize(
    ("measurement", "expect", "inv", "status", "expected"),
    [row[1:] for row in GRADES],
    ids=[row[0] for row in GRADES],
)
def test_grades(
    shipped: Catalog,
    measurement: Measurement,
    expect: str | None,
    inv: dict[str, Any],
    status: str,
    expected: float | None,
) -> None:
    result = verify(shipped, inventory(**inv), [], [measurement], expect)
    c = check(result, measurement.name)
    assert c.status == status, c.detail
    assert c.measured == measurement.value and c.unit == measurement.unit
    if expected is None:
        assert c.expected is None
        assert "not compared" in c.detail
    else:
        assert c.expected == pytest.approx(expected)


def test_detail_names_the_ratio_and_the_basis(shipped: Catalog) -> None:
    result = verify(shipped, inventory(), [], [m("matmul_bf16", 0.80 * 781)])
    assert check(result, "matmul_bf16").detail == (
        "624.8 TFLOP/s (best of 1; median 624.8) = 80% of the expected 781.0 "
        "(h200-sxm's measured reference); below 90%"
    )
    result = verify(shipped, inventory(), [], [m("h2d_pinned", 20.0)])
    assert check(result, "h2d_pinned").detail.endswith(
        "(85% of the live Gen5 x16 link (63.0 GB/s)); below 75%"
    )
    result = verify(shipped, inventory(name=H100), [], [m("matmul_bf16", 700)])
    assert "(70% of h100-sxm's dense peak 989.5)" in check(result, "matmul_bf16").detail


def test_detail_reports_sustained_and_noise(shipped: Catalog) -> None:
    burst = summarize(
        "matmul_bf16", "TFLOP/s", [780.0, 700.0, 650.0, 640.0], "max", sustained=645.0
    )
    detail = check(verify(shipped, inventory(), [], [burst]), "matmul_bf16").detail
    assert detail.startswith(
        "780.0 TFLOP/s (best of 4; median 675.0); sustained 645.0 (83% of burst)"
    )
    assert "; noisy (cv 8%)" in detail


# -- findings from the inventory ----------------------------------------------------------------

PROCS = [ProcessInfo(pid=4242, name="trainer", used_memory_mib=1024.0)]

# (case guarded, inventory arguments, the finding's check name, status or None = no such check,
#  text its detail must contain)
FINDINGS: list[tuple[str, dict[str, Any], str, str | None, str]] = [
    ("link at its maximum", {}, "pcie_link", "pass", "PCIe link at its maximum, Gen5 x16"),
    (
        "link generation below its maximum, read idle",
        dict(pcie_gen_current=3),
        "pcie_link",
        "warn",
        "PCIe link runs at Gen3 x16, below its maximum Gen5 x16",
    ),
    (
        "link width below its maximum",
        dict(pcie_width_current=8),
        "pcie_link",
        "warn",
        "PCIe link runs at Gen5 x8, below its maximum Gen5 x16",
    ),
    (
        "idle link down-trained but Gen5 seen under load",
        dict(pcie_gen_current=2, under_load=load(pcie_gen_max_seen=5)),
        "pcie_link",
        "pass",
        "at its maximum",
    ),
    (
        "thermal throttling under load",
        dict(under_load=load("hw_thermal_slowdown", "sw_power_cap", temperature_max_c=88)),
        "throttling",
        "warn",
        "thermal throttling under load (hw_thermal_slowdown; max 88 C)",
    ),
    (
        "hardware power slowdown under load",
        dict(under_load=load("hw_power_brake_slowdown")),
        "throttling",
        "warn",
        "hardware power slowdown under load (hw_power_brake_slowdown)",
    ),
    (
        "sw_power_cap alone is normal under full load",
        dict(under_load=load("sw_power_cap")),
        "throttling",
        "pass",
        "sw_power_cap (the GPU held its power limit: normal under full load)",
    ),
    (
        "nothing seen under load: no throttling check",
        dict(under_load=load()),
        "throttling",
        None,
        "",
    ),
    (
        "without a load sample the idle reasons are judged",
        dict(throttle_reasons=["sw_thermal_slowdown"], temperature_c=91),
        "throttling",
        "warn",
        "(sw_thermal_slowdown; max 91 C)",
    ),
    (
        "power limit lowered below the default",
        dict(power_limit_w=500.0),
        "power_limit",
        "warn",
        "power limit lowered to 500 W (default 700 W)",
    ),
    ("power limit within 5% of the default", dict(power_limit_w=680.0), "power_limit", None, ""),
    ("power limit unreadable", dict(power_limit_w=None), "power_limit", None, ""),
    (
        "other processes on the GPU",
        dict(processes=PROCS),
        "other_processes",
        "warn",
        "pid 4242 (trainer, 1024 MiB)",
    ),
    ("no other processes", {}, "other_processes", None, ""),
    ("ECC off", dict(ecc_enabled=False), "ecc", "warn", "ECC is off"),
    ("ECC on", dict(ecc_enabled=True), "ecc", "pass", "ECC is on"),
    ("ECC unreadable: no check", dict(ecc_enabled=None), "ecc", None, ""),
    ("MIG on", dict(mig_enabled=True), "mig", "warn", "MIG is enabled"),
    ("MIG off: no check", dict(mig_enabled=False), "mig", None, ""),
]


@pytest.mark.parametrize(
    ("inv", "name", "status", "text"),
    [row[1:] for row in FINDINGS],
    ids=[row[0] for row in FINDINGS],
)
def test_findings(
    shipped: Catalog, inv: dict[str, Any], name: str, status: str | None, text: str
) -> None:
    result = verify(shipped, inventory(**inv), [], [])
    if status is None:
        assert name not in names(result)
        return
    c = check(result, name)
    assert c.status == status and text in c.detail, c.detail
    expected_verdict = "warn" if status == "warn" else "pass"
    assert result.verdict == expected_verdict


def test_a_failing_transfer_names_the_slow_link_as_a_likely_cause(shipped: Catalog) -> None:
    inv = inventory(pcie_gen_current=3, under_load=None)
    result = verify(shipped, inv, [], [m("h2d_pinned", 5.0), m("matmul_bf16", 781)])
    link = check(result, "pcie_link")
    assert link.status == "warn"
    assert link.measured == pytest.approx(GEN3_X16) and link.expected == pytest.approx(GEN5_X16)
    h2d = check(result, "h2d_pinned")
    assert h2d.status == "fail"
    assert h2d.detail.endswith(
        "; likely causes: PCIe link runs at Gen3 x16, below its maximum Gen5 x16"
    )
    assert "likely causes" not in check(result, "matmul_bf16").detail  # only on failing checks
    assert result.verdict == "fail"


def test_every_warning_finding_is_a_likely_cause(shipped: Catalog) -> None:
    inv = inventory(under_load=load("hw_thermal_slowdown"), power_limit_w=400.0, processes=PROCS)
    result = verify(shipped, inv, [], [m("matmul_bf16", 400)])
    detail = check(result, "matmul_bf16").detail
    causes = detail.split("; likely causes: ", 1)[1]
    assert "thermal throttling" in causes and "power limit lowered to 400 W" in causes
    assert "pid 4242" in causes


def test_checks_come_model_first_then_measurements_then_findings(shipped: Catalog) -> None:
    result = verify(
        shipped,
        inventory(ecc_enabled=True),
        [],
        [m("matmul_bf16", 781), m("h2d_pinned", 54.0)],
        "p5en.48xlarge",
    )
    assert names(result) == [
        "gpu_model",
        "gpu_count",
        "matmul_bf16",
        "h2d_pinned",
        "pcie_link",
        "ecc",
    ]


# -- the model and --expect --------------------------------------------------------------------


def test_matched_model_passes(shipped: Catalog) -> None:
    result = verify(shipped, inventory(), [], [m("matmul_bf16", 781)])
    model = check(result, "gpu_model")
    assert model.status == "pass" and model.detail == "NVML reports 'NVIDIA H200': catalog h200-sxm"
    assert (result.accelerator, result.expected_accelerator, result.verdict) == (
        "h200-sxm",
        None,
        "pass",
    )


def test_expect_the_model_it_is(shipped: Catalog) -> None:
    result = verify(shipped, inventory(), [], [], "h200-sxm")
    assert check(result, "gpu_model").status == "pass"
    assert (result.accelerator, result.expected_accelerator, result.verdict) == (
        "h200-sxm",
        "h200-sxm",
        "pass",
    )


def test_expect_another_model_fails(shipped: Catalog) -> None:
    result = verify(shipped, inventory(), [], [m("matmul_bf16", 781)], "h100-sxm")
    model = check(result, "gpu_model")
    assert model.status == "fail"
    assert model.detail == (
        "expected NVIDIA H100 SXM5 80GB ('NVIDIA H100 80GB HBM3'), "
        "but NVML reports 'NVIDIA H200': wrong model"
    )
    assert (result.accelerator, result.expected_accelerator, result.verdict) == (
        "h200-sxm",
        "h100-sxm",
        "fail",
    )


# (case guarded, GPUs the driver sees, gpu_count status)
GPU_COUNTS: list[tuple[str, int | None, str]] = [
    ("all 8 GPUs of a p5en.48xlarge", 8, "pass"),
    ("one GPU of eight missing", 7, "fail"),
    ("a single GPU", 1, "fail"),
    ("count unreadable", None, "fail"),
]


@pytest.mark.parametrize(
    ("visible", "status"), [row[1:] for row in GPU_COUNTS], ids=[row[0] for row in GPU_COUNTS]
)
def test_expect_an_instance_type(shipped: Catalog, visible: int | None, status: str) -> None:
    result = verify(shipped, inventory(device_count=visible), [], [], "p5en.48xlarge")
    assert result.expected_accelerator == "h200-sxm"
    assert check(result, "gpu_model").status == "pass"
    count = check(result, "gpu_count")
    assert (count.status, count.measured, count.expected, count.unit) == (
        status,
        visible,
        8,
        "GPUs",
    )
    assert count.detail == f"{visible} GPU(s) visible to the driver; p5en.48xlarge has 8"
    assert result.verdict == status


def test_expect_an_instance_of_another_model(shipped: Catalog) -> None:
    result = verify(shipped, inventory(device_count=8), [], [], "p5.48xlarge")
    assert result.expected_accelerator == "h100-sxm"
    assert check(result, "gpu_model").status == "fail" and result.verdict == "fail"


# (case guarded, --expect, message the NotFoundError must contain)
UNKNOWN_EXPECT = [
    ("a typo of an accelerator id", "h200-sxn", "(did you mean 'h200-sxm'?)"),
    ("a typo of an instance type id", "p5en.48xlarg", "(did you mean 'p5en.48xlarge'?)"),
    ("nothing close", "nope", "--expect 'nope' is no GPU accelerator or GPU instance type"),
]


@pytest.mark.parametrize(
    ("expect", "text"), [row[1:] for row in UNKNOWN_EXPECT], ids=[row[0] for row in UNKNOWN_EXPECT]
)
def test_unknown_expect(shipped: Catalog, expect: str, text: str) -> None:
    with pytest.raises(NotFoundError) as info:
        verify(shipped, inventory(), [], [], expect)
    assert text in str(info.value)


def test_cpu_instance_expect_does_not_suggest_itself(shipped: Catalog) -> None:
    with pytest.raises(NotFoundError) as info:
        resolve_expect(shipped, "m7i.xlarge")
    assert "did you mean 'm7i.xlarge'" not in str(info.value)


def test_unknown_nvml_name_warns_and_leaves_matmul_uncompared(shipped: Catalog) -> None:
    result = verify(
        shipped,
        inventory(name="NVIDIA Future GPU"),
        [],
        [m("matmul_bf16", 500), m("d2d", 3000), m("h2d_pinned", 54.0)],
    )
    model = check(result, "gpu_model")
    assert model.status == "warn" and "'NVIDIA Future GPU'" in model.detail
    for name in ("matmul_bf16", "d2d"):
        c = check(result, name)
        assert (c.status, c.expected) == ("pass", None)
        assert c.detail.endswith("; not compared (no catalog accelerator matched)")
    # the link is still known, so transfers are still compared
    assert check(result, "h2d_pinned").expected == pytest.approx(0.85 * GEN5_X16)
    assert (result.accelerator, result.verdict) == (None, "warn")


def test_nvml_name_unknown_to_nvml(shipped: Catalog) -> None:
    result = verify(shipped, inventory(name=None), [], [])
    assert check(result, "gpu_model").status == "warn"
    assert result.verdict == "warn"


def test_an_inventory_of_nones_verifies_without_crashing(shipped: Catalog) -> None:
    inv = Inventory(hostname="t", python="3.11", gpu=GpuInventory(name=H200))
    result = verify(shipped, inv, [], [m("h2d_pinned", 50.0), m("matmul_bf16", 781)])
    assert names(result) == ["gpu_model", "h2d_pinned", "matmul_bf16"]
    assert check(result, "h2d_pinned").detail.endswith(
        "not compared (the PCIe link could not be read)"
    )
    assert result.verdict == "pass"


# -- failed measurements and no GPU ------------------------------------------------------------


def test_unsupported_measurement_is_skipped(shipped: Catalog) -> None:
    fp8 = failed("matmul_fp8", "TFLOP/s", "unsupported: fp8 matmul needs compute capability 8.9")
    result = verify(shipped, inventory(), [], [fp8, m("matmul_bf16", 781)])
    c = check(result, "matmul_fp8")
    assert (c.status, c.measured, c.detail) == (
        "skip",
        None,
        "unsupported: fp8 matmul needs compute capability 8.9",
    )
    assert result.verdict == "pass"


def test_failed_measurement_is_an_error(shipped: Catalog) -> None:
    oom = failed("d2d", "GB/s", "out of memory for d2d of 256 MiB: CUDA out of memory")
    result = verify(shipped, inventory(), [], [oom, m("matmul_bf16", 781)])
    c = check(result, "d2d")
    assert (c.status, c.unit, c.detail) == ("error", "GB/s", oom.error)
    assert result.verdict == "error"


def test_diagnosis_makes_the_verdict_error_and_keeps_cpu_figures(shipped: Catalog) -> None:
    diagnosis = [
        Diagnosis(code="torch_without_cuda", message="torch 2.13.0+cpu is a CPU-only build"),
        Diagnosis(code="nvml_library_missing", message="the NVML library was not found"),
    ]
    cpu = [
        m("cpu_matmul_fp32", 0.3),
        m("cpu_memcpy", 25.0),
        failed("cpu_other", "GB/s", "RuntimeError: boom"),
    ]
    inv = Inventory(hostname="t", python="3.11")
    result = verify(shipped, inv, diagnosis, cpu, "h200-sxm")
    assert (result.accelerator, result.expected_accelerator, result.verdict) == (
        None,
        "h200-sxm",
        "error",
    )
    assert [(c.name, c.status) for c in result.checks] == [
        ("gpu_available", "error"),
        ("gpu_available", "error"),
        ("cpu_matmul_fp32", "pass"),
        ("cpu_memcpy", "pass"),
        ("cpu_other", "error"),
    ]
    assert result.checks[0].detail == "torch_without_cuda: torch 2.13.0+cpu is a CPU-only build"
    assert result.checks[1].detail.startswith("nvml_library_missing: ")
    matmul = result.checks[2]
    assert (matmul.measured, matmul.expected, matmul.unit) == (0.3, None, "TFLOP/s")
    assert matmul.detail.endswith("(CPU, for information)")


def test_diagnosis_with_gpu_measurements_still_never_grades_them(shipped: Catalog) -> None:
    diagnosis = [Diagnosis(code="no_device", message="--device 3 but CUDA sees 1 device(s)")]
    result = verify(shipped, inventory(), diagnosis, [m("matmul_bf16", 10)])
    assert [c.status for c in result.checks] == ["error", "pass"]
    assert result.verdict == "error"


# -- the verdict -------------------------------------------------------------------------------

# (case guarded, statuses of the checks, verdict)
VERDICTS: list[tuple[str, list[str], str]] = [
    ("fail beats error and warn", ["pass", "warn", "error", "fail", "skip"], "fail"),
    ("error beats warn", ["warn", "pass", "error"], "error"),
    ("warn beats pass and skip", ["skip", "pass", "warn"], "warn"),
    ("skips alone do not fail a run", ["pass", "skip"], "pass"),
    ("no checks at all", [], "pass"),
]


@pytest.mark.parametrize(
    ("statuses", "verdict"), [row[1:] for row in VERDICTS], ids=[row[0] for row in VERDICTS]
)
def test_verdict_precedence(statuses: list[Any], verdict: str) -> None:
    checks = [Check(name=f"c{i}", status=s, detail="") for i, s in enumerate(statuses)]
    assert worst_verdict(checks) == verdict


def test_verdict_precedence_end_to_end(shipped: Catalog) -> None:
    broken = failed("d2d", "GB/s", "RuntimeError: boom")
    result = verify(
        shipped, inventory(ecc_enabled=False), [], [broken, m("matmul_bf16", 0.5 * 781)]
    )
    assert [check(result, n).status for n in ("d2d", "matmul_bf16", "ecc")] == [
        "error",
        "fail",
        "warn",
    ]
    assert result.verdict == "fail"


# (case guarded, generation, width, GB/s)
LINKS: list[tuple[str, int | None, int | None, float | None]] = [
    ("Gen5 x16", 5, 16, 63.008),
    ("Gen4 x16", 4, 16, 31.504),
    ("Gen3 x8", 3, 8, 7.88),
    ("Gen2 x16 (8b/10b coding)", 2, 16, 8.0),
    ("unknown generation", 9, 16, None),
    ("unreadable width", 5, None, None),
]


@pytest.mark.parametrize(
    ("gen", "width", "gbps"), [row[1:] for row in LINKS], ids=[row[0] for row in LINKS]
)
def test_pcie_gbps(gen: int | None, width: int | None, gbps: float | None) -> None:
    assert pcie_gbps(gen, width) == (None if gbps is None else pytest.approx(gbps))


@pytest.mark.parametrize(
    ("measurement", "status"),
    [(m("host_sync_penalty", -6.0), "pass"), (m("stream_overlap", -0.05), "fail")],
)
def test_a_figure_below_zero_within_its_noise_is_checked_as_zero(
    shipped: Catalog, measurement: Measurement, status: str
) -> None:
    """The lent H100's `probe --full` timed the sync penalty at -6.0 us/step (the loop with a
    host read every step ran faster than the one without, within the timing noise) and stopped:
    a check's figure is never negative. The check reads 0 (none measurable; an overlap of 0
    fails) and its detail keeps the measured value."""
    got = check(verify(shipped, inventory(), [], [measurement]), measurement.name)
    assert (got.measured, got.status) == (0.0, status)
    assert f"{measurement.value:,.1f}" in got.detail or f"{measurement.value:.2f}" in got.detail
