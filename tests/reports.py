"""Probe reports for tests that state only the parts they check: the rest of a valid report
(the probe report model's required fields) filled in, so every store and review test goes
through the same model the service does."""

from __future__ import annotations

import datetime as dt
from typing import Any

from probes.report import ProbeReport

CREATED_AT = "2026-12-01T00:00:00Z"
# A time the service takes for a report it is sent (advisor.fleet.intake: within a year before
# its clock): yesterday's midnight, the same for every report of one test session (reports
# posted twice must stay equal).
RECENT = (dt.datetime.now(dt.UTC) - dt.timedelta(days=1)).strftime("%Y-%m-%dT00:00:00Z")


def as_probe_report(body: dict[str, Any]) -> ProbeReport:
    """`body` with a run's required fields where it leaves them out (a check's detail, the
    inventory's Python, the mode, device, time and duration), validated."""
    filled: dict[str, Any] = {
        "created_at": CREATED_AT,
        "mode": "quick",
        "device": 0,
        "duration_s": 1.0,
        "verdict": "pass",
        **body,
    }
    filled["inventory"] = {"hostname": "unknown", "python": "3.11", **body.get("inventory", {})}
    filled["checks"] = [{"detail": "", **c} for c in body.get("checks", [])]
    return ProbeReport.model_validate(filled)
