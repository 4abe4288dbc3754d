"""Verification of a probe run against the catalog: pure, no I/O, no torch.

Each measurement becomes a check (pass / warn / fail / skip / error) with a sentence; findings from
the inventory (link below its maximum, throttling, other processes, ECC, MIG, wrong model) become
checks of their own and are named as likely causes in the sentences of failing checks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from advisor.catalog import Catalog
from advisor.catalog.cross_checks import GPU_FORM_FACTORS
from advisor.catalog.models import Accelerator, InstanceType
from advisor.did_you_mean import did_you_mean
from advisor.errors import NotFoundError
from advisor.fleet.grading import PASS_AT, WARN_AT, Grade, grade
from probes.report import Check, Diagnosis, GpuInventory, Inventory, Status, Verdict
from probes.stats import Measurement

# Derived expectations for accelerators without measured figures in the catalog.
MATMUL_EFFICIENCY = 0.70  # share of the dense datasheet peak a plain torch matmul reaches
D2D_EFFICIENCY = 0.85  # share of datasheet memory bandwidth a large copy reaches (read + write)
PCIE_PINNED_EFFICIENCY = 0.85  # share of the link's theoretical rate a pinned copy reaches
PCIE_BIDIR_EFFICIENCY = 0.80  # per direction, both directions at once
OVERLAP_PASS, OVERLAP_WARN = 0.80, 0.50
# Under --burn the last quarter's rate against the first: the grading bands (PASS_AT, WARN_AT)
# again, since a drop of 10% under sustained load is what a slowing GPU looks like.
BURN_HOLD_PASS, BURN_HOLD_WARN = PASS_AT, WARN_AT
# GB/s per lane and direction after line coding (PCIe 1-2: 8b/10b; 3-5: 128b/130b; 6: FLIT).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
POWER_REASONS = {"hw_slowdown", "hw_power_brake_slowdown"}
THERMAL_REASONS = {"sw_thermal_slowdown", "hw_thermal_slowdown"}


@dataclass(frozen=True)
class Verification:
    accelerator: str | None
    expected_accelerator: str | None
    checks: list[Check]
    verdict: Verdict


def resolve_expect(catalog: Catalog, expect: str) -> tuple[Accelerator, InstanceType | None]:
    """--expect takes an accelerator id or an instance type id (then its accelerator)."""
    gpus = {a.id: a for a in catalog.accelerators.values() if a.form_factor in GPU_FORM_FACTORS}
    if expect in gpus:
        return gpus[expect], None
    it = catalog.instance_types.get(expect)
    if it is not None and it.accelerator:
        return catalog.accelerators[it.accelerator], it
    if it is not None or expect in catalog.accelerators:
        kind = "a CPU-only instance type" if it is not None else "not a GPU"
        raise NotFoundError(f"--expect {expect!r} is {kind}: the probe verifies GPUs")
    with_gpus = [i.id for i in catalog.instance_types.values() if i.accelerator]
    hint = did_you_mean(expect, [*gpus, *with_gpus])
    raise NotFoundError(f"--expect {expect!r} is no GPU accelerator or GPU instance type{hint}")


def match_by_name(catalog: Catalog, nvml_name: str | None) -> Accelerator | None:
    if not nvml_name:
        return None
    wanted = nvml_name.strip().lower()
    for acc in sorted(catalog.accelerators.values(), key=lambda a: a.id):
        if any(n.lower() == wanted for n in acc.nvml_names):
            return acc
    return None


def verify(
    catalog: Catalog,
    inventory: Inventory,
    diagnosis: Sequence[Diagnosis],
    measurements: Sequence[Measurement],
    expect: str | None = None,
) -> Verification:
    expected, instance = resolve_expect(catalog, expect) if expect else (None, None)
    if diagnosis:  # the GPU path could not run: say why, keep the CPU figures as information
        failed = [
            Check(name="gpu_available", status="error", detail=f"{d.code}: {d.message}")
            for d in diagnosis
        ]
        failed += [_info_check(m) for m in measurements]
        return Verification(None, expected.id if expected else None, failed, "error")

    gpu = inventory.gpu
    matched = match_by_name(catalog, gpu.name if gpu else None)
    checks: list[Check] = [_model_check(matched, expected, gpu.name if gpu else None)]
    if instance is not None:
        checks.append(gpu_count_check(instance, inventory.device_count))
    findings = _inventory_checks(inventory)
    causes = [c.detail for c in findings if c.status in ("warn", "fail")]
    reference = expected or matched
    for m in measurements:
        checks.append(_measurement_check(m, reference, catalog, inventory, causes))
    checks += findings
    accelerator = matched.id if matched else None
    return Verification(
        accelerator, expected.id if expected else None, checks, worst_verdict(checks)
    )


def worst_verdict(checks: Sequence[Check]) -> Verdict:
    statuses = {c.status for c in checks}
    order: tuple[Verdict, ...] = ("fail", "error", "warn")
    for status in order:
        if status in statuses:
            return status
    return "pass"


def _model_check(
    matched: Accelerator | None, expected: Accelerator | None, name: str | None
) -> Check:
    if expected is not None:
        if matched is not None and matched.id == expected.id:
            return Check(
                name="gpu_model",
                status="pass",
                detail=f"NVML reports {name!r}: {expected.name}, as expected",
            )
        known = (
            f" ({', '.join(repr(n) for n in expected.nvml_names)})" if expected.nvml_names else ""
        )
        return Check(
            name="gpu_model",
            status="fail",
            detail=f"expected {expected.name}{known}, but NVML reports {name!r}: wrong model",
        )
    if matched is None:
        return Check(
            name="gpu_model",
            status="warn",
            detail=f"no catalog accelerator lists the NVML name {name!r}; "
            "checks have no expectations "
            "(use --expect ID)",
        )
    return Check(
        name="gpu_model", status="pass", detail=f"NVML reports {name!r}: catalog {matched.id}"
    )


def gpu_count_check(instance: InstanceType, visible: int | None) -> Check:
    status = "pass" if visible is not None and visible >= instance.gpu_count else "fail"
    return Check(
        name="gpu_count",
        status=status,
        measured=visible,
        expected=instance.gpu_count,
        unit="GPUs",
        detail=f"{visible} GPU(s) visible to the driver; {instance.id} has {instance.gpu_count}",
    )


def pcie_gbps(gen: int | None, width: int | None) -> float | None:
    """Theoretical one-direction bandwidth of a PCIe link in GB/s."""
    if gen is None or width is None or gen not in PCIE_LANE_GBPS:
        return None
    return PCIE_LANE_GBPS[gen] * width


def _live_link(inv: Inventory) -> tuple[int | None, int | None]:
    """The link as trained under load (it idles at a lower generation to save power)."""
    gpu, load = inv.gpu, inv.under_load
    gen = max(
        (g for g in (gpu and gpu.pcie_gen_current, load and load.pcie_gen_max_seen) if g),
        default=None,
    )
    width = max(
        (w for w in (gpu and gpu.pcie_width_current, load and load.pcie_width_max_seen) if w),
        default=None,
    )
    return gen, width


def _expected(
    m: Measurement, acc: Accelerator | None, catalog: Catalog, inv: Inventory
) -> tuple[float | None, str]:
    """The expected value for a measurement and a phrase saying where it comes from."""
    name = m.name
    if name.startswith("matmul_"):
        return _matmul_expected(name.removeprefix("matmul_"), acc, catalog)
    if name == "d2d":
        return _d2d_expected(acc, catalog)
    if name in ("h2d_pinned", "d2h_pinned", "bidir_pinned"):
        return _pcie_expected(name == "bidir_pinned", inv)
    if name == "stream_overlap":
        return 1.0, "perfect overlap"
    return None, ""


def catalog_expectation(catalog: Catalog, accelerator: str, check: str) -> float | None:
    """What the catalog expects of `check` (matmul_<precision> in TFLOP/s, d2d in GB/s) on
    `accelerator`, as the probe computes it; None where the catalog does not know."""
    acc = catalog.accelerators.get(accelerator)
    if acc is None:
        return None
    if check.startswith("matmul_"):
        return _matmul_expected(check.removeprefix("matmul_"), acc, catalog)[0]
    if check == "d2d":
        return _d2d_expected(acc, catalog)[0]
    return None


def _matmul_expected(
    precision: str, acc: Accelerator | None, catalog: Catalog
) -> tuple[float | None, str]:
    if acc is None:
        return None, "no catalog accelerator matched"
    measured = catalog.probe_expectations.get(acc.id)
    if measured is not None and measured.matmul_tflops.get(precision):
        return measured.matmul_tflops.get(precision), f"{acc.id}'s measured reference"
    peak = acc.peak_tflops.get(precision)
    if not peak:
        return None, f"{acc.name} has no dense {precision} figure in its datasheet"
    return peak * MATMUL_EFFICIENCY, f"{MATMUL_EFFICIENCY:.0%} of {acc.id}'s dense peak {peak:g}"


def _d2d_expected(acc: Accelerator | None, catalog: Catalog) -> tuple[float | None, str]:
    if acc is None:
        return None, "no catalog accelerator matched"
    measured = catalog.probe_expectations.get(acc.id)
    if measured is not None and measured.d2d_gbps:
        return measured.d2d_gbps, f"{acc.id}'s measured reference"
    bw = acc.memory_bandwidth_gbps
    return bw * D2D_EFFICIENCY, f"{D2D_EFFICIENCY:.0%} of {acc.id}'s {bw:g} GB/s memory bandwidth"


def _pcie_expected(both_ways: bool, inv: Inventory) -> tuple[float | None, str]:
    """Pinned copies against the live link: one direction, or the sum of both at once."""
    gen, width = _live_link(inv)
    link = pcie_gbps(gen, width)
    if link is None:
        return None, "the PCIe link could not be read"
    if both_ways:
        return (
            2 * link * PCIE_BIDIR_EFFICIENCY,
            f"{PCIE_BIDIR_EFFICIENCY:.0%} of Gen{gen} x{width} ({link:.1f} GB/s) each way",
        )
    return (
        link * PCIE_PINNED_EFFICIENCY,
        f"{PCIE_PINNED_EFFICIENCY:.0%} of the live Gen{gen} x{width} link ({link:.1f} GB/s)",
    )


def _measurement_check(
    m: Measurement, acc: Accelerator | None, catalog: Catalog, inv: Inventory, causes: list[str]
) -> Check:
    if m.error is not None:
        return Check(name=m.name, status=_failure_status(m.error), unit=m.unit, detail=m.error)
    assert m.value is not None
    expected, basis = _expected(m, acc, catalog, inv)
    figure = _figure(m)
    if m.name == "burn_bf16":
        return _burn_check(m, causes)
    if m.name == "stream_overlap":
        status = grade(m.value, OVERLAP_PASS, OVERLAP_WARN)
        p = m.params
        detail = (
            f"overlap efficiency {m.value:.2f}: copy {p.get('copy_ms', 0):.1f} ms, compute "
            f"{p.get('compute_ms', 0):.1f} ms, concurrent {p.get('concurrent_ms', 0):.1f} ms, "
            "serial "
            f"{p.get('serial_ms', 0):.1f} ms"
        )
        return _check(m, status, expected, detail, causes)
    if expected is None:
        why = f" ({basis})" if basis else ""
        return Check(
            name=m.name,
            status="pass",
            measured=_measured(m),
            unit=m.unit,
            detail=f"{figure}; not compared{why}",
        )
    status, detail = graded(figure, m.value, expected, basis)
    return _check(m, status, expected, detail, causes)


def graded(figure: str, value: float, expected: float, basis: str) -> tuple[Grade, str]:
    """A figure against its expectation: the grade, and the sentence saying by how much."""
    ratio = value / expected
    status = grade(ratio)
    detail = f"{figure} = {ratio:.0%} of the expected {expected:,.1f} ({basis})"
    if status != "pass":
        detail += f"; below {PASS_AT:.0%}" if status == "warn" else f"; below {WARN_AT:.0%}"
    return status, detail


def _burn_check(m: Measurement, causes: list[str]) -> Check:
    """A GPU under minutes of load holds its rate (the last quarter against the first) and hits
    no thermal or hardware slowdown; the node's median holds it against its peers."""
    p = m.params
    drift = p.get("drift")
    reasons = set(p.get("throttle_reasons") or [])
    status: Status = grade(drift, BURN_HOLD_PASS, BURN_HOLD_WARN) if drift is not None else "pass"
    if reasons & POWER_REASONS:
        status = "fail"
    elif reasons & THERMAL_REASONS and status == "pass":
        status = "warn"
    detail = (
        f"{m.value:,.1f} TFLOP/s sustained over {p.get('seconds', 0):.0f} s (median of "
        f"{len(m.samples)} chunks); last quarter {p.get('last_quarter', 0):,.1f} = "
        f"{(drift or 0):.0%} of the first; max {p.get('temperature_max_c')} C, "
        f"{p.get('power_draw_max_w') or 0:.0f} W, SM clock down to {p.get('clock_sm_min_mhz')} MHz"
    )
    if reasons:
        detail += f"; clock limits seen: {', '.join(sorted(reasons))}"
    return _check(m, status, None, detail, causes)


