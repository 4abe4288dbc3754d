"""Options shared by `advisor recommend` and `advisor estimate` for sizing from a model."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from advisor.errors import InputError
from advisor.perf.calibration import Calibration, calibrations
from advisor.request import valid_values

# --help groups (Typer's rich_help_panel): 38 options in one list hid what goes with what.
WORK = "What runs"
CONSTRAINTS = "Constraints"
SERVING = "Serving (inference)"
TRAINING = "Training"
OUTPUT = "Output"


def words(field: str, last: str = "or") -> str:
    """A choice field's valid values for --help: the same tuple its error lists."""
    values = valid_values(field)
    return f"{', '.join(values[:-1])} {last} {values[-1]}"


HARDWARE = "Hardware"
# The shipped workload types (catalog/workloads.yaml; tests/test_cli_help.py holds the two to
# the same set): --help names them without loading the catalog.
WorkloadOpt = Annotated[
    str,
    typer.Option(
        "--workload",
        "-w",
        rich_help_panel=WORK,
        help="large_scale_training, fine_tuning, high_throughput_inference, "
        "low_latency_inference, edge_inference, batch_processing",
    ),
]
Region = Annotated[
    str | None,
    typer.Option(
        "--region",
        "-r",
        rich_help_panel=CONSTRAINTS,
        help="Cloud region, e.g. us-east-1; several comma-separated (us-east-1,eu-west-1); a "
        "prefix ending in * (europe-*).",
    ),
]
JsonOut = Annotated[
    bool, typer.Option("--json", "-j", rich_help_panel=OUTPUT, help="Print JSON for tools.")
]
Model = Annotated[
    str | None,
    typer.Option("--model", "-m", rich_help_panel=WORK, help="Model preset id, e.g. llama-3-8b."),
]
ParamsB = Annotated[
    float | None, typer.Option(rich_help_panel=WORK, help="Free-form model size in billions.")
]
Tokens = Annotated[
    float | None, typer.Option(rich_help_panel=WORK, help="Training tokens, e.g. 2e9.")
]
ZeroStage = Annotated[
    int | None,
    typer.Option(
        rich_help_panel=TRAINING,
        help="ZeRO stage 0-3 (3 = FSDP); default: 1 or 3, whichever plans better.",
    ),
]
SeqLen = Annotated[
    int | None, typer.Option(rich_help_panel=TRAINING, help="Training sequence length.")
]
Batch = Annotated[
    int | None,
    typer.Option(rich_help_panel=TRAINING, help="Micro-batch (training) / sequences (inference)."),
]
Recompute = Annotated[
    bool | None,
    typer.Option(
        "--recompute/--no-recompute",
        rich_help_panel=TRAINING,
        help="Full activation recomputation (training); default: as needed (without it when "
        "the activations fit, or whichever costs fewer GPU-hours).",
    ),
]
Precision = Annotated[
    str, typer.Option(rich_help_panel=WORK, help=f"Weights: {words('precision')} (fp4: Blackwell).")
]
Context = Annotated[
    int | None,
    typer.Option(rich_help_panel=SERVING, help="Context length per sequence (inference)."),
]
Throughput = Annotated[
    float | None, typer.Option(rich_help_panel=SERVING, help="Target tokens/s (inference).")
]
InputTokens = Annotated[
    int | None, typer.Option(rich_help_panel=SERVING, help="Prompt tokens (inference).")
]
OutputTokens = Annotated[
    int | None, typer.Option(rich_help_panel=SERVING, help="Output tokens (inference).")
]
Concurrency = Annotated[
    int | None,
    typer.Option(rich_help_panel=SERVING, help="Sequences per replica (default: best that fits)."),
]
RequestRate = Annotated[
    float | None,
    typer.Option(
        rich_help_panel=SERVING,
        help="Requests/s arriving (inference): sizes the replicas that sustain it within the "
        "latency targets; not with --concurrency.",
    ),
]
TensorParallel = Annotated[
    int | None, typer.Option(rich_help_panel=SERVING, help="GPUs per replica, inside one node.")
]
MaxTtftMs = Annotated[
    float | None,
    typer.Option(rich_help_panel=SERVING, help="Time-to-first-token target, ms (inference)."),
]
MaxItlMs = Annotated[
    float | None,
    typer.Option(rich_help_panel=SERVING, help="Inter-token latency target, ms (inference)."),
]
Purchase = Annotated[
    str,
    typer.Option(
        "--purchase",
        "-p",
        rich_help_panel=CONSTRAINTS,
        help=f"{words('purchase')} (either).",
    ),
]
IncludeFlaggedPrices = Annotated[
    bool,
    typer.Option(
        "--include-flagged-prices",
        rich_help_panel=CONSTRAINTS,
        help="Also use prices the catalog's sanity checks flag (`advisor catalog validate`).",
    ),
]
Server = Annotated[
    str | None,
    typer.Option(
        rich_help_panel=OUTPUT,
        envvar="ADVISOR_SERVER",
        help="Service URL: calibrate efficiency from its fleet.",
    ),
]

