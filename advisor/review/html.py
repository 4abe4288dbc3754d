"""The review page: one self-contained HTML document (inline CSS and SVG, no JavaScript).

A Content-Security-Policy meta element forbids every external load, so the page cannot fetch
anything even if a report smuggled a URL in; every text from a report or the catalog is escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from advisor.fleet.grading import PASS_AT, WARN_AT
from advisor.review.analysis import Outlier, Review
from advisor.review.costs import HOURS_PER_MONTH, MEMORY_HEADROOM, Saving, WorkloadResult
from advisor.review.svg import COLOURS, Bar, RatioBar, bar_chart, esc, ratio_chart

MAX_OUTLIER_ROWS = 100  # hosts
MAX_SAVING_ROWS = 60
MAX_COST_BARS = 15
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
    "form-action 'none'"
)

CSS = """
:root { --ink: #263238; --muted: #607d8b; --line: #cfd8dc; --bg: #fafbfc; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans",
  sans-serif; color: var(--ink); background: var(--bg); }
header, section, footer { max-width: 1400px; margin: 0 auto; padding: 12px 24px; }
header { border-bottom: 3px solid var(--ink); background: #fff; max-width: none; }
header > * { max-width: 1352px; margin-left: auto; margin-right: auto; }
h1 { margin: 4px auto; font-size: 24px; }
h2 { font-size: 19px; margin: 18px 0 6px; border-bottom: 1px solid var(--line);
  padding-bottom: 4px; }
h3 { font-size: 15px; margin: 14px 0 4px; }
p { margin: 4px 0 8px; }
.meta, .how { color: var(--muted); }
nav a { margin-right: 14px; color: #1565c0; text-decoration: none; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 8px 0 12px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px;
  min-width: 130px; }
.card b { display: block; font-size: 22px; }
.card span { color: var(--muted); font-size: 12px; }
.pair { display: grid; grid-template-columns: minmax(0, 11fr) minmax(0, 9fr); gap: 18px;
  align-items: start; }
.pair.even { grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); }
@media (max-width: 1000px) { .pair, .pair.even { grid-template-columns: minmax(0, 1fr); } }
.panel { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px;
  overflow-x: auto; }
