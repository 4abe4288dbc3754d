"""`advisor monitor`: sample every GPU's utilisation for a window and classify it.

Exit codes: 0 the window was sampled (whatever the findings); 2 bad usage, or --output could not
be written; 3 NVML cannot be reached or sees no GPU. No torch: NVML only, imported lazily.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from advisor.catalog import get_instance_type
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
    esc,
    get_catalog,
    parse_duration,
    print_error,
    save_report,
)
from advisor.errors import InputError
from advisor.fleet.utilisation import classify_report
from advisor.outputs import check_output_path
from advisor.report_client import ReportSender
from probes.errors import EnvironmentProblem
from probes.monitor import format_span, sample
from probes.nvml import Nvml
from probes.report import UtilisationReport

EXIT_CANNOT_RUN = 3
ENDPOINT = "/v1/utilisation-reports"
MIN_INTERVAL_S = 0.1  # NVML refreshes utilisation every 1/6 s to 1 s: faster polls add nothing
MAX_DURATION_S = 30 * 86400.0  # one window at most; longer reviews store a report per window
FINDING_STYLE = {
    "idle": "yellow",
    "over_provisioned": "yellow",
    "under_provisioned": "bold red",
    "optimized": "green",
}


def open_nvml() -> Nvml:
    """The NVML seam (tests replace it with an Nvml over tests.fake_nvml)."""
    return Nvml()


def monitor(
    duration: Annotated[
        str, typer.Option(help="How long to watch: 30s, 10m, 1h, 1h30m (a bare number: seconds).")
    ] = "10m",
    interval: Annotated[str, typer.Option(help="Time between readings.")] = "1s",
    json_out: JsonReport = False,
    output: OutputFile = None,
    instance_type: Annotated[
        str | None, typer.Option(help="Catalog instance type id of this machine, for the record.")
    ] = None,
    report_to: ReportTo = None,
    token: Token = None,
    spool_dir: SpoolDir = None,
) -> None:
    """Sample GPU utilisation, memory, power and throttling; classify each GPU (idle,
    over_provisioned, under_provisioned, optimized)."""
    duration_s = parse_duration(duration, "--duration")
    interval_s = parse_duration(interval, "--interval")
    if duration_s > MAX_DURATION_S:
        raise InputError(f"--duration {duration!r} is longer than 30 days: monitor in windows")
    if interval_s < MIN_INTERVAL_S:
        raise InputError(f"--interval {interval!r} is below {MIN_INTERVAL_S:g} s")
    if interval_s > duration_s:
        raise InputError(f"--interval {interval!r} is longer than --duration {duration!r}")
    if output is not None:
        check_output_path(output)
    catalog = get_catalog()
    if instance_type is not None:
        get_instance_type(catalog, instance_type)  # an unknown id fails now, not after the window
    sender = _sender(report_to, token, spool_dir) if report_to is not None else None

    err = err_console()
    nvml = open_nvml()
    created = dt.datetime.now(dt.UTC)
    start = time.monotonic()
    try:
        with _stop_on_interrupt() as stop:
            gpus = sample(
                nvml,
                duration_s,
                interval_s,
                progress=lambda msg: err.print(f"[dim]monitor:[/] {esc(msg)}", highlight=False),
                stop=stop,
            )
        if not gpus:
            raise EnvironmentProblem("no_gpu", "NVML sees no GPU on this machine")
    except EnvironmentProblem as exc:
        print_error(f"cannot monitor: {exc.code}: {exc}", EXIT_CANNOT_RUN, json_out)
        raise typer.Exit(EXIT_CANNOT_RUN) from None
    finally:
        nvml.shutdown()
    report = classify_report(
        UtilisationReport(
            created_at=created,
            host=socket.gethostname(),
            instance_type=instance_type,
            duration_s=round(time.monotonic() - start, 3),
            interval_s=interval_s,
            gpus=gpus,
        ),
        catalog,
    )
    data = report.model_dump(mode="json")
    code = 0 if output is None or save_report(output, data) else 2  # the report prints anyway
    if json_out:
        emit_json(data)
    else:
        render(report)
    if sender is not None:
        deliver(sender, data, "monitor")
    raise typer.Exit(code)


def _sender(url: str, token: str | None, spool_dir: Path | None) -> ReportSender:
    """ReportSender aimed at the utilisation endpoint, with its own spool folder: a probe run
    flushing the shared spool must never post a utilisation report to /v1/probe-reports."""
    return ReportSender(url, token, spool_dir, path=ENDPOINT)


@contextlib.contextmanager
def _stop_on_interrupt() -> Iterator[threading.Event]:
    """Ctrl-C ends the window early: the report covers what was sampled until then."""
    stop = threading.Event()
    previous: Any = None
    with contextlib.suppress(ValueError):  # not the main thread: no handler, Ctrl-C as usual
        previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        yield stop
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def render(report: UtilisationReport) -> None:
    out = console()
    title = (
        f"advisor monitor on {report.host}: {format_span(report.duration_s)}, "
        f"a reading every {format_span(report.interval_s)}"
    )
    if report.instance_type:
        title += f" ({report.instance_type})"
    table = Table(title=title)
    for col in ("gpu", "name", "finding", "util avg", "util p95", "memory peak", "power avg"):
        table.add_column(
            col, overflow="fold", justify="left" if col in ("name", "finding") else "right"
        )
    table.add_column("reasons", overflow="fold")
    for g in report.gpus:
        finding = f"[{FINDING_STYLE[g.finding]}]{g.finding}[/]" if g.finding else "[dim]-[/]"
        name = g.name or "?"
        if g.accelerator:
            name += f" ({g.accelerator})"
        table.add_row(
            str(g.index),
            Text(name),
            finding,
            _pct(g.util_gpu_mean_pct),
            _pct(g.util_gpu_p95_pct),
            _memory(g.memory_used_max_mib, g.memory_total_mib),
            _power(g.power_mean_w, g.power_limit_w),
            Text(", ".join(g.reason_codes) or "-"),
        )
    out.print(table)
    for g in report.gpus:
        for sentence in g.evidence:
            out.print(f"GPU {g.index}: {sentence}", highlight=False, markup=False)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _memory(used: float | None, total: float | None) -> str:
    if used is None:
        return "-"
    of = f" / {total / 1024:.1f}" if total else ""
    return f"{used / 1024:.1f}{of} GiB"


def _power(mean: float | None, limit: float | None) -> str:
    if mean is None:
        return "-"
    return f"{mean:.0f} / {limit:.0f} W" if limit else f"{mean:.0f} W"