def _failure_status(error: str) -> Status:
    """A measurement the machine cannot do is skipped; one that broke is an error."""
    return "skip" if error.startswith("unsupported") else "error"


def _check(
    m: Measurement, status: Status, expected: float | None, detail: str, causes: list[str]
) -> Check:
    if status != "pass" and causes:
        detail += "; likely causes: " + "; ".join(causes)
    return Check(
        name=m.name,
        status=status,
        measured=_measured(m),
        expected=expected,
        unit=m.unit,
        detail=detail,
    )


def _measured(m: Measurement) -> float | None:
    """The check's figure, which is never negative (probes/report.py Check): a difference of two
    timings (host_sync_penalty) or an overlap efficiency can fall below 0 within its noise, which
    says "none measurable"; the check's detail keeps the measured value (the lent H100's --full
    probe read the sync penalty at -6.0 us/step and stopped on it)."""
    return None if m.value is None else max(m.value, 0.0)


def _figure(m: Measurement) -> str:
    value = f"{m.value:,.1f} {m.unit}" if m.unit != "ratio" else f"{m.value:.2f}"
    if m.statistic == "max" and m.median is not None:
        value += f" (best of {len(m.samples)}; median {m.median:,.1f})"
    sustained = m.params.get("sustained")
    if isinstance(sustained, float) and m.value and sustained < 0.9 * m.value:
        value += f"; sustained {sustained:,.1f} ({sustained / m.value:.0%} of burst)"
    if m.noisy:
        value += f"; noisy (cv {m.cv:.0%})"
    return value