Method = Annotated[
    str,
    typer.Option(
        rich_help_panel=WORK,
        help=f"Training: {words('method')} (qlora: frozen 4-bit base + adapters).",
    ),
]
LoraRank = Annotated[
    int, typer.Option(rich_help_panel=WORK, help="LoRA/QLoRA adapter rank (--method lora/qlora).")
]


DeadlineDays = Annotated[
    float | None,
    typer.Option(
        rich_help_panel=TRAINING,
        help="Training: finish within this many days (picks GPUs and nodes).",
    ),
]
MaxGpus = Annotated[
    int | None,
    typer.Option(rich_help_panel=TRAINING, help="Training: rent at most this many GPUs."),
]
GlobalBatchTokens = Annotated[
    int | None,
    typer.Option(
        rich_help_panel=TRAINING,
        help="Training: tokens per optimizer step (default: 4M up to 100B parameters, 16M above).",
    ),
]


def sizing_fields(
    model: str | None,
    params_b: float | None,
    tokens: float | None,
    zero_stage: int | None,
    seq_len: int | None,
    batch: int | None,
    recompute: bool | None,
    precision: str,
    context_tokens: int | None,
    throughput_tokens_s: float | None,
    serving: dict[str, Any],
) -> dict[str, Any]:
    """The sizing fields of a request; `serving` holds the inference ones (serving_fields)."""
    return {
        **serving,
        "model": model,
        "params_b": params_b,
        "tokens": tokens,
        "zero_stage": zero_stage,
        "seq_len": seq_len,
        "batch": batch,
        "recompute": recompute,
        "precision": precision,
        "context_tokens": context_tokens,
        "throughput_tokens_s": throughput_tokens_s,
    }


def serving_fields(
    input_tokens: int | None,
    output_tokens: int | None,
    concurrency: int | None,
    tensor_parallel: int | None,
    max_ttft_ms: float | None,
    max_itl_ms: float | None,
    request_rate: float | None = None,
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "concurrency": concurrency,
        "request_rate": request_rate,
        "tensor_parallel": tensor_parallel,
        "max_ttft_ms": max_ttft_ms,
        "max_itl_ms": max_itl_ms,
    }


def fleet_from_server(url: str | None) -> dict[str, Calibration] | None:
    """The fleet's calibration from a running service, or None without --server."""
    if not url:
        return None
    from advisor.http_client import HttpClient  # only with --server: most runs never call one

    with HttpClient(url) as client:
        reply = client.get("/v1/fleet/summary")
    summaries = reply.json() if reply.status == 200 else None
    if not isinstance(summaries, list):
        raise InputError(f"--server: GET {reply.url} answered HTTP {reply.status}, not a summary")
    return calibrations(summaries)


def method_fields(method: str, lora_rank: int) -> dict[str, Any]:
    """The fine-tuning method fields (training): full, lora or qlora, and the adapter rank."""
    return {"method": method, "lora_rank": lora_rank}


def deadline_fields(
    deadline_days: float | None, max_gpus: int | None, global_batch_tokens: int | None = None
) -> dict[str, Any]:
    """The training plan's limits: a wall-time deadline and a GPU ceiling; and its batch."""
    return {
        "deadline_days": deadline_days,
        "max_gpus": max_gpus,
        "global_batch_tokens": global_batch_tokens,
    }


CheckpointIntervalH = Annotated[
    float | None,
    typer.Option(
        rich_help_panel=TRAINING,
        help="Spot training: hours between checkpoints (default: the workload's).",
    ),
]


def spot_fields(checkpoint_interval_h: float | None) -> dict[str, Any]:
    """The spot plan fields of a request (advisor/engine/spot_risk.py)."""
    return {"checkpoint_interval_h": checkpoint_interval_h}
