"""`advisor probe`: measure every GPU of the node (and the links between them, the collectives,
the health counters, other nodes with --nodes) and verify them against the catalog.

Exit codes: 0 every check passed or warned; 1 a check failed or errored; 2 bad usage; 3 no GPU
could be measured (the report still says why, with CPU figures), or --expect names hardware the
probe cannot measure (TPU, Trainium, Inferentia). torch is imported only by the ranks, lazily.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from advisor.catalog import Catalog
from advisor.catalog.models import Accelerator, Generation, InstanceType
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
from advisor.cli.tables import Column, print_table
from advisor.errors import InputError
from advisor.fleet.node_report import node_report
from advisor.fleet.verification import resolve_expect
from advisor.outputs import check_output_path
from advisor.report_client import ReportSender
from probes.collectives import parse_size
from probes.node import NodePlan, NodeRun, UsageProblem
from probes.pairing import DEFAULT_ROUNDS
from probes.probe import CPU_STEPS, GPU_STEPS
from probes.report import Check, ProbeReport
from probes.worker import RankOptions

if TYPE_CHECKING:
    from advisor.cli import probe_health

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
        str | None,
        typer.Option(help="Catalog accelerator or instance type id to verify against."),
    ] = None,
    full: Annotated[
        bool, typer.Option("--full/--quick", help="Quick (default) or full run.")
    ] = False,
    device: Annotated[
        int | None, typer.Option(min=0, help="Measure this CUDA device only (default: every GPU).")
    ] = None,
    nodes: Annotated[
        int, typer.Option(min=1, help="Nodes taking part; run the same command on each.")
    ] = 1,
    rdzv_endpoint: Annotated[
        str | None,
        typer.Option(help="HOST:PORT of the rendezvous with --nodes (default: MASTER_ADDR)."),
    ] = None,
    pairwise: Annotated[
        bool,
        typer.Option(
            help="With --nodes: rounds of disjoint node pairs, then the slow nodes and groups."
        ),
    ] = False,
    pairwise_rounds: Annotated[
        int, typer.Option(min=1, help="Screening rounds of --pairwise (N/2 pairs each).")
    ] = DEFAULT_ROUNDS,
    nccl: Annotated[
        bool, typer.Option("--nccl/--no-nccl", help="Measure NCCL collectives between GPUs.")
    ] = True,
    burn: Annotated[
        str | None,
        typer.Option(help="Hold every GPU under load this long (e.g. 60s, 10m) after measuring."),
    ] = None,
    lock_wait_s: Annotated[
        float, typer.Option(min=0, help="How long to wait for another probe on this GPU.")
    ] = 60.0,
    rank_timeout_s: Annotated[
        float, typer.Option(min=1, help="How long a rank waits for the others at a barrier.")
    ] = 300.0,
    only: Annotated[
        str | None, typer.Option(help="Comma-separated measurement names to run (default: all).")
    ] = None,
    report_to: ReportTo = None,
    token: Token = None,
    spool_dir: SpoolDir = None,
    ops: Annotated[
        bool,
        typer.Option(
            "--ops",
            help="Measure the operator table (GEMM, attention, memory-bound operators, launch "
            "costs, collectives) the performance model reads; --output writes it.",
        ),
    ] = False,
    health_check: Annotated[
        bool,
        typer.Option(
            help="Level-1 node check within 60 s (Prolog, NPD plugin): exit 0 healthy, "
            "1 a problem, 3 not known."
        ),
    ] = False,
    npd: Annotated[
        bool, typer.Option(help="With --health-check: one line for node-problem-detector.")
    ] = False,
    drain: Annotated[
        bool, typer.Option(help="With --health-check: drain this Slurm node on a problem.")
    ] = False,
    node_condition: Annotated[
        str | None,
        typer.Option(help="With --health-check: set this Kubernetes node's condition."),
    ] = None,
    kube_api: Annotated[
        str | None,
        typer.Option(help="Kubernetes API URL for --node-condition (default: in-cluster)."),
    ] = None,
    textfile: Annotated[
        Path | None,
        typer.Option(help="With --health-check: Prometheus textfile-collector output (.prom)."),
    ] = None,
    serve_metrics: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, help="Health-check every --interval and serve /metrics on this port."
        ),
    ] = None,
    metrics_address: Annotated[
        str, typer.Option(help="Address --serve-metrics listens on.")
    ] = "0.0.0.0",
    interval: Annotated[str, typer.Option(help="Time between checks of --serve-metrics.")] = "5m",
    show_expected: Annotated[
        bool,
        typer.Option(
            help="Print what --expect INSTANCE should measure (the plan's figures), then exit."
        ),
    ] = False,
) -> None:
    """Measure every GPU (matmul, transfers, overlap), the peer links, NCCL collectives and the
    health counters, and verify them against the catalog."""
    if ops:
        _refuse_with_ops(
            expect=expect,
            nodes=nodes > 1,
            pairwise=pairwise,
            burn=burn,
            only=only,
            health_check=health_check,
            serve_metrics=serve_metrics is not None,
        )
        _ops(full, device, nccl, output, json_out, _ops_sender(report_to, token, spool_dir))
        return
    catalog = get_catalog()
    instance = None
    accelerator = None
    if expect is not None:
        # a bad id fails now, not after a minute of measuring
        accelerator, instance = resolve_expect(catalog, expect)
        _refuse_unmeasurable(expect, accelerator, json_out)
    if show_expected:
        _show_expected(catalog, instance, json_out)
    if health_check or serve_metrics is not None:
        health = _health_options(
            expect, accelerator, json_out, npd, drain, node_condition, kube_api, textfile
        )
        health = replace(health, sender=_sender(report_to, token, spool_dir))
        _health(catalog, health, device, serve_metrics, metrics_address, interval)
    if any((npd, drain, node_condition, textfile)):
        raise InputError("--npd, --drain, --node-condition and --textfile need --health-check")
    if output is not None:
        check_output_path(output)
    names = _measurement_names(only)
    burn_s = parse_duration(burn, "--burn") if burn is not None else None
    sender = _sender(report_to, token, spool_dir)
    plan = _plan(device, nodes, rdzv_endpoint)
    if pairwise and nodes < 2:
        raise InputError("--pairwise needs --nodes 2 or more (it tests pairs of nodes)")
    extra: tuple[int, ...] = ()
    fact = instance.expected_nccl_busbw if instance is not None else None
    if fact is not None and fact.gpus == plan.local_ranks:
        extra = (parse_size(fact.message_size),)  # measured at the size the threshold names
    with tempfile.TemporaryDirectory(prefix="advisor-probe-") as scratch:
        opts = RankOptions(
            out=Path(scratch),
            mode="full" if full else "quick",
            gpus=plan.gpus,
            nccl=nccl,
            pairwise=pairwise,
            pairwise_rounds=pairwise_rounds,
            only=frozenset(names) if names is not None else None,
            extra_sizes=extra,
            lock_wait_s=lock_wait_s,
            timeout_s=rank_timeout_s,
            burn_s=burn_s,
        )
        run = _measure(plan, opts)
    report = node_report(run, catalog, expect)
    _refuse_busy(run, json_out)
    data = report.model_dump(mode="json")
    written = output is None or save_report(output, data)
    if json_out:
        emit_json(data)
    else:
        render(report)
    if sender is not None:
        deliver(sender, data, "probe")
    _leave(_exit_code(run, report, written), run.watchdog_tripped)


def _ops(
    full: bool,
    device: int | None,
    nccl: bool,
    output: Path | None,
    as_json: bool,
    sender: ReportSender | None,
) -> None:
    """The operator table of each GPU: written to --output, posted to --report-to (the
    service's /v1/ops-tables, where the fleet's table per accelerator is voted from them)."""
    from advisor.cli.probe_ops import ops_report, run_ops
    from probes.errors import EnvironmentProblem

    if output is not None:
        check_output_path(output)
    try:
        tables = run_ops(full, device, nccl, output, as_json)
    except EnvironmentProblem as exc:  # no torch (a base install): the hint, exit 3
        print_error(f"cannot measure operators: {exc.code}: {exc}", EXIT_CANNOT_RUN, as_json)
        raise typer.Exit(EXIT_CANNOT_RUN) from None
    for table in tables:
        if sender is not None:
            deliver(sender, ops_report(table), "probe --ops")


def _ops_sender(
    report_to: str | None, token: str | None, spool_dir: Path | None
) -> ReportSender | None:
    if report_to is None:
        return None
    return ReportSender(report_to, token, spool_dir, path="/v1/ops-tables")


def _refuse_with_ops(**given: object) -> None:
    """Options of the verification probe that --ops does not take (its table goes to --output
    and to --report-to): bad usage, exit 2, naming them."""
    used = sorted(f"--{name.replace('_', '-')}" for name, value in given.items() if value)
    if used:
        raise InputError(f"--ops measures the operator table alone: drop {', '.join(used)}")


def _health_options(
    expect: str | None,
    accelerator: Accelerator | None,
    as_json: bool,
    npd: bool,
    drain: bool,
    node_condition: str | None,
    kube_api: str | None,
    textfile: Path | None,
) -> probe_health.HealthOptions:
    from advisor.cli.probe_health import HealthOptions  # prometheus_client: only here

    return HealthOptions(
        expect=expect,
        gpus_expected=accelerator is not None and accelerator.form_factor.value != "cpu",
        as_json=as_json,
        npd=npd,
        drain=drain,
        node_condition=node_condition,
        kube_host=kube_api,
        textfile=textfile,
    )


def _show_expected(catalog: Catalog, instance: InstanceType | None, as_json: bool) -> NoReturn:
    from advisor.fleet.expectations import plan_expectations

    if instance is None:
        raise InputError("--show-expected needs --expect INSTANCE_TYPE (a catalog instance type)")
    rows = plan_expectations(catalog, instance)
    if as_json:
        emit_json({"instance_type": instance.id, "expected": [asdict(r) for r in rows]})
        raise typer.Exit(0)
    table = Table(title=f"what a {instance.id} node should measure")
    for col in ("check", "planned", "unit", "published", "source"):
        table.add_column(
            col, overflow="fold", justify="right" if col in ("planned", "published") else "left"
        )
    for r in rows:
        pub = r.published
        table.add_row(
            r.check,
            _num(r.planned),
            r.unit,
            "-"
            if pub is None
            else f"{_num(pub.value)} ({_num(r.planned / pub.value * 100 if r.planned else None)}%)",
            Text(r.source + (f"; published: {pub.source}" if pub else "")),
        )
    console().print(table)
    raise typer.Exit(0)


def _health(
    catalog: Catalog,
    opts: probe_health.HealthOptions,
    device: int | None,
    port: int | None,
    address: str,
    interval: str,
) -> NoReturn:
    from advisor.cli import probe_health

    plan = _plan(device, 1, None)
    if port is not None:
        every = parse_duration(interval, "--interval")
        probe_health.serve_metrics(catalog, plan, opts, port, address, every)
    report, verdict = probe_health.check_once(catalog, plan, opts)
    probe_health.print_once(report, verdict, opts)
    raise typer.Exit(probe_health.act(report, verdict, opts))


def _refuse_busy(run: NodeRun, as_json: bool = False) -> None:
    """Another probe holds a GPU: said on stderr. Holding every GPU, it refuses the whole run
    (exit 3, no report) so that the two never measure each other; the other GPUs still report."""
    busy = [d.message for r in run.ranks for d in r.diagnosis if d.code == "gpu_busy"]
    for message in busy:
        print_error(message, EXIT_CANNOT_RUN, as_json)
    if busy and len(busy) == len(run.ranks):
        raise typer.Exit(EXIT_CANNOT_RUN)


def _plan(device: int | None, nodes: int, rdzv_endpoint: str | None) -> NodePlan:
    from probes.node import plan_node
    from probes.nvml import Nvml

    nvml = Nvml()
    try:
        return plan_node(nvml, dict(os.environ), device, nodes, rdzv_endpoint)
    except UsageProblem as exc:
        raise InputError(str(exc)) from None
    finally:
        nvml.shutdown()


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


def _refuse_unmeasurable(expect: str, acc: Accelerator, as_json: bool = False) -> None:
    reason = unmeasurable_reason(expect, acc)
    if reason is not None:
        print_error(reason, EXIT_CANNOT_RUN, as_json, "expect")
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


def _measure(plan: NodePlan, opts: RankOptions) -> NodeRun:
    """Runs every rank with progress on stderr; another probe holding the GPU: exit 3."""
    from probes.node import probe_node  # torch itself is imported only when a rank starts

    err = err_console()
    return probe_node(
        plan, opts, progress=lambda msg: err.print(f"[dim]probe:[/] {esc(msg)}", highlight=False)
    )


def _exit_code(run: NodeRun, report: ProbeReport, output_written: bool) -> int:
    """3 when no GPU was measured, else by verdict; an unwritten --output makes it at least 2."""
    code = EXIT_CANNOT_RUN if report.diagnosis else EXIT_FOR_VERDICT[report.verdict]
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
    _checks_table(out, report)
    for line in _after_table(report):
        out.print(line, highlight=False)
    inv = report.inventory
    versions = (
        f"driver {inv.driver_version or '-'}, CUDA {inv.cuda_driver_version or '-'}, "
        f"torch {inv.torch_version or '-'} (CUDA runtime {inv.cuda_runtime_version or '-'})"
    )
    out.print(versions, highlight=False, markup=False)
    style = STATUS_STYLE[report.verdict]
    against = report.expected_accelerator or report.accelerator
    matched = f" against {against}" if against else ""
    out.print(
        f"verdict{esc(matched)}: [{style}]{report.verdict}[/] in {report.duration_s:.1f} s",
        highlight=False,
    )


def _checks_table(out: Console, report: ProbeReport) -> None:
    inv, gpu = report.inventory, report.inventory.gpu
    title = f"advisor probe ({report.mode}) on {inv.hostname}"
    if gpu is not None:
        title += f": {gpu.name}"
    if len(report.gpu_verdicts) > 1:
        title += f" x {len(report.gpu_verdicts)}"
    # the project's table: a check's name and its detail wrap between words, never inside one
    columns = [
        Column("check", key=True),
        Column("gpu", drop_rank=1),
        Column("status", key=True),
        Column("measured", "right", drop_rank=5),
        Column("expected", "right", drop_rank=3),
        Column("unit", drop_rank=4),
        Column("detail", drop_rank=6),
    ]
    rows = [
        [
            c.name,
            _where(c),
            c.status,
            _num(c.measured),
            _num(c.expected),
            c.unit or "",
            c.detail + (f" (action: {c.action})" if c.action and c.status != "pass" else ""),
        ]
        for c in report.checks
    ]
    print_table(out, title, columns, rows)


def _after_table(report: ProbeReport) -> list[str | Text]:
    """The lines under the table: diagnoses, per-GPU verdicts, failed ranks, the cluster."""
    lines: list[str | Text] = [
        f"[red]diagnosis[/] {esc(d.code)}: {esc(d.message)}" for d in report.diagnosis
    ]
    if len(report.gpu_verdicts) > 1:
        listed = ", ".join(
            f"GPU {g.gpu} [{STATUS_STYLE[g.verdict]}]{g.verdict}[/]" for g in report.gpu_verdicts
        )
        lines.append(f"per GPU: {listed}")
    lines += [f"[red]rank {f.rank}[/] did not finish: {esc(f.detail)}" for f in report.failed_ranks]
    if report.cluster is not None:
        hosts = ", ".join(f"{h.host} {h.verdict}" for h in report.cluster.hosts)
        # plain text (markup=False before): host names are printed as they are
        lines.append(Text(f"cluster of {report.cluster.nodes} nodes: {hosts}"))
    return lines


def _where(c: Check) -> str:
    """The GPU a check is about (GPU -> peer for a peer link); the node's own checks: blank."""
    if c.gpu is None:
        return c.host or ""
    return f"{c.gpu}->{c.peer}" if c.peer is not None else str(c.gpu)


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.1f}"