def _info_check(m: Measurement) -> Check:
    if m.error is not None:
        return Check(name=m.name, status=_failure_status(m.error), unit=m.unit, detail=m.error)
    return Check(
        name=m.name,
        status="pass",
        measured=_measured(m),
        unit=m.unit,
        detail=f"{_figure(m)} (CPU, for information)",
    )


def _inventory_checks(inv: Inventory) -> list[Check]:
    """The findings of the inventory, one check each where there is something to say."""
    gpu = inv.gpu
    if gpu is None:
        return []
    found = (finding(inv, gpu) for finding in INVENTORY_FINDINGS)
    return [check for check in found if check is not None]


def _pcie_link(inv: Inventory, gpu: GpuInventory) -> Check | None:
    gen, width = _live_link(inv)
    if not (gen and width and gpu.pcie_gen_max and gpu.pcie_width_max):
        return None
    below = gen < gpu.pcie_gen_max or width < gpu.pcie_width_max
    return Check(
        name="pcie_link",
        status="warn" if below else "pass",
        measured=pcie_gbps(gen, width),
        expected=pcie_gbps(gpu.pcie_gen_max, gpu.pcie_width_max),
        unit="GB/s",
        detail=(
            f"PCIe link runs at Gen{gen} x{width}, below its maximum "
            f"Gen{gpu.pcie_gen_max} x{gpu.pcie_width_max}"
            if below
            else f"PCIe link at its maximum, Gen{gen} x{width}"
        ),
    )


