"""`advisor doctor --node`: every GPU of this machine at one look (probes.node_view), each
GPU's state and its processes' finding, and the dollars an hour the node leaves idle or
under-used (advisor.fleet.node_view), priced as the doctor prices a job (the review's pricing)."""

from __future__ import annotations

import datetime as dt
import socket

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from advisor.catalog import Catalog
from advisor.cli.common import console, money
from advisor.fleet.node_view import NodeView, node_view
from advisor.fleet.utilisation import classify_report
from advisor.review.costs import gpu_price
from advisor.review.data import usage_record
from probes.node_view import read_node
from probes.nvml import Nvml
from probes.report import UtilisationReport

DEFAULT_WINDOW_S = 2.0  # long enough for GPM's activity between two samples to mean something


def snapshot(
    catalog: Catalog, nvml: Nvml, instance_type: str | None, window_s: float | None
) -> NodeView:
    window = DEFAULT_WINDOW_S if window_s is None else window_s
    created = dt.datetime.now(dt.UTC)
    readings, summaries, unmeasured = read_node(nvml, window)
    base = classify_report(
        UtilisationReport(
            created_at=created,
            host=socket.gethostname(),
            instance_type=instance_type,
            duration_s=window,
            interval_s=window,
            gpus=summaries,
        ),
        catalog,
    )
    record = usage_record(base)
    per_gpu, basis = gpu_price(catalog, record, record.gpus[0]) if record.gpus else (None, None)
    return node_view(readings, per_gpu, created, base.host, window, basis, unmeasured)


def lines(view: NodeView) -> list[str]:
    """The view as console markup, a line each: the node, each GPU and its processes, the
    dollars, the price's basis and what was not measured."""
    out = [f"advisor doctor --node: {escape(view.host)}, {len(view.gpus)} GPU(s)"]
    for g in view.gpus:
        active = "-" if g.active_pct is None else f"{g.active_pct:.0f}%"
        mem = "-" if g.memory_used_mib is None else f"{g.memory_used_mib / 1024:.1f} GiB"
        power = "-" if g.power_w is None else f"{g.power_w:.0f} W"
        out.append(
            f"  GPU {g.index} {escape(g.name or '?')}: {g.state}, activity {active}, memory "
            f"{mem}, power {power}, idle {money(g.idle_usd_per_h)}/h"
        )
        for p in g.processes or []:
            used = "-" if p.used_memory_mib is None else f"{p.used_memory_mib / 1024:.1f} GiB"
            finding = f" [{p.finding}]" if p.finding else ""
            out.append(f"    pid {p.pid} {escape(p.name or '?')}: {used}{escape(finding)}")
    out.append(
        f"idle {money(view.idle_usd_per_h)}/h, under-used {money(view.under_used_usd_per_h)}/h"
    )
    if view.price_basis:
        out.append(f"[dim]price: {escape(view.price_basis)}[/]")
    out += [f"[dim]not measured: {escape(line)}[/]" for line in view.unmeasured]
    return out


def render(view: NodeView) -> None:
    out = console()
    for line in lines(view):
        out.print(line, highlight=False, soft_wrap=True)


def watch(
    catalog: Catalog,
    nvml: Nvml,
    instance_type: str | None,
    window_s: float | None,
    refreshes: int | None = None,
    out: Console | None = None,
) -> NodeView | None:
    """The view redrawn in place after each window until Ctrl-C (or `refreshes` views): a
    snapshot is the refresh, so the window is the refresh period. The last view, or None when
    interrupted before the first."""
    view = None
    shown = 0
    with Live(console=out or console(), auto_refresh=False, transient=False) as live:
        try:
            while refreshes is None or shown < refreshes:
                view = snapshot(catalog, nvml, instance_type, window_s)
                live.update(Group(*(Text.from_markup(line) for line in lines(view))), refresh=True)
                shown += 1
        except KeyboardInterrupt:
            pass
    return view
