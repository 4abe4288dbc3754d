"""`advisor doctor -- CMD ARGS...`: run a job and say whether it really uses the GPU, and if not,
why, with the fix and its price.

The command runs as a child with its output untouched (probes.job); the doctor samples every GPU
and the job's process tree meanwhile (probes.job_sampler) and, with --torch, counts the job's
host-device synchronisations and copies by line (probes/doctor_hook). The diagnosis is
advisor.fleet.job_diagnosis; the price of a GPU and the cheaper option that fits come from the
review's pricing (advisor.review.costs), so the doctor and the review give one answer.

Exit codes: the command's own when it failed (128 + N when killed by signal N); else 0 healthy,
1 with findings, 3 nothing could be measured (no NVML or no GPU: the command still ran); 2 bad
usage (a command that does not exist included).
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import tempfile
import time
from typing import Annotated, Any

import typer
from rich.markup import escape

from advisor.catalog import Catalog, get_instance_type
from advisor.cli import doctor_node, doctor_pid
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
    money,
    parse_duration,
    save_report,
)
from advisor.cli.doctor_stages import STACK_INTERVAL_S, render_stages, staged
from advisor.cli.monitor_cmd import ENDPOINT, MIN_INTERVAL_S, open_nvml
from advisor.errors import InputError
from advisor.fleet.job_diagnosis import Diagnosis, diagnose
from advisor.fleet.porting import porting_note
from advisor.fleet.utilisation import classify_report
from advisor.fleet.verdict import agree
from advisor.outputs import check_output_path
from advisor.report_client import ReportSender
from advisor.review.costs import gpu_price, savings
from advisor.review.data import UsageRecord, usage_record
from probes.errors import EnvironmentProblem
from probes.job import CommandNotFound, Job, hook_dir, read_torch_stats, resolve
from probes.job_sampler import JobSampler
from probes.nvml import Nvml
from probes.report import JobFinding, JobReport, TorchStats, UtilisationReport
from probes.stacks import StackSampler

EXIT_FINDINGS = 1
EXIT_CANNOT_MEASURE = 3
VERDICT_EXIT = {"healthy": 0, "findings": EXIT_FINDINGS, "unmeasured": EXIT_CANNOT_MEASURE}


def doctor(
    command: Annotated[
        list[str] | None,
        typer.Argument(help="The job to run, after --: advisor doctor -- python train.py"),
    ] = None,
    pid: Annotated[
        int | None,
        typer.Option(
            help="Diagnose a job already running (its process and descendants), without "
            "restarting it, for --duration (default 30s)."
        ),
    ] = None,
    node: Annotated[
        bool,
        typer.Option(
            "--node",
            help="Every GPU of this machine at one look: its processes, activity, memory, "
            "power, the findings and the idle dollars an hour (--duration: the window, 2s).",
        ),
    ] = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="With --node: redraw the view after each window (--duration, 2s) until Ctrl-C.",
        ),
    ] = False,
    instance_type: Annotated[
        str | None,
        typer.Option(help="Catalog instance type of this machine: prices the findings."),
    ] = None,
    duration: Annotated[
        str | None,
        typer.Option(
            help="Diagnose the first D of the job (30s, 10m, 1h), then report while it runs on."
        ),
    ] = None,
    interval: Annotated[str, typer.Option(help="Time between readings.")] = "1s",
    torch_hook: Annotated[
        bool,
        typer.Option(
            "--torch",
            help="PyTorch jobs: count host-device syncs, copies and CPU-made tensors by line "
            "(a start-up hook; the job's code is not changed).",
        ),
    ] = False,
    json_out: JsonReport = False,
    output: OutputFile = None,
    report_to: ReportTo = None,
    token: Token = None,
    spool_dir: SpoolDir = None,
) -> None:
    """Run CMD (or watch --pid, or every GPU with --node) and diagnose its use of the GPU:
    where its time goes; never used, idle reservation, input-, host-, sync- or transfer-bound,
    tensors made on the CPU, under-used; each finding with evidence, a fix and its price."""
    window_s = parse_duration(duration, "--duration") if duration is not None else None
    interval_s = parse_duration(interval, "--interval")
    if interval_s < MIN_INTERVAL_S:
        raise InputError(f"--interval {interval!r} is below {MIN_INTERVAL_S:g} s")
    if output is not None:
        check_output_path(output)
    catalog = get_catalog()
    if instance_type is not None:
        get_instance_type(catalog, instance_type)  # an unknown id fails before the job starts
    if watch and not node:
        raise InputError("--watch redraws the node's view: give --node with it")
    if node:
        _node(catalog, command, pid, instance_type, window_s, (json_out, watch), output)
    root = _target(command, pid, torch_hook)
    sender = ReportSender(report_to, token, spool_dir, path=ENDPOINT) if report_to else None

    def publish(report: UtilisationReport) -> bool:
        data = report.model_dump(mode="json")
        saved = output is None or save_report(output, data)
        if json_out:
            emit_json(data)
        else:
            render(report)
        if sender is not None:
            deliver(sender, data, "doctor")
        return saved

    if root is not None:
        verdict, saved = _attach(catalog, root, instance_type, window_s, interval_s, publish)
        raise typer.Exit(VERDICT_EXIT[verdict] if saved else 2)
    code, verdict, saved = _run(
        catalog, command or [], instance_type, window_s, interval_s, torch_hook, publish
    )
    if code != 0:
        raise typer.Exit(code)  # the job's own failure comes first
    raise typer.Exit(VERDICT_EXIT[verdict] if saved else 2)


def _run(
    catalog: Catalog,
    command: list[str],
    instance_type: str | None,
    window_s: float | None,
    interval_s: float,
    torch_hook: bool,
    publish: Any,
) -> tuple[int, str, bool]:
    """Run the job, sample it, diagnose, publish the report (after the window, while the job
    runs on, when --duration is shorter than the job); (the job's exit code, verdict, whether
    the report was saved)."""
    err = err_console()
    nvml, unmeasured = _open(err)
    with tempfile.TemporaryDirectory(prefix="advisor-doctor-") as hook_out:
        env = _environment(hook_out) if torch_hook else None
        created = dt.datetime.now(dt.UTC)
        started = time.monotonic()
        with Job(command, env) as job:
            sampler = JobSampler(nvml, job.tree, interval_s)
            sampler.start()  # without NVML, the job's processes on the host alone
            stacks = StackSampler(job.tree, STACK_INTERVAL_S)
            stacks.start()
            err.print(
                f"[dim]doctor:[/] running {escape(' '.join(command))}; sampling "
                f"{len(sampler.memory_total_mib)} GPU(s) and the job's processes every "
                f"{interval_s:g} s",
                highlight=False,
            )
            code = job.wait(window_s)
            sampled_s = sampler.stop()
            stacks.stop()
            if code is None:
                err.print(
                    f"[dim]doctor:[/] {window_s:g} s diagnosed; the report follows while the "
                    "job runs on",
                    highlight=False,
                )
            torch = read_torch_stats(hook_out) if torch_hook and code is not None else None
            if torch_hook and code is None:
                unmeasured.append(
                    "--torch: the hook writes its counts when the job exits; this report was "
                    "written while it still ran (--duration)"
                )
            elif torch_hook and torch is None:
                unmeasured.append(
                    "--torch: no statistics (the job is not a Python process that imported "
                    "torch, or it did not exit normally)"
                )
            report = _report(
                catalog,
                command,
                instance_type,
                created,
                code,
                time.monotonic() - started,
                sampled_s,
                interval_s,
                sampler,
                torch,
                [*unmeasured, *sampler.unmeasured, *stacks.unmeasured],
                stacks,
            )
            saved = publish(report)
            if code is None:
                code = job.wait()  # the rest of the job, signals still forwarded
    if nvml is not None:
        nvml.shutdown()
    assert report.job is not None and code is not None
    return code, report.job.verdict, saved


def _node(
    catalog: Catalog,
    command: list[str] | None,
    pid: int | None,
    instance_type: str | None,
    window_s: float | None,
    json_and_watch: tuple[bool, bool],
    output: Any,
) -> None:
    """--node: one look at every GPU, printed or as JSON, or redrawn with --watch; exit 0, or
    3 without NVML."""
    json_out, watch = json_and_watch
    if command or pid is not None:
        raise InputError("--node looks at the whole machine: give no command and no --pid")
    if watch and (json_out or output is not None):
        raise InputError("--watch is a live view: --json and --output take one snapshot")
    nvml, unmeasured = _open(err_console())
    if nvml is None:
        err_console().print(f"[red]error:[/] {escape(unmeasured[0])}", highlight=False)
        raise typer.Exit(EXIT_CANNOT_MEASURE)
    if watch:
        doctor_node.watch(catalog, nvml, instance_type, window_s)
        nvml.shutdown()
        raise typer.Exit(0)
    view = doctor_node.snapshot(catalog, nvml, instance_type, window_s)
    nvml.shutdown()
    data = view.model_dump(mode="json")
    saved = output is None or save_report(output, data)
    if json_out:
        emit_json(data)
    else:
        doctor_node.render(view)
    raise typer.Exit(0 if saved else 2)


def _target(command: list[str] | None, pid: int | None, torch_hook: bool) -> Any:
    """The running process --pid names (None: a command to run, checked to exist)."""
    if pid is not None:
        if command or torch_hook:
            raise InputError("--pid watches a running process: give no command and no --torch")
        return doctor_pid.process(pid)
    try:
        resolve(command or [])
    except CommandNotFound as exc:
        raise InputError(
            f"{exc}: give the job after --, e.g. advisor doctor -- python train.py"
        ) from None
    return None


def _attach(
    catalog: Catalog,
    root: Any,
    instance_type: str | None,
    window_s: float | None,
    interval_s: float,
    publish: Any,
) -> tuple[str, bool]:
    """Watch the running process, diagnose, publish; (verdict, whether the report was saved)."""
    err = err_console()
    nvml, unmeasured = _open(err)
    err.print(
        f"[dim]doctor:[/] watching pid {root.pid} for "
        f"{window_s or doctor_pid.DEFAULT_WINDOW_S:g} s",
        highlight=False,
    )
    seen = doctor_pid.attach(root, nvml, window_s, interval_s)
    report = _report(
        catalog,
        seen.command,
        instance_type,
        seen.created,
        None,
        seen.wall_s,
        seen.sampled_s,
        interval_s,
        seen.sampler,
        None,
        [*unmeasured, *seen.unmeasured],
        seen.stacks,
    )
    if nvml is not None:
        nvml.shutdown()
    assert report.job is not None
    return report.job.verdict, publish(report)


def _open(err: Any) -> tuple[Nvml | None, list[str]]:
    """NVML, or None and why not (the command still runs; nothing on the GPU is measured)."""
    nvml = open_nvml()
    try:
        if nvml.device_count() == 0:
            raise EnvironmentProblem("no_gpu", "NVML sees no GPU on this machine")
    except EnvironmentProblem as exc:
        err.print(
            f"[yellow]doctor:[/] cannot measure the GPU ({exc.code}: {escape(str(exc))}); "
            "the command runs anyway",
            highlight=False,
            soft_wrap=True,
        )
        return None, [f"GPU: {exc.code}: {exc}"]
    return nvml, []


def _environment(hook_out: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (hook_dir(), env.get("PYTHONPATH")) if p)
    env["ADVISOR_DOCTOR_TORCH_OUT"] = hook_out
    return env


def _report(
    catalog: Catalog,
    command: list[str],
    instance_type: str | None,
    created: dt.datetime,
    code: int | None,
    wall_s: float,
    sampled_s: float,
    interval_s: float,
    sampler: JobSampler,
    torch: TorchStats | None,
    unmeasured: list[str],
    stacks: StackSampler | None = None,
) -> UtilisationReport:
    base = classify_report(
        UtilisationReport(
            created_at=created,
            host=socket.gethostname(),
            instance_type=instance_type,
            duration_s=round(sampled_s, 3),
            interval_s=interval_s,
            gpus=sampler.summaries(),
        ),
        catalog,
    )
    record = usage_record(base)  # the review's view of this report: its prices and savings
    per_gpu, basis = gpu_price(catalog, record, record.gpus[0]) if record.gpus else (None, None)
    found = diagnose(sampler.samples, torch, sampler.memory_total_mib, sampled_s, per_gpu)
    found, stages, ranks = staged(found, sampler.samples, stacks, torch, per_gpu)
    gpus, found = agree(base.gpus, sampler.samples, found)  # one verdict: the review reads it
    base = base.model_copy(update={"gpus": gpus})
    findings = _priced_options(catalog, usage_record(base), found)
    job = JobReport(
        command=command,
        exit_code=code,
        wall_s=round(wall_s, 3),
        sampled_s=round(sampled_s, 3),
        interval_s=interval_s,
        samples=sampler.samples,
        torch=torch,
        unmeasured=unmeasured,
        verdict=found.verdict,
        findings=findings,
        gpu_hours_lost=found.gpu_hours_lost,
        price_basis=basis,
        stages=stages,
        ranks=ranks,
    )
    return base.model_copy(update={"job": job})


def _priced_options(catalog: Catalog, record: UsageRecord, found: Diagnosis) -> list[JobFinding]:
    """An under_used finding names the cheapest catalog option that holds the job, with the
    saving (the review's savings rule, over this report)."""
    options = [s for s in savings(catalog, [record], None) if s.suggestion]
    out = []
    for finding in found.findings:
        f = finding
        if f.code == "under_used" and options and f.cheaper_option is None:
            best = max(options, key=lambda s: s.monthly_saving_usd or 0)
            assert best.suggestion is not None and best.current_hourly_usd is not None
            o = best.suggestion
            port = porting_note(catalog, best.accelerator, o.accelerator)
            f = f.model_copy(
                update={
                    "cheaper_option": f"{o.instance_type} ({best.suggestion_name}, {o.region}, "
                    f"${o.hourly_usd:,.2f}/h)" + (f"; {port}" if port else ""),
                    "saving_usd_per_h": round(best.current_hourly_usd - o.hourly_usd, 2),
                }
            )
        out.append(f)
    return out


def render(report: UtilisationReport) -> None:
    job = report.job
    assert job is not None
    out = console()
    status = "still running" if job.exit_code is None else f"exit {job.exit_code}"
    out.print(
        f"advisor doctor: {escape(' '.join(job.command))} ({status}, {job.wall_s:.1f} s, "
        f"{job.sampled_s:.1f} s sampled)",
        highlight=False,
        soft_wrap=True,
    )
    for g in report.gpus:
        out.print(
            f"  GPU {g.index} {escape(g.name or '?')}: kernel time {_pct(g.util_gpu_mean_pct)}, "
            f"memory peak {_gib(g.memory_used_max_mib)}",
            highlight=False,
        )
    render_stages(out, job)
    if job.verdict == "healthy":
        out.print("[green]healthy:[/] the job keeps the GPU busy", highlight=False)
    for f in job.findings:
        price = f" (idle GPU time: {money(f.idle_usd_per_h)}/h)" if f.idle_usd_per_h else ""
        out.print(f"[bold yellow]{f.code}[/]: {escape(f.summary)}{price}", highlight=False)
        for line in f.evidence:
            out.print(f"    evidence: {escape(line)}", highlight=False, soft_wrap=True)
        out.print(f"    fix: {escape(f.fix)}", highlight=False, soft_wrap=True)
        if f.cheaper_option:
            out.print(
                f"    cheaper: {escape(f.cheaper_option)}, saving {money(f.saving_usd_per_h)}/h "
                "per GPU",
                highlight=False,
            )
    if job.gpu_hours_lost is not None:
        out.print(f"GPU-hours left idle in the window: {job.gpu_hours_lost:.4f}", highlight=False)
    if job.price_basis:
        out.print(f"[dim]price: {escape(job.price_basis)}[/]", highlight=False, soft_wrap=True)
    for line in job.unmeasured:
        out.print(f"[dim]not measured: {escape(line)}[/]", highlight=False, soft_wrap=True)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _gib(mib: float | None) -> str:
    return "-" if mib is None else f"{mib / 1024:.1f} GiB"
