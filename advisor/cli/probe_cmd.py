"""`advisor probe`: measure the attached GPU and verify it against the catalog.

Exit codes: 0 every check passed or warned; 1 a check failed or errored; 3 no GPU could be
measured (the report still says why, with CPU figures). torch is imported only here, lazily.
"""

from __future__ import annotations

import os
import sys
from functools import partial
from typing import Annotated

import typer
from rich.table import Table

from advisor.cli.common import (
    JsonReport,
    OutputFile,
    ReportTo,
    SpoolDir,
    Token,
    console,
    deliver,
    emit_json,
    err_console,
    get_catalog,
    write_atomically,
)
from advisor.errors import InputError
from advisor.fleet.verification import resolve_expect, verify
from advisor.report_client import ReportSender
from probes.errors import LockBusy
from probes.probe import CPU_STEPS, GPU_STEPS
from probes.report import ProbeReport

STATUS_STYLE = {
    "pass": "green",
    "warn": "yellow",
    "fail": "bold red",
    "error": "red",
    "skip": "dim",
}
EXIT_FOR_VERDICT = {"pass": 0, "warn": 0, "fail": 1, "error": 1}
EXIT_CANNOT_RUN = 3


def probe(
    json_out: JsonReport = False,
    output: OutputFile = None,
    expect: Annotated[
        str | None, typer.Option(help="Catalog accelerator or instance type id to verify against.")
    ] = None,
    full: Annotated[
        bool, typer.Option("--full/--quick", help="Quick (default) or full run.")
    ] = False,
    device: Annotated[int, typer.Option(min=0, help="CUDA device index.")] = 0,
    lock_wait_s: Annotated[
        float, typer.Option(min=0, help="How long to wait for another probe on this GPU.")
    ] = 60.0,
    only: Annotated[
        str | None, typer.Option(help="Comma-separated measurement names to run (default: all).")
    ] = None,
    report_to: ReportTo = None,
    token: Token = None,
    spool_dir: SpoolDir = None,
) -> None:
    """Measure the GPU (matmul, transfers, overlap) and verify it against the catalog."""
    from probes.lock import gpu_lock
    from probes.probe import run_probe  # torch itself is imported only when the run starts

    catalog = get_catalog()
    if expect is not None:
        resolve_expect(catalog, expect)  # a bad id fails now, not after a minute of measuring
    if output is not None and output.is_dir():
        raise InputError(f"--output {str(output)!r} is a directory: give a file path")
    if output is not None and not output.parent.is_dir():
        raise InputError(f"--output: directory {str(output.parent)!r} does not exist")
    names = set(only.split(",")) if only else None
    if names is not None and names - set(GPU_STEPS + CPU_STEPS):
        bad = ", ".join(sorted(names - set(GPU_STEPS + CPU_STEPS)))
        raise InputError(
            f"--only: unknown measurement(s) {bad}; valid: {', '.join(GPU_STEPS + CPU_STEPS)}"
        )
    sender = None
    if report_to is not None:
        try:
            sender = ReportSender(report_to, token, spool_dir)
        except ValueError as exc:
            raise InputError(str(exc)) from None
    err = err_console()
    try:
        run = run_probe(
            "full" if full else "quick",
            device,
            progress=lambda msg: err.print(f"[dim]probe:[/] {msg}", highlight=False),
            only=names,
            lock=partial(gpu_lock, wait_s=lock_wait_s, on_wait=lambda m: err.print(f"probe: {m}")),
        )
    except LockBusy as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_CANNOT_RUN) from None
    result = verify(catalog, run.inventory, run.diagnosis, run.measurements, expect)
    report = ProbeReport(
        created_at=run.created_at,
        mode=run.mode,
        device=run.device,
        verdict=result.verdict,
        accelerator=result.accelerator,
        expected_accelerator=result.expected_accelerator,
        inventory=run.inventory,
        diagnosis=run.diagnosis,
        measurements=run.measurements,
        checks=result.checks,
        duration_s=run.duration_s,
    )
    data = report.model_dump(mode="json")
    output_failed = False
    if output is not None:
        try:
            write_atomically(output, data)
        except OSError as exc:  # unwritable: say so, still print the report below
            err.print(
                f"[bold red]error:[/] cannot write --output {output}: {exc}",
                highlight=False,
                soft_wrap=True,  # one line, however narrow the terminal
            )
            output_failed = True
    if json_out:
        emit_json(data)
    else:
        render(report)
    if sender is not None:
        deliver(sender, data, "probe")
    code = EXIT_CANNOT_RUN if run.diagnosis else EXIT_FOR_VERDICT[report.verdict]
    if output_failed:
        code = max(code, 2)
    if run.watchdog_tripped:
        # A hung measurement thread cannot be stopped: leave without waiting for it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise typer.Exit(code)


def render(report: ProbeReport) -> None:
    out = console()
    inv, gpu = report.inventory, report.inventory.gpu
    title = f"advisor probe ({report.mode}) on {inv.hostname}"
    if gpu is not None:
        title += f": {gpu.name}"
    table = Table(title=title)
    for col in ("check", "status", "measured", "expected", "unit", "detail"):
        numeric = col in ("measured", "expected")
        table.add_column(col, overflow="fold", justify="right" if numeric else "left")
    for c in report.checks:
        style = STATUS_STYLE[c.status]
        table.add_row(
            c.name,
            f"[{style}]{c.status}[/]",
            _num(c.measured),
            _num(c.expected),
            c.unit or "",
            c.detail,
        )
    out.print(table)
    for d in report.diagnosis:
        out.print(f"[red]diagnosis[/] {d.code}: {d.message}", highlight=False)
    versions = (
        f"driver {inv.driver_version or '-'}, CUDA {inv.cuda_driver_version or '-'}, "
        f"torch {inv.torch_version or '-'} (CUDA runtime {inv.cuda_runtime_version or '-'})"
    )
    out.print(versions, highlight=False)
    style = STATUS_STYLE[report.verdict]
    against = report.expected_accelerator or report.accelerator
    matched = f" against {against}" if against else ""
    out.print(
        f"verdict{matched}: [{style}]{report.verdict}[/] in {report.duration_s:.1f} s",
        highlight=False,
    )


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.1f}"
