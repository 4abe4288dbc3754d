"""`advisor probe --ops`: measure the operator table of each GPU (probes.ops_run) and write it as
the catalog stores it (catalog/ops/*.json), with progress on stderr and a summary on stdout."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from rich.table import Table

from advisor.cli.common import console, emit_json, err_console, esc, get_catalog
from advisor.fleet.verification import match_by_name
from advisor.outputs import write_atomically
from probes.ops_table import ELEM_BYTES, ROW_SECTIONS, OpsReport, OpsTable, dumps


def run_ops(
    full: bool, device: int | None, nccl: bool, output: Path | None, json_out: bool
) -> list[OpsTable]:
    from probes.ops_run import measure_node  # torch is imported when the run starts

    catalog = get_catalog()

    def accelerator_of(name: str) -> str | None:
        acc = match_by_name(catalog, name)
        return acc.id if acc is not None else None

    err = err_console()
    tables = measure_node(
        "full" if full else "quick",
        device,
        collectives=nccl,
        progress=lambda msg: err.print(f"[dim]probe:[/] {esc(msg)}", highlight=False),
        accelerator_of=accelerator_of,
    )
    if output is not None:
        for path, table in zip(output_paths(output, len(tables)), tables, strict=True):
            write_atomically(path, dumps(table).encode())
    if json_out:
        emit_json([t.model_dump(mode="json") for t in tables])
    else:
        for table in tables:
            render(table)
    return tables


def ops_report(table: OpsTable) -> dict[str, Any]:
    """The body posted to the service for one GPU's table: the host is the machine the table
    was measured on (its stack's machine, the probe's host name)."""
    report = OpsReport(created_at=dt.datetime.now(dt.UTC), host=table.stack.machine, table=table)
    return report.model_dump(mode="json")


def output_paths(output: Path, count: int) -> list[Path]:
    """--output for one table; FILE-gpuN.json for each of several."""
    if count == 1:
        return [output]
    return [output.with_name(f"{output.stem}-gpu{i}{output.suffix}") for i in range(count)]


def headline(table: OpsTable) -> list[tuple[str, str, str]]:
    """What a person checks first: (figure, value, unit)."""
    rows: list[tuple[str, str, str]] = []
    for precision in sorted({g.precision for g in table.gemm}):
        plain = [g for g in table.gemm if g.precision == precision and g.groups == 1]
        best = max(plain, key=lambda g: g.m * g.n * g.k / g.median_us)
        rate = 2 * best.m * best.n * best.k / best.median_us / 1e6
        rows.append((f"gemm {precision} best ({best.m}x{best.n}x{best.k})", _num(rate), "TFLOP/s"))
        one = [g for g in plain if g.m == 1]
        if one:
            big = max(one, key=lambda g: g.n * g.k)
            gb_s = big.n * big.k * ELEM_BYTES[precision] / big.median_us / 1e3
            rows.append((f"gemm {precision} m=1 ({big.n}x{big.k}) weights", _num(gb_s), "GB/s"))
    if table.attention_decode:
        best_d = max(table.attention_decode, key=lambda a: kv_bytes(a) / a.median_us)
        rows.append(
            (
                f"decode attention KV read (batch {best_d.batch} x {best_d.tokens})",
                _num(kv_bytes(best_d) / best_d.median_us / 1e3),
                "GB/s",
            )
        )
    if table.attention_train:
        best_t = max(table.attention_train, key=lambda a: train_flops(a) / a.median_us)
        rows.append(
            (
                f"training attention, forward and backward ({best_t.tokens} tokens, "
                f"head dim {best_t.head_dim})",
                _num(train_flops(best_t) / best_t.median_us / 1e6),
                "TFLOP/s",
            )
        )
    for r in table.sustained:
        rate = 2 * r.m * r.n * r.k / r.median_us / 1e6
        rows.append(
            (f"gemm {r.precision} {r.m}x{r.n}x{r.k}, {r.phase} under load", _num(rate), "TFLOP/s")
        )
    rows += [
        (
            f"launch: {r.name} ({r.kernels} kernels, {'graph' if r.graph else 'eager'})",
            _num(r.median_us),
            "us",
        )
        for r in table.launch
    ]
    for c in table.collectives:
        if c.bytes == max(x.bytes for x in table.collectives if x.op == c.op):
            rows.append((f"{c.op} {c.bytes >> 20} MiB x {c.ranks}", _num(c.busbw_gb_s), "GB/s bus"))
    return rows


def train_flops(row: Any) -> float:
    """A training attention row's matmul FLOPs as the training model counts them: the row's
    sequences as one layer of its heads (advisor/perf/sizing.py)."""
    from advisor.perf.sizing import Shape, attention_training_flops_value

    layer = Shape("one layer", 0.0, 0.0, layers=1, heads=row.heads, head_dim=row.head_dim)
    return attention_training_flops_value(layer, row.batch * row.tokens, row.tokens)


def kv_bytes(row: Any) -> float:
    elem = 4 if row.precision == "fp32" else 2
    return float(2 * row.batch * row.tokens * row.kv_heads * row.head_dim * elem)


def render(table: OpsTable) -> None:
    s = table.stack
    out = console()
    counts = ", ".join(
        f"{len(getattr(table, name))} {name}" for name in ROW_SECTIONS if getattr(table, name)
    )
    view = Table(title=f"operator table ({table.mode}) of {s.device_name}: {counts}")
    for col in ("figure", "value", "unit"):
        view.add_column(col, justify="right" if col == "value" else "left")
    for row in headline(table):
        view.add_row(*row)
    out.print(view)
    for note in table.notes:
        out.print(f"[yellow]note:[/] {esc(note)}", highlight=False)
    noisy = sum(
        1
        for section in (
            table.gemm,
            table.attention_prefill,
            table.attention_decode,
            table.attention_train,
        )
        for r in section
        if r.cv > 0.05
    )
    if noisy:
        out.print(
            f"[yellow]warning:[/] {noisy} timings vary by more than 5% between samples",
            highlight=False,
        )
    out.print(
        f"torch {s.torch}, CUDA {s.cuda or '-'}, driver {s.driver or '-'}; "
        f"accelerator {table.accelerator or 'not in the catalog'}; "
        f"{table.duration_s:.1f} s",
        highlight=False,
        markup=False,
    )


def _num(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
