"""`advisor estimate`: memory, FLOPs, time and cost of one workload on one kind of hardware."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from advisor.cli import sizing_opts as opts
from advisor.cli.common import console, emit_json, get_catalog, money
from advisor.planning.estimate import Estimate, estimate
from advisor.planning.fit import margin_sentence
from advisor.request import EstimateRequest, parse_request


@opts.request_options(EstimateRequest)
def estimate_cmd(
    fields: dict[str, Any],
    server: opts.Server = None,
    json_out: opts.JsonOut = False,
) -> None:
    """Every intermediate figure with its formula: memory per GPU, FLOPs, hours, cost."""
    request = parse_request(EstimateRequest, fields)
    result = estimate(get_catalog(), request, opts.fleet_from_server(server))
    if json_out:
        emit_json(result.model_dump(mode="json"))
    else:
        render(result)
    if not result.fits:
        raise typer.Exit(1)


def render(r: Estimate) -> None:
    out = console()
    hw = r.hardware
    where = hw.instance_type or f"{hw.gpus_per_node} x {hw.accelerator} per node"
    table = Table(title=Text(f"{r.model} ({r.workload}) on {where}"))
    for col in ("figure", "value", "unit", "formula"):
        table.add_column(col, overflow="fold", justify="right" if col == "value" else "left")
    for f in r.figures:
        table.add_row(Text(f.name), f"{f.value:,.4g}", Text(f.unit), Text(f.formula))
    out.print(table)
    for line in _summary(r):
        out.print(line, highlight=False, markup=False)


def _summary(r: Estimate) -> list[str]:
    """The lines under the table: GPUs and memory, efficiency, time and cost, notes."""
    hw = r.hardware
    lines = [
        f"{hw.nodes} node(s), {hw.gpus} GPU(s); {r.memory_per_gpu_gb:,.1f} GB per GPU",
        f"efficiency {r.efficiency:.2f}: {r.efficiency_source}",
    ]
    if r.speed_source is not None:
        lines.append(f"speeds: {r.speed_source}")
    if not r.fits:  # no time or cost headline for a plan that cannot run: the notes say why
        lines.append("does not fit: no time or cost (the notes say why)")
    elif r.hours is not None:
        lines.append(
            f"{r.hours:,.1f} hours ({r.hours / 24:,.1f} days); {money(r.hourly_usd)}/h; "
            f"cost {money(r.cost_usd)}"
        )
    lines += _margins(r)
    if r.layout is not None and r.mfu is not None:
        lay = r.layout
        ep = f" (EP {lay.expert_parallel})" if lay.expert_parallel > 1 else ""
        cp = f" x CP {lay.context_parallel}" if lay.context_parallel > 1 else ""
        lines.append(
            f"DP {lay.data_parallel}{ep} x TP {lay.tensor_parallel} x PP "
            f"{lay.pipeline_parallel}{cp}, ZeRO stage {lay.zero_stage}; MFU {r.mfu:.2f} on "
            "model FLOPs" + (f", HFU {r.hfu:.2f}" if r.hfu and r.hfu != r.mfu else "")
        )
    if r.cost_per_million_tokens_usd is not None and r.tokens_per_s is not None:
        lines.append(
            f"{r.tokens_per_s:,.0f} tokens/s over {r.replicas} replica(s); "
            f"{money(r.cost_per_million_tokens_usd)} per million tokens"
        )
    return lines + [f"note: {n}" for n in r.notes]


def _margins(r: Estimate) -> list[str]:
    """The deadline margin and the budget's tokens, when the estimate has them."""
    out = []
    if r.fits and r.hours_range is not None and r.hours is not None:
        out.append(margin_sentence(r.hours, r.hours_range, r.mfu))
    if r.tokens_within_budget is not None:
        out.append(f"{r.tokens_within_budget:,.4g} tokens within the budget at this plan's cost")
    return out
