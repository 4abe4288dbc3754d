"""`advisor probe --health-check` and `--serve-metrics`: the level-1 node check that Slurm
Prologs, node-problem-detector plugins and DaemonSets run, within 60 s, and its verdict where
those tools act on it (exit codes, the NPD line, a node condition, a drain, Prometheus).

Level 1 (DCGM's "r1" is seconds): NVML inventory and health counters (XIDs, ECC, remapped rows,
PCIe link) and, per GPU, one short bf16 matmul and the pinned and device copies, judged against
the catalog as the full probe judges them; no collectives (those are the cluster check's).
"""

from __future__ import annotations

import datetime as dt
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import typer
from prometheus_client import CollectorRegistry, start_http_server, write_to_textfile
from prometheus_client.registry import Collector

from advisor.catalog import Catalog
from advisor.cli.common import deliver, emit_json, err_console, esc
from advisor.deploy.actions import (
    ActionFailed,
    drain_slurm_node,
    kubernetes_api,
    set_node_condition,
    slurm_node_name,
)
from advisor.deploy.verdicts import EXIT_UNKNOWN, NodeHealth, health_registry, node_health
from advisor.fleet.node_report import node_report
from advisor.report_client import ReportSender
from probes.node import NodePlan
from probes.report import ProbeReport
from probes.worker import RankOptions

HEALTH_STEPS = frozenset({"matmul_bf16", "h2d_pinned", "d2h_pinned", "d2d", "cpu_matmul_fp32"})
HEALTH_BUDGET_S = 60.0  # what a Slurm Prolog may take (aws-parallelcluster #6777: keep it short)
RANK_TIMEOUT_S = 20.0
LOCK_WAIT_S = 5.0


@dataclass(frozen=True)
class HealthOptions:
    expect: str | None
    gpus_expected: bool  # --expect named GPU hardware: no GPU visible is a problem
    as_json: bool = False
    npd: bool = False
    drain: bool = False
    node_condition: str | None = None
    kube_host: str | None = None  # the API server's URL (default: in-cluster or kubeconfig)
    textfile: Path | None = None
    sender: ReportSender | None = None


def check_once(
    catalog: Catalog, plan: NodePlan, opts: HealthOptions
) -> tuple[ProbeReport, NodeHealth]:
    """One level-1 check of every GPU of the node, inside the budget."""
    from probes.node import probe_node

    err = err_console()
    with tempfile.TemporaryDirectory(prefix="advisor-health-") as scratch:
        rank = RankOptions(
            out=Path(scratch),
            mode="quick",
            gpus=plan.gpus,
            nccl=False,
            only=HEALTH_STEPS,
            lock_wait_s=LOCK_WAIT_S,
            timeout_s=RANK_TIMEOUT_S,
        )
        run = probe_node(
            plan,
            rank,
            progress=lambda msg: err.print(f"[dim]health:[/] {esc(msg)}", highlight=False),
            deadline_s=HEALTH_BUDGET_S - 10,
        )
    report = node_report(run, catalog, opts.expect)
    return report, node_health(report, opts.gpus_expected)


def act(report: ProbeReport, health: NodeHealth, opts: HealthOptions) -> int:
    """Publishes the verdict where it was asked for; returns the exit code. An action that
    failed is said on stderr and leaves a healthy node's code at 3 (not known)."""
    code = health.exit_code
    err = err_console()
    failed = False
    for action in _actions(report, health, opts):
        try:
            said = action()
        except ActionFailed as exc:
            err.print(f"[bold red]error:[/] {esc(exc)}", highlight=False)
            failed = True
            continue
        if said:
            err.print(f"[dim]health:[/] {esc(said)}", highlight=False)
    if opts.sender is not None:
        deliver(opts.sender, report.model_dump(mode="json"), "probe")
    return EXIT_UNKNOWN if failed and code == 0 else code


def _actions(report: ProbeReport, health: NodeHealth, opts: HealthOptions) -> Iterator[Any]:
    if opts.textfile is not None:
        path = opts.textfile

        def textfile() -> str:
            try:  # written beside, then renamed: the collector never reads half a file
                write_to_textfile(str(path), health_registry(report, health))
            except OSError as exc:
                raise ActionFailed(f"--textfile {path}: {exc.strerror or exc}") from None
            return f"metrics written to {path}"

        yield textfile
    if opts.node_condition is not None:
        node = opts.node_condition

        def condition() -> str:
            api = kubernetes_api(opts.kube_host)
            written = set_node_condition(api, node, health, dt.datetime.now(dt.UTC))
            return f"node {node}: {written['type']}={written['status']} ({written['reason']})"

        yield condition
    if opts.drain and health.status == "problem":

        def drain() -> str:
            node = slurm_node_name()
            return f"drained Slurm node {node}: {drain_slurm_node(node, health)}"

        yield drain


def print_once(report: ProbeReport, health: NodeHealth, opts: HealthOptions) -> None:
    if opts.npd:
        typer.echo(health.npd_line())
    elif opts.as_json:
        data = report.model_dump(mode="json")
        data["health"] = {
            "status": health.status,
            "reason": health.reason,
            "message": health.message,
        }
        emit_json(data)
    else:
        typer.echo(f"{health.status}: {health.message} ({report.duration_s:.1f} s)")


class _Latest(Collector):
    """What /metrics serves: the gauges of the last finished check (none before the first)."""

    def __init__(self) -> None:
        self.registry: CollectorRegistry | None = None
        self.lock = threading.Lock()

    def collect(self) -> Iterator[Any]:
        with self.lock:
            current = self.registry
        if current is not None:
            yield from current.collect()


def serve_metrics(
    catalog: Catalog,
    plan: NodePlan,
    opts: HealthOptions,
    port: int,
    address: str,
    interval_s: float,
) -> NoReturn:
    """The exporter: a check every `interval_s` until stopped, the last one's gauges served on
    http://address:port/metrics (a failed check is a gauge, not an exit)."""
    latest = _Latest()
    registry = CollectorRegistry()
    registry.register(latest)
    server, _thread = start_http_server(port, addr=address, registry=registry)
    err = err_console()
    bound = int(server.server_address[1])
    err.print(f"serving metrics on http://{address}:{bound}/metrics", highlight=False, markup=False)
    done = 0
    try:
        while True:
            started = time.monotonic()
            report, health = check_once(catalog, plan, opts)
            with latest.lock:
                latest.registry = health_registry(report, health)
            act(report, health, opts)
            done += 1
            err.print(f"check {done}: {health.npd_line()}", highlight=False, markup=False)
            time.sleep(max(0.0, interval_s - (time.monotonic() - started)))
    finally:
        server.shutdown()
