"""`advisor doctor --node`: every GPU of this machine at one look (probes.node_view), each
GPU's state and its processes' finding, and the dollars an hour the node leaves idle or
under-used (advisor.fleet.node_view), priced as the doctor prices a job (the review's pricing)."""

from __future__ import annotations

import datetime as dt
import socket

from rich.markup import escape

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


def render(view: NodeView) -> None:
    out = console()
    out.print(
        f"advisor doctor --node: {escape(view.host)}, {len(view.gpus)} GPU(s)", highlight=False
    )
    for g in view.gpus:
        active = "-" if g.active_pct is None else f"{g.active_pct:.0f}%"
        mem = "-" if g.memory_used_mib is None else f"{g.memory_used_mib / 1024:.1f} GiB"
        power = "-" if g.power_w is None else f"{g.power_w:.0f} W"
        out.print(
            f"  GPU {g.index} {escape(g.name or '?')}: {g.state}, activity {active}, memory "
            f"{mem}, power {power}, idle {money(g.idle_usd_per_h)}/h",
            highlight=False,
        )
        for p in g.processes or []:
            used = "-" if p.used_memory_mib is None else f"{p.used_memory_mib / 1024:.1f} GiB"
            finding = f" [{p.finding}]" if p.finding else ""
            out.print(f"    pid {p.pid} {escape(p.name or '?')}: {used}{finding}", highlight=False)
    out.print(
        f"idle {money(view.idle_usd_per_h)}/h, under-used {money(view.under_used_usd_per_h)}/h",
        highlight=False,
    )
    if view.price_basis:
        out.print(f"[dim]price: {escape(view.price_basis)}[/]", highlight=False, soft_wrap=True)
    for line in view.unmeasured:
        out.print(f"[dim]not measured: {escape(line)}[/]", highlight=False, soft_wrap=True)