def _throttling(inv: Inventory, gpu: GpuInventory) -> Check | None:
    """Clock limits seen under load (else at rest): thermal or hardware power ones warn."""
    load = inv.under_load
    reasons = set(load.throttle_reasons) if load else set(gpu.throttle_reasons or [])
    reasons.discard("gpu_idle")  # not a limit: the GPU was simply idle when read
    if not reasons:
        return None
    if reasons & THERMAL_REASONS:
        hottest = load.temperature_max_c if load else gpu.temperature_c
        listed = ", ".join(sorted(reasons & THERMAL_REASONS))
        return _warn("throttling", f"thermal throttling under load ({listed}; max {hottest} C)")
    if reasons & POWER_REASONS:
        listed = ", ".join(sorted(reasons & POWER_REASONS))
        return _warn("throttling", f"hardware power slowdown under load ({listed})")
    note = " (the GPU held its power limit: normal under full load)"
    return Check(
        name="throttling",
        status="pass",
        detail=f"clock limits seen under load: {', '.join(sorted(reasons))}"
        + (note if "sw_power_cap" in reasons else ""),
    )


def _power_limit(_inv: Inventory, gpu: GpuInventory) -> Check | None:
    limit, default = gpu.power_limit_w, gpu.power_default_limit_w
    if not (limit and default and limit < 0.95 * default):
        return None
    return Check(
        name="power_limit",
        status="warn",
        measured=limit,
        expected=default,
        unit="W",
        detail=f"power limit lowered to {limit:g} W (default {default:g} W)",
    )


