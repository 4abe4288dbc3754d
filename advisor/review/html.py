"""The review page: one self-contained HTML document (inline CSS and SVG, no JavaScript).

The markup lives in Jinja2 templates (templates/, shipped in the package) with autoescape on, so
every text from a report or the catalog is escaped without anyone having to remember to; the
SVG charts (svg.py, which escapes its own text) are the only markup that arrives from code. A
Content-Security-Policy meta element forbids every external load, so the page cannot fetch
anything even if a report smuggled a URL in. This module shapes the review into what the
template shows (rows, groups, totals) and formats numbers; it writes no HTML.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from advisor.fleet.grading import PASS_AT, WARN_AT
from advisor.perf.headroom import USABLE_MEMORY
from advisor.review.analysis import Outlier, Review
from advisor.review.costs import Saving, WorkloadResult
from advisor.review.svg import COLOURS, Bar, RatioBar, bar_chart, ratio_chart
from advisor.units import HOURS_PER_MONTH

MAX_OUTLIER_ROWS = 100  # hosts
MAX_NODE_ROWS = 100  # hosts, those in trouble first
MAX_JOB_ROWS = 50
MAX_SAVING_ROWS = 60
MAX_COST_BARS = 15
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
    "form-action 'none'"
)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _usd(value: float | None, cents: bool = False) -> str:
    if value is None:
        return "-"
    return f"${value:,.2f}" if cents else f"${value:,.0f}"


def _num(value: float | None, fmt: str = "{:,.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def _thousands(value: int) -> str:
    return f"{value:,}"


def _when(iso: str | None) -> str:
    """2026-11-30T13:13:20.200702Z -> 2026-11-30 13:13 (UTC in the reports)."""
    if not iso:
        return "-"
    return iso[:16].replace("T", " ") + (" UTC" if iso.endswith(("Z", "+00:00")) else "")


def _badge_class(status: str) -> str:
    return status if status.isidentifier() else "none"


def _efficiency_kind(source: str) -> str:
    return "fleet" if source.startswith("fleet") else "default"


@cache
def templates() -> Environment:
    """The page's template environment (one per process: it caches compiled templates)."""
    env = Environment(
        loader=PackageLoader("advisor.review", "templates"),
        autoescape=True,  # every template, whatever its name: the page is all HTML
        undefined=StrictUndefined,  # a misspelt name fails loudly instead of rendering empty
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        pct=_pct,
        usd=_usd,
        num=_num,
        thousands=_thousands,
        when=_when,
        badge_class=_badge_class,
        efficiency_kind=_efficiency_kind,
    )
    return env


@dataclass(frozen=True)
class _OutlierRow:
    """One host's flagged checks on one accelerator, worst first."""

    host: str
    accelerator: str
    found: list[Outlier]

    @property
    def runs(self) -> int:
        return max(o.runs for o in self.found)


def _outlier_rows(outliers: Sequence[Outlier]) -> list[_OutlierRow]:
    by_host: dict[tuple[str, str], list[Outlier]] = {}
    for o in outliers:  # lowest ratio first: a host's first row is its worst
        by_host.setdefault((o.host, o.accelerator), []).append(o)
    return [_OutlierRow(host, acc, found) for (host, acc), found in by_host.items()]


@dataclass
class _Group:
    """GPUs of one host with the same finding, price basis and suggestion: one table row."""

    first: Saving
    gpus: list[int] = field(default_factory=list)
    busy_p95: float | None = None
    memory_peak_gb: float | None = None
    saving: float = 0.0
    released: float = 0.0
    codes: dict[str, None] = field(default_factory=dict)


def _group_savings(savings: Sequence[Saving]) -> list[_Group]:
    groups: dict[tuple[object, ...], _Group] = {}
    for s in savings:
        key = (
            s.host,
            s.finding,
            s.accelerator,
            s.current_basis,
            s.suggestion.instance_type if s.suggestion else None,
            s.note.split(";")[0] if not s.suggestion else "",
        )
        g = groups.setdefault(key, _Group(s))
        g.gpus.append(s.gpu_index)
        busy = s.util_p95_pct if s.util_p95_pct is not None else s.util_mean_pct
        g.busy_p95 = _max(g.busy_p95, busy)
        g.memory_peak_gb = _max(g.memory_peak_gb, s.memory_peak_gb)
        g.saving += s.monthly_saving_usd or 0.0
        g.released += s.released_monthly_usd or 0.0
        g.codes.update(dict.fromkeys(s.reason_codes))
    return sorted(groups.values(), key=lambda g: (-g.saving, -g.released, g.first.host))


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _gpus_chart(r: Review) -> str:
    return bar_chart(
        [
            Bar(name, count, f"{name}: {count} GPU(s) (each GPU's latest probe report)")
            for name, count in r.inventory.gpus_by_accelerator
        ],
        "gpus-by-accelerator",
        "GPUs by accelerator",
        lambda v: f"{v:,.0f}",
        width=480,
        label_w=150,
    )


