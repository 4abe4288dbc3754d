"""A synthetic-but-plausible fleet, grown from one real probe report: for the review's benchmark,
its tests and the screenshot in docs/. Pure and seeded: the same arguments give the same fleet.

Hosts carry 8 GPUs of one accelerator (4 for L40S); each run's measured / expected ratio is the
real report's ratio for that check with a little noise; a few hosts are sick (throttled matmuls,
a PCIe link at half width) and a few run an older driver. Utilisation reports cover most hosts
with a mix of findings in the vocabulary of advisor.fleet.utilisation.
"""

from __future__ import annotations

import datetime as dt
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from advisor.catalog import Catalog
from advisor.fleet.grading import grade

# accelerator id, share of hosts, GPUs per host, instance type, hostname prefix
MIX = (
    ("h200-sxm", 0.40, 8, "p5en.48xlarge", "h200"),
    ("h100-sxm", 0.30, 8, "p5.48xlarge", "h100"),
    ("a100-80gb-sxm", 0.20, 8, "p4de.24xlarge", "a100"),
    ("l40s", 0.10, 4, "g6e.12xlarge", "l40s"),
)
DRIVERS = (("580.159.04", 0.75), ("570.172.08", 0.2), ("550.163.01", 0.05))
MATMULS = {
    "matmul_fp32": "fp32",
    "matmul_tf32": "tf32",
    "matmul_fp16": "fp16",
    "matmul_bf16": "bf16",
    "matmul_fp8": "fp8",
}
TRANSFERS = ("h2d_pinned", "d2h_pinned", "bidir_pinned")
START = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Host:
    name: str
    accelerator: str
    gpus: int
    instance_type: str
    driver: str
    sickness: str | None  # None, "throttled", "pcie_x8"


def _pick(rng: random.Random, weighted: tuple[tuple[str, float], ...]) -> str:
    return rng.choices([w[0] for w in weighted], [w[1] for w in weighted])[0]


def hosts(n_hosts: int, seed: int = 7, sick: Mapping[int, str] | None = None) -> list[Host]:
    """`sick` (host index -> sickness) replaces the random sicknesses: every other host is well."""
    rng = random.Random(seed)
    out = []
    for i in range(n_hosts):
        acc, _, gpus, it, prefix = rng.choices(MIX, [m[1] for m in MIX])[0]
        roll = rng.random()
        sickness = "throttled" if roll < 0.04 else "pcie_x8" if roll < 0.06 else None
        if sick is not None:
            sickness = sick.get(i)
        out.append(Host(f"{prefix}-{i:04d}", acc, gpus, it, _pick(rng, DRIVERS), sickness))
    return out


def _expected(catalog: Catalog, base: dict[str, Any], acc_id: str, check: dict[str, Any]) -> Any:
    """The base report's expectation, moved to another accelerator the way verify derives it
    (70% of the dense datasheet peak, memory bandwidth for d2d)."""
    expected = check.get("expected")
    base_acc = catalog.accelerators.get(str(base.get("accelerator")))
    acc = catalog.accelerators.get(acc_id)
    if expected is None or acc is None or base_acc is None or acc_id == base_acc.id:
        return expected
    name = check["name"]
    if name in MATMULS:
        peak = acc.peak_tflops.get(MATMULS[name])
        return None if peak is None else round(0.7 * peak, 2)
    if name == "d2d":
        return round(expected * acc.memory_bandwidth_gbps / base_acc.memory_bandwidth_gbps, 1)
    return expected