def _other_processes(_inv: Inventory, gpu: GpuInventory) -> Check | None:
    if not gpu.processes:
        return None
    listed = ", ".join(
        f"pid {p.pid} ({p.name or '?'}, {p.used_memory_mib or 0:.0f} MiB)" for p in gpu.processes
    )
    return Check(
        name="other_processes",
        status="warn",
        measured=len(gpu.processes),
        unit="processes",
        detail=f"other processes were using the GPU before the probe: {listed}",
    )


def _ecc(_inv: Inventory, gpu: GpuInventory) -> Check | None:
    if gpu.ecc_enabled is None:  # not readable (consumer GPUs have none)
        return None
    if gpu.ecc_enabled:
        return Check(name="ecc", status="pass", detail="ECC is on")
    return _warn("ecc", "ECC is off: memory errors go undetected")


def _mig(_inv: Inventory, gpu: GpuInventory) -> Check | None:
    if not gpu.mig_enabled:
        return None
    return _warn("mig", "MIG is enabled: the probe measured one slice, not the whole GPU")


def _warn(name: str, detail: str) -> Check:
    return Check(name=name, status="warn", detail=detail)


# In the order the checks appear in a report.
INVENTORY_FINDINGS: tuple[Callable[[Inventory, GpuInventory], Check | None], ...] = (
    _pcie_link,
    _throttling,
    _power_limit,
    _other_processes,
    _ecc,
    _mig,
)