.narrow { max-width: 820px; margin-bottom: 12px; }
table.compact td { white-space: nowrap; }
table.ratios td, table.ratios th { height: 22px; padding-top: 0; padding-bottom: 0; }
tr.group th { background: #eceff1; position: static; }
svg.chart { display: block; max-width: 100%; height: auto; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: 13px; }
th, td { padding: 3px 7px; border-bottom: 1px solid var(--line); text-align: left;
  vertical-align: top; }
th { background: #eceff1; position: sticky; top: 0; font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) { background: #f6f8f9; }
.badge { display: inline-block; padding: 0 6px; border-radius: 8px; color: #fff; font-size: 12px;
  white-space: nowrap; }
.pass { background: #2e7d32; } .warn { background: #f9a825; color: #263238; }
.fail, .error { background: #c62828; } .skip, .none { background: #90a4ae; }
.idle { background: #6a1b9a; } .over_provisioned { background: #ef6c00; }
.small { font-size: 12px; color: var(--muted); }
.legend span { margin-right: 12px; white-space: nowrap; }
.legend i { display: inline-block; width: 12px; height: 12px; vertical-align: -1px;
  margin-right: 4px; }
.empty { color: var(--muted); font-style: italic; }
footer { color: var(--muted); font-size: 12px; border-top: 1px solid var(--line); }
"""


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _usd(value: float | None, cents: bool = False) -> str:
    if value is None:
        return "-"
    return f"${value:,.2f}" if cents else f"${value:,.0f}"


def _num(value: float | None, fmt: str = "{:,.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def _badge(status: str) -> str:
    cls = status if status.isidentifier() else "none"
    return f'<span class="badge {esc(cls)}">{esc(status.replace("_", " "))}</span>'


def _table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    numeric: Iterable[int] = (),
    cls: str = "",
) -> str:
    """Cells are HTML already (escape before); `numeric` column indexes are right-aligned."""
    right = set(numeric)
    head = "".join(
        f'<th class="n">{esc(h)}</th>' if i in right else f"<th>{esc(h)}</th>"
        for i, h in enumerate(headers)
    )
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="n">{c}</td>' if i in right else f"<td>{c}</td>" for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    if not body:
        body.append(f'<tr><td class="empty" colspan="{len(headers)}">none</td></tr>')
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _when(iso: str | None) -> str:
    """2026-11-30T13:13:20.200702Z -> 2026-11-30 13:13 (UTC in the reports)."""
    if not iso:
        return "-"
    return iso[:16].replace("T", " ") + (" UTC" if iso.endswith(("Z", "+00:00")) else "")


def _card(value: object, label: str) -> str:
    return f'<div class="card"><b>{esc(value)}</b><span>{esc(label)}</span></div>'


def _inventory(r: Review) -> str:
    inv = r.inventory
    verdict_bits = ", ".join(f"{n} {v}" for v, n in inv.verdicts.items()) or "none"
    cards = "".join(
        [
            _card(inv.hosts, "hosts probed"),
            _card(inv.gpus, "GPUs probed"),
            _card(inv.reports, "probe reports"),
            _card(inv.usage_hosts, "hosts monitored"),
            _card(inv.usage_gpus, "GPUs monitored"),
            _card(inv.usage_reports, "utilisation reports"),
        ]
    )
    chart = bar_chart(
        [
            Bar(name, count, f"{name}: {count} GPU(s) (each GPU's latest probe report)")
            for name, count in inv.gpus_by_accelerator
        ],
        "gpus-by-accelerator",
        "GPUs by accelerator",
        lambda v: f"{v:,.0f}",
        width=480,
        label_w=150,
    )
    verdicts = _table(
        ["verdict", "all reports", "latest per GPU"],
        [
            [_badge(v), f"{inv.verdicts.get(v, 0):,}", f"{inv.latest_verdicts.get(v, 0):,}"]
            for v in sorted(set(inv.verdicts) | set(inv.latest_verdicts))
        ],
        numeric=(1, 2),
    )
    drivers = _table(
        ["driver version", "hosts"],
        [[esc(d), f"{n:,}"] for d, n in inv.drivers],
        numeric=(1,),
    )
    span = (
        f"Reports from {esc(_when(inv.first_report))} to {esc(_when(inv.last_report))}."
        if inv.first_report
        else "No probe reports."
    )
    return (
        '<section id="inventory"><h2>1. Fleet inventory</h2>'
        f'<p class="how">{span} Verdicts over every report: {esc(verdict_bits)}. GPUs and '
        "drivers are counted from each GPU's (each host's) latest report.</p>"
        f'<div class="cards">{cards}</div>'
        f'<div class="pair even"><div class="panel">{chart}</div>'
        f"<div>{verdicts}<h3>Driver versions</h3>{drivers}</div></div></section>"
    )


def _measured(r: Review) -> str:
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
    chart = ratio_chart(bars, "ratios", "Measured / expected per accelerator and check")
    body = []
    group = None
    for row in r.ratios:
        if row.accelerator != group:
            group = row.accelerator
            body.append(f'<tr class="group"><th colspan="7">{esc(group)}</th></tr>')
        cells = [
            f'<td title="{esc(row.unit or "")}">{esc(row.check)}</td>',
            f'<td class="n">{row.reports:,}</td>',
            f'<td class="n"><span class="badge {row.band}">{row.median:.0%}</span></td>',
            f'<td class="n">{_pct(row.p10)}</td>',
            f'<td class="n">{_pct(row.p90)}</td>',
            f'<td class="n">{row.failed:,}</td>',
            f'<td class="n">{row.warned:,}</td>',
        ]
        body.append(f"<tr>{''.join(cells)}</tr>")
    if not body:
        body.append('<tr><td class="empty" colspan="7">none</td></tr>')
    head = "".join(
        f'<th class="n">{h}</th>' if i else f"<th>{h}</th>"
        for i, h in enumerate(("check", "runs", "median", "p10", "p90", "fail", "warn"))
    )
    table = (
        f'<table class="compact ratios"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )
    legend = (
        '<p class="legend small">'
        f'<span><i style="background:{COLOURS["pass"]}"></i>median &ge; {PASS_AT:.0%} (pass)</span>'
        f'<span><i style="background:{COLOURS["warn"]}"></i>&ge; {WARN_AT:.0%} (warn)</span>'
        f'<span><i style="background:{COLOURS["fail"]}"></i>below (fail)</span>'
        "<span>whiskers: p10&ndash;p90 across runs; solid line: 100% of expected</span></p>"
    )
    return (
        '<section id="measured"><h2>2. Measured / expected</h2>'
        '<p class="how">Each check\'s measured figure divided by what the catalog expects of the '
        "accelerator it was verified against (its measured reference, else 70% of the datasheet "
        "peak; transfers against the live PCIe link), across every stored run.</p>"
        f'{legend}<div class="pair"><div class="panel">{chart}</div>'
        f'<div class="panel">{table}</div></div></section>'
    )


def _outliers(r: Review) -> str:
    by_host: dict[tuple[str, str], list[Outlier]] = {}
    for o in r.outliers:  # lowest ratio first: a host's first row is its worst
        by_host.setdefault((o.host, o.accelerator), []).append(o)
    shown = list(by_host.items())[:MAX_OUTLIER_ROWS]
    rows = []
    for (host, accelerator), found in shown:
        worst = found[0]
        checks = "<br>".join(
            f"<b>{esc(o.check)}</b> {_pct(o.ratio)}"
            + (
                f" (fleet p10 {_pct(o.fleet_p10)}, median {_pct(o.fleet_median)})"
                if o.ratio is not None
                else ""
            )
            + (
                f', <span class="badge fail">failed {o.failed} of {o.runs}</span>'
                if o.failed
                else ""
            )
            for o in found
        )
        rows.append(
            [
                esc(host),
                esc(accelerator),
                _pct(worst.ratio),
                f"{len(found)}",
                f"{max(o.runs for o in found):,}",
                checks,
            ]
        )
    table = _table(
        ["host", "accelerator", "worst", "checks", "runs", "flagged checks: host median ratio"],
        rows,
        numeric=(2, 3, 4),
    )
    more = (
        f'<p class="small">{len(by_host) - len(shown):,} more hosts left out '
        "(all are in the --json output).</p>"
        if len(by_host) > len(shown)
        else ""
    )
    hosts = len({o.host for o in r.outliers})
    return (
        '<section id="outliers"><h2>3. Outlier hosts</h2>'
        f'<p class="how">{hosts:,} of {r.inventory.hosts:,} hosts flagged: a check failed at '
        "least once on the host, or the host's median measured / expected sits below the "
        "fleet's p10 for that accelerator and check and more than "
        f"{r.outlier_gap:.0%} under the fleet median. Worst ratio first.</p>"
        f'<div class="panel">{table}</div>{more}</section>'
    )


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
        if s.finding == "idle" and s.current_hourly_usd is not None:
            g.released += s.current_hourly_usd * HOURS_PER_MONTH
        g.codes.update(dict.fromkeys(s.reason_codes))
    return sorted(groups.values(), key=lambda g: (-g.saving, -g.released, g.first.host))


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _savings(r: Review) -> str:
    total = sum(s.monthly_saving_usd or 0.0 for s in r.savings)
    released = sum(
        (s.current_hourly_usd or 0.0) * HOURS_PER_MONTH for s in r.savings if s.finding == "idle"
    )
    findings = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in r.findings.items()) or "none"
    where = f"in {r.region}" if r.region else "in the region of the current price"
    groups = _group_savings(r.savings)
    by_host: dict[str, float] = {}
    for g in groups:
        by_host[g.first.host] = by_host.get(g.first.host, 0.0) + g.saving
    top = sorted(by_host.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_COST_BARS]
    chart = bar_chart(
        [Bar(h, v, f"{h}: possible saving ${v:,.0f} per month") for h, v in top if v > 0],
        "savings-by-host",
        f"Possible saving per month, top {len(top)} hosts",
        lambda v: f"${v:,.0f}",
    )
    bases: dict[str, int] = {}
    rows = []
    for g in groups[:MAX_SAVING_ROWS]:
        s = g.first
        ref = bases.setdefault(s.current_basis, len(bases) + 1)
        sug = s.suggestion
        codes = ", ".join(g.codes)
        rows.append(
            [
                esc(s.host)
                + (
                    f' <span class="small">{esc(s.instance_type)}</span>' if s.instance_type else ""
                ),
                f'<span title="{esc(codes)}">{_badge(s.finding)}</span>',
                esc(", ".join(str(i) for i in sorted(g.gpus))) + f" ({esc(s.accelerator or '?')})",
                _num(g.busy_p95, "{:.0f}%"),
                _num(g.memory_peak_gb, "{:,.1f} GB"),
                f'{_usd(s.current_hourly_usd, cents=True)} <sup class="small">[{ref}]</sup>',
                (
                    f'{esc(sug.instance_type)} <span class="small">{esc(s.suggestion_name)}, '
                    f"{esc(sug.region)}, {_usd(sug.hourly_usd, cents=True)}/h</span>"
                    if sug
                    else f'<span class="small">{esc(s.note.split(";")[0] or "-")}</span>'
                ),
                f"<b>{_usd(g.saving)}</b>" if g.saving else "-",
                _usd(g.released) if g.released else "-",
            ]
        )
    table = _table(
        [
            "host",
            "finding",
            "GPUs",
            "busy p95",
            "peak memory",
            "current $/h per GPU",
            "suggested instead, per GPU",
            "saving / month",
            "if released",
        ],
        rows,
        numeric=(3, 4, 5, 7, 8),
    )
    more = (
        f'<p class="small">{len(groups) - len(rows):,} more rows left out '
        "(every GPU is in the --json output).</p>"
        if len(groups) > len(rows)
        else ""
    )
    refs = "".join(f"<li>{esc(b)}</li>" for b in bases)
    return (
        '<section id="savings"><h2>4. Idle and over-provisioned GPUs</h2>'
        f'<p class="how">From each monitored host\'s latest utilisation report ({esc(findings)}). '
        f"Suggested: the cheapest on-demand catalog instance type {esc(where)} whose GPU holds the "
        f"observed peak memory &times; {MEMORY_HEADROOM:g} and whose dense 16-bit peak covers "
        "the current GPU's peak &times; its p95 busy share (NVML's busy share counts time, not "
        "SMs, so this errs large). Saving = (current &minus; suggested hourly) &times; "
        f"{HOURS_PER_MONTH} h, per GPU, summed over the GPUs of a row.</p>"
        f'<div class="cards">{_card(len(r.savings), "idle or over-provisioned GPUs")}'
        f"{_card(_usd(total), 'saving per month, moved to the suggestions')}"
        f"{_card(_usd(released), 'per month, idle GPUs released instead')}</div>"
        f'<div class="panel narrow">{chart}</div>'
        f'<div class="panel">{table}{more}'
        f'<p class="small">Current price from:</p><ol class="small">{refs}</ol></div>'
        "</section>"
    )


def _workload(w: WorkloadResult, index: int) -> str:
    costs = w.costs
    bars = [
        Bar(
            c.instance_type,  # the id alone, so that it is never cut; the GPUs are in the table
            c.cost_usd,
            f"{c.instance_type} in {c.region}: {c.hours:,.1f} h x ${c.hourly_usd:,.2f}/h = "
            f"${c.cost_usd:,.0f}; efficiency {c.efficiency:.3f} ({c.efficiency_source})",
            COLOURS["best"] if i == 0 else COLOURS["neutral"],
        )
        for i, c in enumerate(costs[:MAX_COST_BARS])
    ]
    chart = bar_chart(
        bars, f"cost-{index}", f"{w.label}: cost per run, cheapest first", lambda v: f"${v:,.0f}"
    )
    # The id and the cost (the sort column) come first so that they never scroll out of view.
    table = _table(
        ["instance type", "cost", "GPUs", "$/h", "hours", "$ / 1e9 tokens", "efficiency"],
        [
            [
                f'{esc(c.instance_type)} <span class="small">{esc(c.region)}</span>',
                f"<b>{_usd(c.cost_usd)}</b>",
                f"{c.gpus}\u00d7 {esc(c.accelerator)}"
                + (f' <span class="small">{c.nodes} nodes</span>' if c.nodes > 1 else ""),
                _usd(c.hourly_usd, cents=True),
                f"{c.hours:,.1f}",
                _usd(c.usd_per_billion_tokens, cents=True),
                f'<span title="{esc(c.efficiency_source)}">{c.efficiency:.3f} '
                f'<span class="small">{_efficiency_kind(c.efficiency_source)}</span></span>',
            ]
            for c in costs
        ],
        numeric=(1, 3, 4, 5, 6),
        cls="costs",
    )
    left = (
        f'<details class="small"><summary>{len(w.left_out)} instance type(s) not costed'
        "</summary><ul>" + "".join(f"<li>{esc(x)}</li>" for x in w.left_out) + "</ul></details>"
        if w.left_out
        else ""
    )
    flops = f" = {w.flops:.3g} FLOP" if w.flops is not None else ""
    return (
        f"<h3>{esc(w.label)}</h3>"
        f'<p class="small">Workload profile {esc(w.workload)} (efficiency '
        f"{w.profile_efficiency:.2f}); {esc(w.flops_formula)}{flops}.</p>"
        f'<div class="panel narrow">{chart}</div><div class="panel">{table}{left}</div>'
    )


def _efficiency_kind(source: str) -> str:
    return "fleet" if source.startswith("fleet") else "default"


def _workloads(r: Review) -> str:
    used = {c.accelerator for w in r.workloads for c in w.costs}
    eff = _table(
        ["accelerator", "fleet matmul_bf16 measured / expected", "reports", "applied"],
        [
            [
                esc(f.accelerator),
                _pct(f.ratio),
                f"{f.reports:,}",
                "yes" if f.applied else f"no (fewer than {r.min_fleet_reports})",
            ]
            for f in r.calibration
            if f.accelerator in used
        ],
        numeric=(1, 2),
    )
    where = f"in {r.region}" if r.region else "in its cheapest region"
    return (
        '<section id="workloads"><h2>5. Cost per unit of work</h2>'
        '<p class="how">Each job as <code>advisor estimate</code> prices it on each GPU instance '
        f"type at its on-demand hourly price {esc(where)}: the fewest GPUs that hold the model "
        "(ZeRO-3, activation recomputation) and the workload profile's GPU count; hours = "
        "8&middot;N&middot;D / (GPUs &times; dense bf16 peak &times; efficiency); cost = hours "
        "&times; hourly price of the nodes. Efficiency is the workload profile's, &times; the "
        "fleet's median measured / expected matmul_bf16 for the accelerator where at least "
        f"{r.min_fleet_reports} reports give one. Not costed: instance types the job does not fit "
        "on (one node for fine-tuning).</p>"
        + "".join(_workload(w, i) for i, w in enumerate(r.workloads))
        + f"<h3>Fleet calibration</h3>{eff}</section>"
    )


def _notes(r: Review) -> str:
    if not r.notes:
        return ""
    items = "".join(f"<li>{esc(n)}</li>" for n in r.notes)
    return f'<section id="notes"><h2>Notes</h2><ul class="small">{items}</ul></section>'


def render_html(r: Review) -> str:
    region = esc(r.region) if r.region else "every region (cheapest)"
    nav = "".join(
        f'<a href="#{a}">{t}</a>'
        for a, t in (
            ("inventory", "Inventory"),
            ("measured", "Measured / expected"),
            ("outliers", "Outliers"),
            ("savings", "Savings"),
            ("workloads", "Cost per work"),
        )
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>Fleet review, {esc(r.generated_at)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>Fleet review</h1>"
        f'<p class="meta">Generated {esc(r.generated_at)} from {esc(r.source)}; '
        f"prices: on demand, {region}.</p><nav>{nav}</nav></header>"
        + _inventory(r)
        + _measured(r)
        + _outliers(r)
        + _savings(r)
        + _workloads(r)
        + _notes(r)
        + "<footer><p>advisor review: a self-contained page (inline CSS and SVG, no scripts, "
        "no external requests).</p></footer></body></html>\n"
    )
