"""What the service checks in a probe report before it stores it, beyond its schema: the verdict
against the report's own checks, and the report's time against the server's clock. Pure: the
time is an argument.

A client's verdict is not taken as it comes (a report whose checks all fail but whose verdict
says pass would count as passing). The server's verdict is the worse of the two:
the checks' worst status (advisor.fleet.verification.worst_verdict, what the probe itself
computes) or the report's own verdict, which may rightly be worse than its checks (error when no
GPU was reached or ranks did not finish, a cluster's failure on a node whose own checks pass).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from advisor.errors import InputError
from advisor.fleet.verification import worst_verdict
from probes.report import ProbeReport, Verdict

# How bad each verdict is; "error" (the probe could not measure) ranks below "fail" as in
# worst_verdict, and above "warn": it never counts as passing.
SEVERITY: dict[str, int] = {"pass": 0, "warn": 1, "error": 2, "fail": 3}
# A report from a clock at most this far ahead of the server's is accepted (NTP keeps hosts
# within milliseconds; this allows for a host without it).
MAX_CLOCK_AHEAD = dt.timedelta(minutes=10)
# The oldest report accepted: `advisor probe --report-to` spools a report the service could not
# take and sends it later; a year covers any outage and keeps the fleet's figures current.
MAX_REPORT_AGE = dt.timedelta(days=366)


@dataclass(frozen=True)
class Admitted:
    report: ProbeReport  # what is stored: the report, with the server's verdict
    claimed_verdict: Verdict | None  # the report's own verdict, when the server's differs


def server_verdict(report: ProbeReport) -> Verdict:
    """The worse of the report's verdict and its checks' (a cluster summary's checks are among
    them on the node that wrote it)."""
    checks = report.checks + (report.cluster.checks if report.cluster else [])
    from_checks = worst_verdict(checks)
    claimed = report.verdict
    return from_checks if SEVERITY[from_checks] > SEVERITY[claimed] else claimed


def admit_probe_report(report: ProbeReport, now: dt.datetime) -> Admitted:
    """The report to store; InputError naming `created_at` when it is from the future or older
    than MAX_REPORT_AGE."""
    check_report_time(report.created_at, now)
    verdict = server_verdict(report)
    if verdict == report.verdict:
        return Admitted(report, None)
    return Admitted(report.model_copy(update={"verdict": verdict}), report.verdict)


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
