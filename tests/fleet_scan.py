"""The fleet summary and a voted check's host ratios by a scan of every check row: the reference
that the store's aggregates (advisor/store/aggregates.py) are tested against, and what the
memory store (tests/memory_store.py) answers with."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from advisor.fleet.statistics import (
    PLAUSIBLE_RATIO,
    CheckStats,
    HostVote,
    fleet_statistics,
    ratio_of,
    sources_of,
)
from advisor.perf.calibration import CALIBRATION_CHECK, LINK_CHECK, NETWORK_CHECK
from advisor.store.base import CheckRow, FleetSummary, HostRatios
from probes.report import ProbeReport


def stored_probe_report(body: dict[str, Any]) -> ProbeReport:
    """A stored body read back through the report model (every body was one when stored)."""
    return ProbeReport.model_validate(body)


def host_ratios_of(rows: Iterable[CheckRow]) -> list[HostRatios]:
    """Each (accelerator, host)'s plausible ratios among `rows`, with their write tokens."""
    found: dict[tuple[str | None, str], tuple[list[float], set[str]]] = {}
    for r in rows:
        ratio = ratio_of(r.measured, r.expected)
        if ratio is None or not PLAUSIBLE_RATIO.holds(ratio):
            continue
        ratios, tokens = found.setdefault((r.accelerator, r.host), ([], set()))
        ratios.append(ratio)
        if r.token_id is not None:
            tokens.add(r.token_id)
    return [
        HostRatios(acc, host, sorted(ratios), tuple(sorted(tokens)))
        for (acc, host), (ratios, tokens) in found.items()
    ]


def summarize_fleet(
    rows: Iterable[CheckRow], reports: dict[str | None, list[str]]
) -> list[FleetSummary]:
    """Per accelerator (`reports`: each accelerator's report verdicts): measured / expected per
    check (median, p10, p90, status counts) and failing hosts, from advisor.fleet.statistics."""
    rows = list(rows)
    found = fleet_statistics(
        (r.accelerator, r.host, ((r.name, r.status, r.measured, r.expected, None),)) for r in rows
    )
    return [
        FleetSummary(
            acc,
            len(reports[acc]),
            len(found.hosts_of(acc)),
            dict(Counter(reports[acc])),
            {st.check: _summary_figures(st) for st in found.for_accelerator(acc)},
            found.failing_hosts(acc),
            _calibration_vote(found.checks.get((acc, CALIBRATION_CHECK)), rows),
            _calibration_vote(found.checks.get((acc, LINK_CHECK)), rows),
            _calibration_vote(found.checks.get((acc, NETWORK_CHECK)), rows),
        )
        for acc in sorted(reports, key=lambda a: (a is None, a or ""))
    ]


def _calibration_vote(st: CheckStats[str | None] | None, rows: list[CheckRow]) -> HostVote | None:
    """The calibration check's host vote, with the write tokens behind its plausible runs."""
    if st is None:
        return None
    pairs = (
        (r.host, r.token_id)
        for r in rows
        if r.accelerator == st.accelerator
        and r.name == st.check
        and (ratio := ratio_of(r.measured, r.expected)) is not None
        and PLAUSIBLE_RATIO.holds(ratio)
    )
    return sources_of(pairs, st.vote)


def _summary_figures(st: CheckStats[str | None]) -> dict[str, float | int | None]:
    """The service's wording of one check's statistics (GET /v1/fleet/summary)."""
    return {
        "count": st.runs,
        "ratios": st.ratios,  # runs whose ratio is in the median
        "ratio_median": st.median,
        "ratio_p10": st.p10,
        "ratio_p90": st.p90,
        "ratios_ignored": st.ignored,  # outside advisor.fleet.statistics.PLAUSIBLE_RATIO
        **{f"status_{k}": n for k, n in st.statuses.items()},
    }
