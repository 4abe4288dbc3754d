"""`advisor recommend`: the rule engine from the command line."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from advisor.cli import sizing_opts as opts
from advisor.cli.common import console, emit_json, get_catalog, money
from advisor.engine import Recommendation, Result
from advisor.engine import recommend as run_engine
from advisor.request import Workload, parse_request


def recommend(
    workload: Annotated[
        str,
        typer.Option(
            help="large_scale_training, fine_tuning, high_throughput_inference, "
            "low_latency_inference, edge_inference, batch_processing"
        ),
    ],
    memory_gb: Annotated[
        float | None, typer.Option(help="Accelerator memory the job needs.")
    ] = None,
    power_budget_w: Annotated[float | None, typer.Option(help="Power budget in watts.")] = None,
    interconnect_gb_s: Annotated[
        float | None, typer.Option(help="Per-GPU GPU-to-GPU bandwidth needed, GB/s.")
    ] = None,
    region: Annotated[str | None, typer.Option(help="Cloud region, e.g. us-east-1.")] = None,
    provider: Annotated[str | None, typer.Option(help="aws, gcp or azure.")] = None,
    max_hourly_usd: Annotated[float | None, typer.Option(help="Budget in USD per hour.")] = None,
    purchase: opts.Purchase = "on_demand",
    gpu_count: Annotated[int | None, typer.Option(help="At least this many GPUs.")] = None,
    objective: Annotated[
        str | None, typer.Option(help="cheapest, performance or price_performance.")
    ] = None,
    limit: Annotated[int, typer.Option(help="How many recommendations to show.")] = 10,
    show_rejected: Annotated[bool, typer.Option(help="List every rejected candidate.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON for tools.")] = False,
    model: opts.Model = None,
    params_b: opts.ParamsB = None,
    tokens: opts.Tokens = None,
    zero_stage: opts.ZeroStage = 3,
    seq_len: opts.SeqLen = None,
    batch: opts.Batch = None,
    recompute: opts.Recompute = True,
    precision: opts.Precision = "bf16",
    context_tokens: opts.Context = None,
    throughput_tokens_s: opts.Throughput = None,
    server: opts.Server = None,
) -> None:
    """Recommend hardware for a workload; exit 1 when nothing satisfies the constraints."""
    request: dict[str, Any] = {
        "workload": workload,
        "memory_gb": memory_gb,
        "power_budget_w": power_budget_w,
        "interconnect_gb_s": interconnect_gb_s,
        "region": region,
        "provider": provider,
        "max_hourly_usd": max_hourly_usd,
        "purchase": opts.PURCHASES.get(purchase, purchase),
        "gpu_count": gpu_count,
        "objective": objective,
        "limit": limit,
        **opts.sizing_fields(
            model,
            params_b,
            tokens,
            zero_stage,
            seq_len,
            batch,
            recompute,
            precision,
            context_tokens,
            throughput_tokens_s,
        ),
    }
    parsed = parse_request(Workload, request)
    fleet = opts.fleet_from_server(server) if parsed.sized else None
    result = run_engine(get_catalog(), parsed, fleet)
    if json_out:
        emit_json(result.to_dict())
    else:
        render(result, show_rejected)
    if not result.ok:
        raise typer.Exit(1)


def render(result: Result, show_rejected: bool, reasons_for: int = 3) -> None:
    out = console()
    if result.recommendations:
        table = Table(title=f"{result.workload}: best by {result.objective}")
        for col in ("#", "option", "where", "hardware", "nodes", "$/h", "power W", "score"):
            table.add_column(col, justify="right" if col in ("$/h", "power W", "score") else "left")
        for n, r in enumerate(result.recommendations, 1):
            table.add_row(
                str(n),
                _option(r),
                _where(r),
                _hardware(r),
                str(r.nodes),
                money(r.hourly_usd),
                f"{r.power_w:g}",
                f"{r.score:.2f}",
            )
        out.print(table)
        for n, r in enumerate(result.recommendations[:reasons_for], 1):
            out.print(f"[bold]#{n} {_option(r)}[/]", highlight=False)
            for reason in r.reasons:
                out.print(f"  - {reason}", highlight=False, markup=False)
    out.print(result.explanation, highlight=False, markup=False)
    if not result.recommendations and result.alternatives:
        for alt in result.alternatives:
            out.print(f"  - {alt.sentence}", highlight=False, markup=False)
    if show_rejected and result.rejected:
        table = Table(title=f"{len(result.rejected)} rejected")
        table.add_column("id")
        table.add_column("codes")
        table.add_column("reasons", overflow="fold")
        for rej in result.rejected:
            table.add_row(rej.id, ", ".join(rej.codes), "\n".join(rej.reasons))
        out.print(table)
    elif result.rejected:
        out.print(f"{len(result.rejected)} candidate(s) rejected (--show-rejected lists them)")


def _option(r: Recommendation) -> str:
    return r.instance_type or f"{r.device} ({r.power_mode or 'default'} mode)"


def _where(r: Recommendation) -> str:
    return f"{r.provider} {r.region} {r.purchase}" if r.provider else "edge device"


def _hardware(r: Recommendation) -> str:
    return f"{r.gpu_count} x {r.accelerator}" if r.gpu_count else r.accelerator