def probe_reports(
    catalog: Catalog,
    base: dict[str, Any],
    n_reports: int,
    n_hosts: int,
    seed: int = 7,
    sick: Mapping[int, str] | None = None,
    host_seed: int | None = None,
) -> list[dict[str, Any]]:
    """`n_reports` probe reports spread over `n_hosts` hosts and 30 days, newest last; the
    hosts drawn with `host_seed` where given (the same fleet, measured again), else `seed`."""
    rng = random.Random(seed + 1)
    fleet = hosts(n_hosts, seed if host_seed is None else host_seed, sick)
    base_checks = base.get("checks") or []
    base_ratio = {
        c["name"]: c["measured"] / c["expected"]
        for c in base_checks
        if c.get("measured") is not None and c.get("expected")
    }
    out = []
    for i in range(n_reports):
        host = fleet[i % n_hosts]
        device = (i // n_hosts) % host.gpus
        acc = catalog.accelerators.get(host.accelerator)
        checks = []
        worst = "pass"
        for c in base_checks:
            expected = _expected(catalog, base, host.accelerator, c)
            measured = c.get("measured")
            status = c.get("status", "pass")
            if c.get("measured") is not None and c.get("expected"):
                if expected is None:
                    continue  # the accelerator lacks this precision: no such check
                ratio = base_ratio[c["name"]] * rng.gauss(1.0, 0.012)
                if host.sickness == "throttled" and c["name"] in MATMULS:
                    ratio *= rng.uniform(0.72, 0.86)
                if host.sickness == "pcie_x8" and c["name"] in TRANSFERS:
                    ratio *= rng.uniform(0.48, 0.52)
                measured = expected * ratio
                status = grade(ratio)
            elif measured is not None:
                measured = measured * rng.gauss(1.0, 0.03)
            checks.append({**c, "expected": expected, "measured": measured, "status": status})
            if status == "fail" or (status == "warn" and worst == "pass"):
                worst = status
        gpu = dict((base.get("inventory") or {}).get("gpu") or {})
        gpu.update(
            index=device,
            name=(acc.nvml_names[0] if acc and acc.nvml_names else host.accelerator),
            uuid="GPU-" + str(uuid.UUID(int=hash_id(host, device))),
        )
        inventory = {
            **(base.get("inventory") or {}),
            "hostname": host.name,
            "driver_version": host.driver,
            "device_count": host.gpus,
            "gpu": gpu,
        }
        when = START + dt.timedelta(seconds=30 * 86400 * i / max(n_reports, 1))
        out.append(
            {
                **base,
                "created_at": when.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "device": device,
                "verdict": worst,
                "accelerator": host.accelerator,
                "expected_accelerator": None,
                "inventory": inventory,
                "checks": checks,
            }
        )
    return out


def hash_id(host: Host, device: int) -> int:
    """A stable 128-bit number for a host's GPU (its synthetic UUID)."""
    return uuid.uuid5(uuid.NAMESPACE_DNS, f"{host.name}.gpu{device}").int


# finding, share, util mean range, util p95 range, memory share range, reason codes
USAGE_MIX = (
    ("idle", 0.12, (0.0, 1.0), (0.0, 3.0), (0.0, 0.03), ("GPU_UTIL_LOW", "GPU_MEMORY_LOW")),
    (
        "over_provisioned",
        0.25,
        (8.0, 25.0),
        (20.0, 45.0),
        (0.08, 0.35),
        ("GPU_UTIL_LOW", "GPU_MEMORY_LOW"),
    ),
    ("optimized", 0.53, (45.0, 85.0), (70.0, 97.0), (0.45, 0.85), ()),
    (
        "under_provisioned",
        0.10,
        (92.0, 99.0),
        (99.0, 100.0),
        (0.92, 0.99),
        ("GPU_UTIL_HIGH", "GPU_MEMORY_HIGH"),
    ),
)


def utilisation_reports(
    catalog: Catalog, n_hosts: int, share: float = 0.6, seed: int = 7
) -> list[dict[str, Any]]:
    """One utilisation report for about `share` of the hosts; a tenth name no instance type."""
    rng = random.Random(seed + 2)
    out = []
    for host in hosts(n_hosts, seed):
        if rng.random() > share:
            continue
        acc = catalog.accelerators.get(host.accelerator)
        total_mib = (acc.memory_gb if acc else 80) * 1e9 / 1024 / 1024 * 0.98
        gpus = []
        for index in range(host.gpus):
            finding, _, mean, p95, mem, codes = rng.choices(USAGE_MIX, [u[1] for u in USAGE_MIX])[0]
            used = total_mib * rng.uniform(*mem)
            util_mean = rng.uniform(*mean)
            util_p95 = max(util_mean, rng.uniform(*p95))
            gpus.append(
                {
                    "index": index,
                    "uuid": "GPU-" + str(uuid.UUID(int=hash_id(host, index))),
                    "name": acc.nvml_names[0] if acc and acc.nvml_names else host.accelerator,
                    "accelerator": host.accelerator,
                    "samples": 1440,
                    "util_gpu_mean_pct": round(util_mean, 1),
                    "util_gpu_p95_pct": round(util_p95, 1),
                    "util_memory_mean_pct": round(util_mean * 0.6, 1),
                    "memory_used_max_mib": round(used, 1),
                    "memory_total_mib": round(total_mib, 1),
                    "power_mean_w": round(
                        (acc.tdp_w if acc else 400) * (0.15 + util_mean / 130), 1
                    ),
                    "power_limit_w": acc.tdp_w if acc else 400,
                    "throttle_reasons": [],
                    "throttled_fraction": 0.0,
                    "finding": finding,
                    "reason_codes": list(codes),
                    "evidence": [
                        f"GPU utilisation averaged {util_mean:.0f}% (p95 {util_p95:.0f}%)"
                    ],
                }
            )
        out.append(
            {
                "schema_version": 1,
                "kind": "utilisation",
                "created_at": "2026-11-29T12:00:00Z",
                "host": host.name,
                "instance_type": None if rng.random() < 0.1 else host.instance_type,
                "duration_s": 86400.0,
                "interval_s": 60.0,
                "gpus": gpus,
            }
        )
    return out
