"""`advisor recommend`: the rule engine from the command line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from advisor.cli import sizing_opts as opts
from advisor.cli.common import console, emit_json, get_catalog, money
from advisor.cli.tables import Column, print_table
from advisor.engine import Recommendation, Result, SizedFigures
from advisor.engine import recommend as run_engine
from advisor.request import RecommendRequest, parse_request


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
    each_offering: Annotated[
        bool,
        typer.Option(
            "--each-offering",
            help="List every region and purchase option of a type (default: its best one).",
        ),
    ] = False,
    show_rejected: Annotated[
        bool,
        typer.Option(help="List every rejected candidate (in --json too; else counted)."),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON for tools.")] = False,
    model: opts.Model = None,
    params_b: opts.ParamsB = None,
    tokens: opts.Tokens = None,
    zero_stage: opts.ZeroStage = None,
    seq_len: opts.SeqLen = None,
    batch: opts.Batch = None,
    recompute: opts.Recompute = None,
    precision: opts.Precision = "bf16",
    context_tokens: opts.Context = None,
    throughput_tokens_s: opts.Throughput = None,
    input_tokens: opts.InputTokens = None,
    output_tokens: opts.OutputTokens = None,
    concurrency: opts.Concurrency = None,
    request_rate: opts.RequestRate = None,
    tensor_parallel: opts.TensorParallel = None,
    max_ttft_ms: opts.MaxTtftMs = None,
    max_itl_ms: opts.MaxItlMs = None,
    deadline_days: opts.DeadlineDays = None,
    max_gpus: opts.MaxGpus = None,
    global_batch_tokens: opts.GlobalBatchTokens = None,
    server: opts.Server = None,
    method: opts.Method = "full",
    lora_rank: opts.LoraRank = 16,
    checkpoint_interval_h: opts.CheckpointIntervalH = None,
    include_flagged_prices: opts.IncludeFlaggedPrices = False,
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
        "purchase": purchase,
        "gpu_count": gpu_count,
        "objective": objective,
        "limit": limit,
        "show_rejected": show_rejected,
        "each_offering": each_offering,
        "include_flagged_prices": include_flagged_prices,
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
            opts.serving_fields(
                input_tokens,
                output_tokens,
                concurrency,
                tensor_parallel,
                max_ttft_ms,
                max_itl_ms,
                request_rate,
            ),
        ),
        **opts.method_fields(method, lora_rank),
        **opts.deadline_fields(deadline_days, max_gpus, global_batch_tokens),
        **opts.spot_fields(checkpoint_interval_h),
    }
    parsed = parse_request(RecommendRequest, request)
    fleet = opts.fleet_from_server(server) if parsed.sized else None
    result = run_engine(get_catalog(), parsed, fleet)
    if json_out:
        emit_json(result.listing(show_rejected).to_dict())
    else:
        render(result, show_rejected)
    if not result.ok:
        raise typer.Exit(1)


# The column each objective sorts by: shown whole, never left out.
SORT_COLUMNS: dict[str, tuple[str, Callable[[Recommendation], str]]] = {
    "cheapest": ("$/h", lambda r: money(r.hourly_usd)),
    "cost_to_completion": (
        "to completion",
        lambda r: money(r.sizing.cost_to_completion_usd if r.sizing else None),
    ),
    "cost_per_million_tokens": (
        "$/M tokens",
        lambda r: money(r.sizing.cost_per_million_tokens_usd if r.sizing else None),
    ),
    "time": ("hours", lambda r: _hours(r.sizing.hours if r.sizing else None)),
}


def render(result: Result, show_rejected: bool, reasons_for: int = 3) -> None:
    out = console()
    if result.recommendations:
        _recommendation_table(result)
        for n, r in enumerate(result.recommendations[:reasons_for], 1):
            out.print(f"#{n} {_option(r)}", style="bold", highlight=False, markup=False)
            for reason in r.reasons:
                out.print(f"  - {reason}", highlight=False, markup=False)
            if r.price_flag is not None:
                out.print(f"  - flagged price: {r.price_flag}", highlight=False, markup=False)
    out.print(result.explanation, highlight=False, markup=False)
    if not result.recommendations and result.alternatives:
        for alt in result.alternatives:
            out.print(f"  - {alt.sentence}", highlight=False, markup=False)
    if show_rejected and result.rejected:
        print_table(
            out,
            f"{len(result.rejected)} rejected",
            [Column("id", key=True), Column("codes", drop_rank=1), Column("reasons", drop_rank=2)],
            [(rej.id, ", ".join(rej.codes), "\n".join(rej.reasons)) for rej in result.rejected],
        )
    elif result.rejected_count:
        counts = "; ".join(f"{c.words} {c.count}" for c in result.rejected_summary[:4])
        out.print(
            f"{result.rejected_count} candidate(s) rejected ({counts}; --show-rejected lists them)",
            highlight=False,
            markup=False,
        )


def _recommendation_table(result: Result) -> None:
    """Rows best first; the option id and the column they are sorted by are always whole.
    Served models add what each option delivers, kept ahead of the generic columns."""
    sort_header, sort_cell = SORT_COLUMNS.get(result.objective, ("score", _score))
    cells: list[tuple[Column, Callable[[Recommendation], str]]] = [
        (Column("where", drop_rank=5, min_width=16), _where),
        (Column("hardware", drop_rank=4, min_width=10), _hardware),
        (Column("nodes", "right", drop_rank=1), lambda r: str(r.nodes)),
        (Column("$/h", "right", drop_rank=3), lambda r: money(r.hourly_usd)),
        (Column("power W", "right", drop_rank=0), lambda r: f"{r.power_w:g}"),
        (Column("score", "right", drop_rank=2), _score),
    ]
    if any(r.sizing and r.sizing.itl_ms is not None for r in result.recommendations):
        cells = SERVING_COLUMNS + cells
    # The sort column is not repeated among the others.
    cells = [(c, f) for c, f in cells if c.header != sort_header]
    columns = [Column("#", key=True), Column("option", key=True)]
    columns += [Column(sort_header, "right", key=True), *(c for c, _ in cells)]
    rows = [
        [str(n), _option(r), sort_cell(r), *(f(r) for _, f in cells)]
        for n, r in enumerate(result.recommendations, 1)
    ]
    penalised = any(
        reason.startswith("scored ") for r in result.recommendations for reason in r.reasons
    )
    after = " x soft-preference penalties (in the reasons)" if penalised else ""
    print_table(console(), f"{result.workload}: best by {result.objective}{after}", columns, rows)


def _serving(r: Recommendation, figure: Callable[[SizedFigures], str]) -> str:
    return figure(r.sizing) if r.sizing is not None and r.sizing.itl_ms is not None else "-"


# What a served model's option delivers (advisor/perf/inference.py), in the table.
SERVING_COLUMNS: list[tuple[Column, Callable[[Recommendation], str]]] = [
    (
        Column("TTFT ms", "right", drop_rank=14),
        lambda r: _serving(r, lambda s: f"{s.ttft_ms:,.0f}"),
    ),
    (Column("ITL ms", "right", drop_rank=15), lambda r: _serving(r, lambda s: f"{s.itl_ms:,.1f}")),
    (
        Column("tokens/s", "right", drop_rank=13),
        lambda r: _serving(r, lambda s: f"{s.tokens_per_s or 0:,.0f}"),
    ),
    (
        Column("replicas x TP", "right", drop_rank=12),
        lambda r: _serving(r, lambda s: f"{s.replicas} x {s.tensor_parallel}"),
    ),
    (
        Column("$/M tokens", "right", drop_rank=11),
        lambda r: money(r.sizing.cost_per_million_tokens_usd if r.sizing else None),
    ),
]


def _score(r: Recommendation) -> str:
    return f"{r.score:.2f}"


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _option(r: Recommendation) -> str:
    if r.instance_type is None:
        return f"{r.device} ({r.power_mode or 'default'} mode)"
    return f"{r.instance_type} (flagged price)" if r.price_flag else r.instance_type


def _where(r: Recommendation) -> str:
    return f"{r.provider} {r.region} {r.purchase}" if r.provider else "edge device"


def _hardware(r: Recommendation) -> str:
    return f"{r.gpu_count} x {r.accelerator}" if r.gpu_count else r.accelerator
