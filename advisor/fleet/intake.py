"""What the service checks and corrects in a probe report before it stores it, beyond its
schema. Pure: the catalog and the time are arguments.

A client's figures are not taken as they come: a verdict may claim pass over failing checks, a
check may claim pass at 1% of its expectation, a run told `--expect mi300x` on an H200 would
become an mi300x calibration ratio, and one host may report under several spellings. So the
stored report is the server's reading of it:
- its host name normalised (advisor.fleet.hosts), ambiguous ones refused;
- its accelerator the one its inventory names (the catalog's match of the GPU's NVML name),
  never the one it was expected to be;
- each check that measures a figure where more is better (TFLOP/s, GB/s) graded again from
  measured / expected, with the catalog's expectation for the measured accelerator where the
  catalog has one (matmul, device copy), else the report's own; a status only ever gets worse;
- its verdict the worst of its own, every check's (the cluster's included), every GPU's, every
  node's and the cluster's verdicts, and error when a rank did not finish.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from advisor.catalog import Catalog
from advisor.errors import InputError
from advisor.fleet.grading import grade
from advisor.fleet.hosts import normalise_host
from advisor.fleet.verification import catalog_expectation, match_by_name, worst_verdict
from probes.report import Check, ProbeReport, Status, Verdict

# How bad each verdict is; "error" (the probe could not measure) ranks below "fail" as in
# worst_verdict, and above "warn": it never counts as passing.
SEVERITY: dict[str, int] = {"skip": -1, "pass": 0, "warn": 1, "error": 2, "fail": 3}
# Units of figures where more is better: measured / expected grades them (advisor.fleet.grading).
HIGHER_IS_BETTER = frozenset({"TFLOP/s", "GB/s"})
# A report from a clock at most this far ahead of the server's is accepted (NTP keeps hosts
# within milliseconds; this allows for a host without it).
MAX_CLOCK_AHEAD = dt.timedelta(minutes=10)
# The oldest report accepted: `advisor probe --report-to` spools a report the service could not
# take and sends it later; a year covers any outage and keeps the fleet's figures current.
MAX_REPORT_AGE = dt.timedelta(days=366)


@dataclass(frozen=True)
class Admitted:
    report: ProbeReport  # what is stored: the server's reading of the report
    claimed_verdict: Verdict | None  # the report's own verdict, when the server's differs


def _worst(verdicts: Iterable[str]) -> Verdict:
    worst: Verdict = "pass"
    for v in verdicts:
        if v != "skip" and SEVERITY[v] > SEVERITY[worst]:
            worst = v  # type: ignore[assignment]
    return worst


def server_verdict(report: ProbeReport) -> Verdict:
    """The worst of every verdict and check status the report holds; error when a rank did not
    finish."""
    checks = report.checks + (report.cluster.checks if report.cluster else [])
    verdicts: list[str] = [report.verdict, worst_verdict(checks)]
    verdicts += [g.verdict for g in report.gpu_verdicts]
    if report.cluster is not None:
        verdicts.append(report.cluster.verdict)
        verdicts += [n.verdict for n in report.cluster.hosts if n.verdict is not None]
    if report.failed_ranks:
        verdicts.append("error")
    return _worst(verdicts)


def measured_accelerator(report: ProbeReport, catalog: Catalog) -> str | None:
    """The catalog accelerator the report's inventory names (its first GPU, else the first of
    its GPUs with a name); None when it names GPUs the catalog does not know. An inventory that
    names no GPU contradicts nothing: the report's own `accelerator` stands when the catalog
    has it (never `expected_accelerator`)."""
    inv = report.inventory
    names = [inv.gpu.name] if inv.gpu is not None and inv.gpu.name else []
    names += [g.name for g in inv.gpus if g.name]
    for name in names:
        matched = match_by_name(catalog, name)
        if matched is not None:
            return matched.id
    if names or report.accelerator not in catalog.accelerators:
        return None
    return report.accelerator


def regraded(check: Check, accelerator: str | None, catalog: Catalog) -> Check:
    """`check` graded again from measured / expected (see the module); as it came when it
    measures nothing gradable."""
    if check.measured is None or check.status in ("skip", "error"):
        return check
    if check.unit not in HIGHER_IS_BETTER:
        return check
    known = catalog_expectation(catalog, accelerator, check.name) if accelerator else None
    expected = known if known is not None else check.expected
    if not expected:
        return check
    status: Status = _worst([check.status, grade(check.measured / expected)])
    if status == check.status and expected == check.expected:
        return check
    return check.model_copy(update={"status": status, "expected": expected})


def as_stored(report: ProbeReport, catalog: Catalog) -> ProbeReport:
    """The server's reading of `report` (see the module); InputError naming the host name when
    it is ambiguous."""
    accelerator = measured_accelerator(report, catalog)
    checks = [regraded(c, accelerator, catalog) for c in report.checks]
    cluster = report.cluster
    if cluster is not None:
        cluster = cluster.model_copy(
            update={"checks": [regraded(c, accelerator, catalog) for c in cluster.checks]}
        )
    inventory = report.inventory.model_copy(
        update={"hostname": normalise_host(report.inventory.hostname)}
    )
    read = report.model_copy(
        update={
            "inventory": inventory,
            "accelerator": accelerator,
            "checks": checks,
            "cluster": cluster,
        }
    )
    return read.model_copy(update={"verdict": server_verdict(read)})


def admit_probe_report(report: ProbeReport, now: dt.datetime, catalog: Catalog) -> Admitted:
    """The report to store; InputError naming `created_at` when it is from the future or older
    than MAX_REPORT_AGE, or naming the host name when it is ambiguous."""
    check_report_time(report.created_at, now)
    stored = as_stored(report, catalog)
    claimed = report.verdict if stored.verdict != report.verdict else None
    return Admitted(stored, claimed)


def check_report_time(created_at: dt.datetime, now: dt.datetime) -> None:
    """InputError naming `created_at` (of a probe or a utilisation report) when it is more than
    MAX_CLOCK_AHEAD ahead of `now` or older than MAX_REPORT_AGE."""
    created = created_at.astimezone(dt.UTC)
    if created > now + MAX_CLOCK_AHEAD:
        raise InputError(
            f"created_at {created.isoformat()} is {_ago(created - now)} ahead of the server's "
            f"clock ({now.isoformat()}): at most {_ago(MAX_CLOCK_AHEAD)}",
            field="created_at",
        )
    if created < now - MAX_REPORT_AGE:
        raise InputError(
            f"created_at {created.isoformat()} is older than {MAX_REPORT_AGE.days} days "
            f"(the server's clock says {now.isoformat()})",
            field="created_at",
        )


def _ago(delta: dt.timedelta) -> str:
    seconds = delta.total_seconds()
    if seconds >= 86_400:
        return f"{seconds / 86_400:.1f} days"
    return f"{seconds / 60:.1f} min"
