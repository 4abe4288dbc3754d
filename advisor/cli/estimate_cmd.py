"""`advisor estimate`: memory, FLOPs, time and cost of one workload on one kind of hardware."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from advisor.cli import sizing_opts as opts
from advisor.cli.common import console, emit_json, get_catalog, money
from advisor.planning.estimate import Estimate, estimate
from advisor.request import EstimateRequest, parse_request


def estimate_cmd(
    workload: opts.WorkloadOpt,
    model: opts.Model = None,
    params_b: opts.ParamsB = None,
    tokens: opts.Tokens = None,
    instance_type: Annotated[
        str | None,
        typer.Option(
            "--instance-type", "-i", rich_help_panel=opts.HARDWARE, help="Priced instance type id."
        ),
    ] = None,
    accelerator: Annotated[
        str | None,
        typer.Option(
            "--accelerator", "-a", rich_help_panel=opts.HARDWARE, help="Accelerator id (no price)."
        ),
    ] = None,
    gpus_per_node: Annotated[
        int | None,
        typer.Option(
            rich_help_panel=opts.HARDWARE,
            help="GPUs per node with --accelerator (default: its reference system's, else 8).",
        ),
    ] = None,
    gpu_count: Annotated[
        int | None,
        typer.Option(
            "--gpu-count",
            "-g",
            rich_help_panel=opts.HARDWARE,
            help="GPUs of the deployment or job (with --accelerator: on nodes of min(this, the "
            "GPUs per node)); with --instance-type, whole nodes are rented.",
        ),
    ] = None,
    region: Annotated[
        str | None,
        typer.Option("--region", "-r", rich_help_panel=opts.HARDWARE, help="Price region."),
    ] = None,
    purchase: opts.Purchase = "on_demand",
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
    json_out: opts.JsonOut = False,
    include_flagged_prices: opts.IncludeFlaggedPrices = False,
) -> None:
    """Every intermediate figure with its formula: memory per GPU, FLOPs, hours, cost."""
    raw: dict[str, Any] = {
        "workload": workload,
        "instance_type": instance_type,
        "accelerator": accelerator,
        "gpus_per_node": gpus_per_node,
        "gpu_count": gpu_count,
        "region": region,
        "purchase": purchase,
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
    }
    request = parse_request(EstimateRequest, raw)
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
    if r.hours is not None:
        lines.append(
            f"{r.hours:,.1f} hours ({r.hours / 24:,.1f} days); {money(r.hourly_usd)}/h; "
            f"cost {money(r.cost_usd)}"
        )
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