def _ratios_chart(r: Review) -> str:
    bars = [
        RatioBar(
            row.check,
            row.median,
            row.p10,
            row.p90,
            row.band,
            f"{row.accelerator} {row.check}: median {row.median:.1%} of expected "
            f"(p10 {row.p10:.1%}, p90 {row.p90:.1%}) over {row.reports} runs; "
            f"{row.failed} failed, {row.warned} warned",
            group=row.accelerator,
        )
        for row in r.ratios
    ]
    return ratio_chart(bars, "ratios", "Measured / expected per accelerator and check")


def _savings_chart(groups: Sequence[_Group]) -> str:
    by_host: dict[str, float] = {}
    for g in groups:
        by_host[g.first.host] = by_host.get(g.first.host, 0.0) + g.saving
    top = sorted(by_host.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_COST_BARS]
    return bar_chart(
        [Bar(h, v, f"{h}: possible saving ${v:,.0f} per month") for h, v in top if v > 0],
        "savings-by-host",
        f"Possible saving per month, top {len(top)} hosts",
        lambda v: f"${v:,.0f}",
    )


def _workload_chart(w: WorkloadResult, index: int) -> str:
    bars = [
        Bar(
            c.instance_type,  # the id alone, so that it is never cut; the GPUs are in the table
            c.cost_usd,
            f"{c.instance_type} in {c.region}: {c.hours:,.1f} h x ${c.hourly_usd:,.2f}/h = "
            f"${c.cost_usd:,.0f}; efficiency {c.efficiency:.3f} ({c.efficiency_source})",
            COLOURS["best"] if i == 0 else COLOURS["neutral"],
        )
        for i, c in enumerate(w.costs[:MAX_COST_BARS])
    ]
    return bar_chart(
        bars, f"cost-{index}", f"{w.label}: cost per run, cheapest first", lambda v: f"${v:,.0f}"
    )


def _context(r: Review) -> dict[str, Any]:
    """What the template shows: the review, its charts (Markup: svg.py escaped their text) and
    the rows, groups and totals that the tables need."""
    outliers = _outlier_rows(r.outliers)
    groups = _group_savings(r.savings)
    shown = groups[:MAX_SAVING_ROWS]
    bases: dict[str, int] = {}  # price basis -> its footnote number, in order of first use
    saving_rows = [(g, bases.setdefault(g.first.current_basis, len(bases) + 1)) for g in shown]
    used = {c.accelerator for w in r.workloads for c in w.costs}
    return {
        "r": r,
        "csp": Markup(CSP),  # a constant of this module, quoted as it is in the header
        "colours": COLOURS,
        "pass_at": PASS_AT,
        "warn_at": WARN_AT,
        "usable_memory": USABLE_MEMORY,
        "hours_per_month": HOURS_PER_MONTH,
        "charts": {
            "gpus": Markup(_gpus_chart(r)),
            "ratios": Markup(_ratios_chart(r)),
            "savings": Markup(_savings_chart(groups)),
        },
        "verdicts": sorted(set(r.inventory.verdicts) | set(r.inventory.latest_verdicts)),
        "ratio_groups": [
            (accelerator, list(rows))
            for accelerator, rows in itertools.groupby(r.ratios, key=lambda row: row.accelerator)
        ],
        "node_rows": r.nodes[:MAX_NODE_ROWS],
        "more_nodes": max(len(r.nodes) - MAX_NODE_ROWS, 0),
        "outlier_rows": outliers[:MAX_OUTLIER_ROWS],
        "more_hosts": max(len(outliers) - MAX_OUTLIER_ROWS, 0),
        "flagged_hosts": len({o.host for o in r.outliers}),
        "saving_rows": saving_rows,
        "more_savings": len(groups) - len(shown),
        "bases": list(bases),
        "saving_total": sum(s.monthly_saving_usd or 0.0 for s in r.savings),
        "released_total": sum(s.released_monthly_usd or 0.0 for s in r.savings),
        "workloads": [(w, Markup(_workload_chart(w, i))) for i, w in enumerate(r.workloads)],
        "calibration": [f for f in r.calibration if f.accelerator in used],
        "max_job_rows": MAX_JOB_ROWS,
        "jobs_lost": sum(row.job.gpu_hours_lost or 0.0 for row in r.jobs),
        "commitment_total": sum(c.monthly_saving_usd for c in r.commitments),
        "max_saving_rows": MAX_SAVING_ROWS,
    }


def render_html(r: Review) -> str:
    return templates().get_template("review.html.j2").render(_context(r))
