"""`advisor calibrate ingest FILE...`: measured serving runs (vllm bench serve, AIPerf, GuideLLM
result files) against the model's prediction for the configuration they ran on, and the bounded
correction per accelerator x engine they support, with its held-out residuals."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from advisor.catalog.corrections import correction_path
from advisor.catalog.queries import Catalog
from advisor.cli.common import console, emit_json, get_catalog
from advisor.did_you_mean import unknown
from advisor.errors import InputError
from advisor.fleet.bench_results import (
    FACTOR_BOUNDS,
    Comparison,
    Correction,
    MeasuredRun,
    correction,
    read_runs,
)
from advisor.outputs import write_atomically
from advisor.perf.correction import HeldOut, MeasuredItl, StoredCorrection
from advisor.perf.inference import Deployment, InferenceModel, moe_of
from advisor.perf.sizing import Shape

app = typer.Typer(help="Compare measured serving runs with the model.", no_args_is_help=True)


@app.command("ingest")
def ingest(
    files: Annotated[list[Path], typer.Argument(metavar="FILE...", help="Result files.")],
    accelerator: Annotated[str, typer.Option(help="Accelerator id the runs ran on.")],
    gpu_count: Annotated[int, typer.Option(min=1, help="GPUs of the deployment.")] = 1,
    tensor_parallel: Annotated[
        int | None, typer.Option(min=1, help="Tensor-parallel degree (default: the GPUs).")
    ] = None,
    precision: Annotated[str, typer.Option(help="Weight precision served.")] = "bf16",
    model: Annotated[
        str | None, typer.Option(help="Catalog model id (default: matched from each file).")
    ] = None,
    engine: Annotated[str, typer.Option(help="Serving engine the runs measured.")] = "vllm",
    save: Annotated[
        Path | None,
        typer.Option(
            help="Store the correction in this catalog directory (corrections/): estimates "
            "asked with --engine apply it on this accelerator."
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", "-j", help="Print JSON for tools.")] = False,
) -> None:
    """Read vllm bench serve / AIPerf / GuideLLM results, print predicted against measured per
    run, and the bounded ITL correction for this accelerator x engine with leave-one-out
    residuals."""
    catalog = get_catalog()
    if accelerator not in catalog.accelerators:
        raise InputError(unknown("accelerator", accelerator, catalog.accelerators), "accelerator")
    runs = [run for path in files for run in read_runs(_load(path), path.name)]
    comps: list[Comparison] = []
    for run in runs:
        comps += compare_run(
            catalog, run, model, accelerator, gpu_count, tensor_parallel, precision
        )
    fix = correction(comps)
    data = _json(comps, fix, accelerator, engine)
    if save is not None:
        if fix is None:
            raise InputError("no ITL was measured: there is no correction to save", "save")
        data["saved_to"] = str(_save(save, stored(comps, fix, accelerator, engine)))
    if json_out:
        emit_json(data)
        return
    _render(data)


def stored(
    comps: list[Comparison], fix: Correction, accelerator: str, engine: str
) -> StoredCorrection:
    """The correction as the catalog stores it, with the runs it rests on."""
    return StoredCorrection(
        accelerator=accelerator,
        engine=engine,
        itl_factor=fix.factor,
        bounded=fix.bounded,
        created_at=dt.datetime.now(dt.UTC),
        runs=[
            MeasuredItl(source=c.source, predicted_itl_ms=c.predicted, measured_itl_ms=c.measured)
            for c in comps
            if c.metric == "itl_ms"
        ],
        held_out=[HeldOut(source=s, error=e) for s, e in fix.held_out],
    )


def _save(directory: Path, found: StoredCorrection) -> Path:
    if not directory.is_dir():
        raise InputError(f"--save {directory}: not a directory", "save")
    path = correction_path(directory, found.accelerator, found.engine)
    path.parent.mkdir(exist_ok=True)
    write_atomically(path, (found.model_dump_json(indent=1) + "\n").encode())
    return path


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}", field="files") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not JSON: {exc}", field="files") from None


def match_model(catalog: Catalog, name: str | None) -> str | None:
    """The catalog model a tool's model name names: the longest preset id the name's last part
    starts with ("meta-llama/Llama-3.1-8B-Instruct" -> llama-3.1-8b)."""
    if not name:
        return None
    base = name.rsplit("/", 1)[-1].lower()
    found = [m for m in catalog.models if base.startswith(m)]
    return max(found, key=len) if found else None


def compare_run(
    catalog: Catalog,
    run: MeasuredRun,
    model: str | None,
    accelerator: str,
    gpus: int,
    tp: int | None,
    precision: str,
) -> list[Comparison]:
    """The run's TTFT, ITL and throughput against the model at the run's load and lengths."""
    model_id = model or match_model(catalog, run.model)
    if model_id is None or model_id not in catalog.models:
        raise InputError(
            f"{run.source}: model {run.model or model!r} is not a catalog model: pass --model",
            field="model",
        )
    preset = catalog.models[model_id]
    acc = catalog.accelerators[accelerator]
    dep = Deployment(acc, gpus, tp or gpus, precision, acc.interconnect_gb_s)
    inp, out = max(1, round(run.input_tokens)), max(1, round(run.output_tokens))
    im = InferenceModel(
        Shape.of(preset), dep, inp, out, moe_of(preset.experts, preset.experts_per_token)
    )
    if run.concurrency is not None:
        got = im.at(max(1, round(run.concurrency / dep.replicas)))
    elif run.request_rate is not None:
        got = im.at_rate(run.request_rate)
    else:
        raise InputError(
            f"{run.source}: neither a concurrency cap nor a request rate: the load is unknown",
            field="files",
        )
    pairs = (
        ("ttft_ms", got.ttft_ms, run.ttft_ms),
        ("itl_ms", got.itl_ms, run.itl_ms),
        ("throughput_tokens_s", got.throughput_tokens_s, run.throughput_tokens_s),
    )
    return [Comparison(run.source, n, p, m) for n, p, m in pairs if m]


def _json(comps: list[Comparison], fix: Any, accelerator: str, engine: str) -> dict[str, Any]:
    return {
        "accelerator": accelerator,
        "engine": engine,
        "rows": [
            {
                "source": c.source,
                "metric": c.metric,
                "predicted": c.predicted,
                "measured": c.measured,
                "ratio": c.ratio,
            }
            for c in comps
        ],
        "correction": None
        if fix is None
        else {
            "itl_factor": fix.factor,
            "bounds": list(FACTOR_BOUNDS),
            "bounded": fix.bounded,
            "runs": fix.runs,
            "evidence": "geometric mean of measured / predicted ITL over the runs",
            "held_out_errors": [{"source": s, "error": e} for s, e in fix.held_out],
        },
    }


def _render(data: dict[str, Any]) -> None:
    out = console()
    table = Table(title=f"measured runs on {data['accelerator']} ({data['engine']})")
    for col in ("run", "metric", "predicted", "measured", "predicted / measured"):
        table.add_column(col, justify="left" if col in ("run", "metric") else "right")
    for r in data["rows"]:
        table.add_row(
            Text(r["source"]),
            r["metric"],
            f"{r['predicted']:.4g}",
            f"{r['measured']:.4g}",
            f"{r['ratio']:.3f}",
        )
    out.print(table)
    fix = data["correction"]
    if fix is None:
        out.print("no ITL measured: no correction")
        return
    note = " (bounded)" if fix["bounded"] else ""
    out.print(
        f"ITL correction for {data['accelerator']} x {data['engine']}: x{fix['itl_factor']:.3f}"
        f"{note} from {fix['runs']} run(s), {fix['evidence']}",
        highlight=False,
    )
    for h in fix["held_out_errors"]:
        out.print(
            f"  held out {h['source']}: corrected ITL error {h['error']:+.1%}",
            highlight=False,
            markup=False,
        )
    if "saved_to" in data:
        out.print(
            f"stored in {data['saved_to']}: estimates with --engine {data['engine']} on "
            f"{data['accelerator']} apply it (with the catalog directory that holds it)",
            highlight=False,
            markup=False,
        )
