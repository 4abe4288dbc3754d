"""`advisor compare TYPE TYPE...`: one workload on several instance types, side by side.

Each column is `advisor estimate --instance-type TYPE` with the same request (the one estimate
function, advisor/planning/estimate.py): nothing is computed here but the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from advisor.cli import sizing_opts as opts
from advisor.cli.common import console, emit_json, get_catalog, money
from advisor.errors import InputError
from advisor.planning.estimate import Estimate, estimate
from advisor.request import EstimateRequest, parse_request

# (row label, the figure of one estimate as text); a figure an estimate lacks is "-"
ROWS: tuple[tuple[str, Callable[[Estimate], str]], ...] = (
    ("fits", lambda r: "yes" if r.fits else "no"),
    ("nodes x GPUs", lambda r: f"{r.hardware.nodes} x {r.hardware.gpus_per_node}"),
    ("memory per GPU (GB)", lambda r: f"{r.memory_per_gpu_gb:,.1f}"),
    ("$/h", lambda r: money(r.hourly_usd)),
    ("hours", lambda r: _num(r.hours, 1)),
    ("cost", lambda r: money(r.cost_usd)),
    ("MFU", lambda r: _num(r.mfu, 2)),
    ("TTFT (ms)", lambda r: _num(r.ttft_ms, 0)),
    ("ITL (ms)", lambda r: _num(r.itl_ms, 1)),
    ("tokens/s", lambda r: _num(r.tokens_per_s, 0)),
    ("$ per M tokens", lambda r: money(r.cost_per_million_tokens_usd)),
)


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


@opts.request_options(EstimateRequest)
def compare_cmd(
    fields: dict[str, Any],
    types: Annotated[list[str], typer.Argument(help="Instance types to compare (two or more).")],
    json_out: opts.JsonOut = False,
) -> None:
    """One workload on several instance types side by side (each column is `estimate`)."""
    if len(types) < 2:
        raise InputError("compare takes two or more instance types", field="types")
    if fields.get("instance_type") or fields.get("accelerator"):
        raise InputError(
            "compare takes the instance types as arguments: drop --instance-type/--accelerator",
            field="instance_type",
        )
    catalog = get_catalog()
    results = [
        estimate(catalog, parse_request(EstimateRequest, {**fields, "instance_type": t}))
        for t in types
    ]
    if json_out:
        emit_json({"compared": [r.model_dump(mode="json") for r in results]})
        return
    render(results)


def render(results: list[Estimate]) -> None:
    first = results[0]
    table = Table(title=Text(f"{first.model} ({first.workload})"))
    table.add_column("figure")
    for r in results:
        table.add_column(Text(r.hardware.instance_type or r.hardware.accelerator), justify="right")
    for label, cell in ROWS:
        cells = [cell(r) for r in results]
        if any(c not in ("-", money(None)) for c in cells):
            table.add_row(label, *cells)
    console().print(table)
