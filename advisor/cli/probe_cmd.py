"""`advisor probe`: measure the attached GPU and verify it against the catalog.

Exit codes: 0 every check passed or warned; 1 a check failed or errored; 3 no GPU could be
measured (the report still says why, with CPU figures), or --expect names hardware the probe
cannot measure (TPU, Trainium, Inferentia). torch is imported only here, lazily.
"""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.table import Table

from advisor.catalog.models import Accelerator, Generation
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
    save_report,
)
from advisor.errors import InputError
from advisor.fleet.verification import Verification, resolve_expect, verify
from advisor.outputs import check_output_path
from advisor.report_client import ReportSender
from probes.errors import LockBusy
from probes.probe import CPU_STEPS, GPU_STEPS, ProbeRun
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

# Accelerators the probe cannot measure: it drives CUDA devices through torch, and these have no
# CUDA device (their vendors' own tools measure them). Keyed by generation, with those tools.
UNMEASURABLE = {
    Generation.tpu: "a Google Cloud TPU (measure it with JAX/XLA on the TPU VM)",
    Generation.trainium: (
        "an AWS Trainium/Inferentia chip (measure it with the AWS Neuron tools: neuron-ls, "
        "neuron-top, nccom-test)"
    ),
}


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
    catalog = get_catalog()
    if expect is not None:
        # a bad id fails now, not after a minute of measuring
        _refuse_unmeasurable(expect, resolve_expect(catalog, expect)[0])
    if output is not None:
        check_output_path(output)
    names = _measurement_names(only)
    sender = _sender(report_to, token, spool_dir)
    run = _measure(full, device, lock_wait_s, names)
    report = _report(run, verify(catalog, run.inventory, run.diagnosis, run.measurements, expect))
    data = report.model_dump(mode="json")
    written = output is None or save_report(output, data)
    if json_out:
        emit_json(data)
    else:
        render(report)
    if sender is not None:
        deliver(sender, data, "probe")
    _leave(_exit_code(run, report, written), run.watchdog_tripped)


def unmeasurable_reason(expect: str, acc: Accelerator) -> str | None:
    """Why the probe cannot measure `acc` (None when it can)."""
    what = UNMEASURABLE.get(acc.generation)
    if what is None:
        return None
    named = expect if expect == acc.id else f"{expect} ({acc.id})"
    return (
        f"advisor probe cannot measure {named}: it is {what}. The probe measures CUDA GPUs "
        "through torch, and this hardware has no CUDA device; nothing was measured."
    )


def _refuse_unmeasurable(expect: str, acc: Accelerator) -> None:
    reason = unmeasurable_reason(expect, acc)
    if reason is not None:
        err_console().print(f"[bold red]error:[/] {reason}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_CANNOT_RUN)


def _measurement_names(only: str | None) -> set[str] | None:
    """--only's names (None: every measurement); an unknown name is bad usage."""
    if not only:
        return None
    names = set(only.split(","))
    valid = GPU_STEPS + CPU_STEPS
    if names - set(valid):
        bad = ", ".join(sorted(names - set(valid)))
        raise InputError(f"--only: unknown measurement(s) {bad}; valid: {', '.join(valid)}")
    return names


def _sender(
    report_to: str | None, token: str | None, spool_dir: Path | None
) -> ReportSender | None:
    if report_to is None:
        return None
    return ReportSender(report_to, token, spool_dir)


def _measure(full: bool, device: int, lock_wait_s: float, names: set[str] | None) -> ProbeRun:
    """Runs the probe with progress on stderr; another probe holding the GPU: exit 3."""
    from probes.lock import gpu_lock
    from probes.probe import run_probe  # torch itself is imported only when the run starts

    err = err_console()
    try:
        return run_probe(
            "full" if full else "quick",
            device,
            progress=lambda msg: err.print(f"[dim]probe:[/] {msg}", highlight=False),
            only=names,
            lock=partial(gpu_lock, wait_s=lock_wait_s, on_wait=lambda m: err.print(f"probe: {m}")),
        )
    except LockBusy as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_CANNOT_RUN) from None


def _report(run: ProbeRun, result: Verification) -> ProbeReport:
    return ProbeReport(
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


def _exit_code(run: ProbeRun, report: ProbeReport, output_written: bool) -> int:
    """3 when no GPU was measured, else by verdict; an unwritten --output makes it at least 2."""
    code = EXIT_CANNOT_RUN if run.diagnosis else EXIT_FOR_VERDICT[report.verdict]
    return code if output_written else max(code, 2)


def _leave(code: int, watchdog_tripped: bool) -> NoReturn:
    if watchdog_tripped:
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
