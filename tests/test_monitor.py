"""`advisor monitor`: the NVML sampler over a fake whose readings change, the classification rules
(table-driven, boundaries included), duration parsing, and the CLI with and without NVML."""

from __future__ import annotations

import ctypes.util
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from advisor import Catalog
from advisor.cli import app, monitor_cmd
from advisor.errors import InputError
from advisor.fleet.utilisation import (
    GPU_MEMORY_HIGH,
    GPU_MEMORY_LOW,
    GPU_UTIL_HIGH,
    GPU_UTIL_LOW,
    THROTTLED,
    assess,
    classify,
)
from probes.errors import EnvironmentProblem
from probes.monitor import format_span, percentile, sample
from probes.nvml import Nvml
from probes.report import GpuUtilisation, UtilisationReport
from tests import fake_nvml
from tests.fake_nvml import FakeNvmlLib, NVMLError, Readings, h200
from tests.test_cli import run

GIB = 1 << 30
TOTAL = 150_754_820_096  # the fake H200's memory, bytes
TOTAL_MIB = TOTAL / (1 << 20)


def memory(used_gib: float) -> tuple[int, int]:
    """NVML memory info as the fake takes it: (total, free) in bytes."""
    return TOTAL, TOTAL - int(used_gib * GIB)


def power(draw_w: float) -> tuple[int, int, int]:
    return 700_000, 700_000, int(draw_w * 1000)


# -- the sampler ------------------------------------------------------------------------------


def busy_and_idle() -> FakeNvmlLib:
    """GPU 0 works harder each reading and hits its power cap; GPU 1 sits idle."""
    busy = h200(
        util=Readings((10, 5), (20, 10), (40, 20), (60, 30), (80, 40), (100, 50)),
        memory=Readings(*(memory(g) for g in (10, 40, 70, 100, 60, 20))),
        power=Readings(*(power(w) for w in (200, 300, 400, 500, 600, 700))),
        throttle=Readings(0x1, 0x0, 0x8, 0x8 | 0x40 | 0x4, 0x8, 0x2),
    )
    idle = h200(uuid="GPU-idle", memory=memory(0.5), power=power(80), util=(0, 0), throttle=0x1)
    return FakeNvmlLib(devices=[busy, idle])


def test_sampler_reduces_changing_readings_per_gpu() -> None:
    messages: list[str] = []
    busy, idle = sample(Nvml(busy_and_idle()), 0.3, 0.05, progress=messages.append)
    assert (busy.index, busy.name, busy.samples) == (0, "NVIDIA H200", 6)
    assert busy.util_gpu_mean_pct == pytest.approx(310 / 6, abs=0.01)
    assert busy.util_gpu_p95_pct == pytest.approx(95.0)  # between 80 and 100, linear
    assert busy.util_memory_mean_pct == pytest.approx(155 / 6, abs=0.01)
    assert busy.memory_used_max_mib == pytest.approx(100 * 1024, abs=0.1)
    assert busy.memory_total_mib == pytest.approx(TOTAL_MIB, abs=0.1)
    assert busy.power_mean_w == pytest.approx(450.0)
    assert busy.power_limit_w == 700.0
    # union without gpu_idle; power or thermal limits in readings 3, 4, 5 of 6
    assert busy.throttle_reasons == [
        "applications_clocks_setting",
        "hw_slowdown",
        "hw_thermal_slowdown",
        "sw_power_cap",  # seen, but holding the power limit is not counted as throttled
    ]
    assert busy.throttled_fraction == pytest.approx(0.5)
    assert busy.finding is None and busy.evidence == []  # classification is advisor's job
    assert (idle.uuid, idle.util_gpu_p95_pct, idle.throttle_reasons) == ("GPU-idle", 0.0, [])
    assert idle.throttled_fraction == 0.0
    assert messages[0] == "sampling 2 GPU(s) every 0.05 s for 0.3 s"


def test_sampler_takes_its_time_and_stops_early_on_request() -> None:
    lib = busy_and_idle()
    started = time.monotonic()
    sample(Nvml(lib), 0.25, 0.05)
    # a lower bound only (load makes it longer, never shorter): readings at each interval's end
    assert time.monotonic() - started >= 0.24
    stop = threading.Event()
    threading.Timer(0.15, stop.set).start()
    (gpu, _) = sample(Nvml(busy_and_idle()), 30, 0.05, stop=stop)
    assert 1 <= gpu.samples < 30 / 0.05  # stopped early: fewer readings than the window holds


def test_unsupported_and_failing_readings_are_left_out() -> None:
    lib = FakeNvmlLib(
        devices=[
            h200(
                util=Readings((50, 10), NVMLError(fake_nvml.NOT_SUPPORTED), (70, 30)),
                memory=memory(10),
            )
        ],
        unsupported={"nvmlDeviceGetPowerUsage", "nvmlDeviceGetCurrentClocksEventReasons"},
    )
    (gpu,) = sample(Nvml(lib), 0.15, 0.05)
    assert gpu.samples == 3
    assert gpu.util_gpu_mean_pct == 60.0  # two readings, the failed one left out
    assert gpu.power_mean_w is None and gpu.power_limit_w == 700.0
    assert gpu.throttled_fraction is None and gpu.throttle_reasons == []


def test_sampler_raises_the_environment_problem() -> None:
    lib = FakeNvmlLib(init_error=fake_nvml.LIBRARY_NOT_FOUND)
    with pytest.raises(EnvironmentProblem) as info:
        sample(Nvml(lib), 1, 0.5)
    assert info.value.code == "nvml_library_missing"
    assert sample(Nvml(FakeNvmlLib(devices=[])), 1, 0.5) == []


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 0.95, None),  # no readings
        ([7.0], 0.95, 7.0),  # one reading
        ([0.0, 100.0], 0.95, 95.0),  # interpolated between ranks
        ([5.0, 1.0, 3.0], 0.5, 3.0),  # unsorted input
    ],
)
def test_percentile(values: list[float], q: float, expected: float | None) -> None:
    assert percentile(values, q) == expected


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.05, "0.05 s"), (30, "30 s"), (90, "1.5 min"), (600, "10 min"), (3600, "1 h")],
)
def test_format_span(seconds: float, text: str) -> None:
    assert format_span(seconds) == text
    assert format_span(5400) == "1 h 30 min"


# -- classification ---------------------------------------------------------------------------

MIB_TOTAL = 100_000.0  # memory shares below are used / this


def gpu(
    mean: float | None = 60.0,
    p95: float | None = None,
    mem_share: float | None = 0.6,
    throttled: float | None = 0.0,
    samples: int = 600,
) -> GpuUtilisation:
    return GpuUtilisation(
        index=0,
        name="NVIDIA H200",
        samples=samples,
        util_gpu_mean_pct=mean,
        util_gpu_p95_pct=p95 if p95 is not None else mean,
        memory_used_max_mib=None if mem_share is None else mem_share * MIB_TOTAL,
        memory_total_mib=MIB_TOTAL,
        throttled_fraction=throttled,
    )


CASES: list[tuple[str, GpuUtilisation, str | None, list[str]]] = [
    # idle: quiet compute and memory
    ("idle", gpu(mean=1, p95=4.99, mem_share=0.0499), "idle", [GPU_UTIL_LOW, GPU_MEMORY_LOW]),
    # idle boundary: p95 at exactly 5% is not idle (strict), but low enough to be over-provisioned
    (
        "p95 at 5%",
        gpu(mean=2, p95=5.0, mem_share=0.01),
        "over_provisioned",
        [GPU_UTIL_LOW, GPU_MEMORY_LOW],
    ),
    # idle boundary: memory at exactly 5% is not idle
    (
        "memory at 5%",
        gpu(mean=0, p95=0, mem_share=0.05),
        "over_provisioned",
        [GPU_UTIL_LOW, GPU_MEMORY_LOW],
    ),
    # idle needs memory too: a process holding data between bursts is not idle
    ("holding memory", gpu(mean=1, p95=2, mem_share=0.6), "over_provisioned", [GPU_UTIL_LOW]),
    # over_provisioned by utilisation alone, just under 30%
    ("util 29.99%", gpu(mean=29.99, p95=70), "over_provisioned", [GPU_UTIL_LOW]),
    # utilisation boundary: exactly 30% is not low
    ("util 30%", gpu(mean=30.0, p95=70), "optimized", []),
    # over_provisioned by memory alone, just under 40%
    ("memory 39.9%", gpu(mem_share=0.399), "over_provisioned", [GPU_MEMORY_LOW]),
    # memory boundary: exactly 40% is not low
    ("memory 40%", gpu(mem_share=0.40), "optimized", []),
    # under_provisioned: busy and full, just over both limits
    (
        "busy and full",
        gpu(mean=90.01, mem_share=0.9001),
        "under_provisioned",
        [GPU_UTIL_HIGH, GPU_MEMORY_HIGH],
    ),
    # utilisation boundary: exactly 90% is not high
    ("util 90%", gpu(mean=90.0, mem_share=0.95), "optimized", []),
    # memory boundary: exactly 90% is not high
    ("memory 90%", gpu(mean=95, mem_share=0.90), "optimized", []),
    # busy time alone is not a GPU too small (NVML counts time a kernel ran, not SMs used)
    ("busy only", gpu(mean=99, mem_share=0.5), "optimized", []),
    # full memory alone neither (caching allocators hold what they do not use)
    ("full only", gpu(mean=50, mem_share=0.99), "optimized", []),
    # under_provisioned by throttling, just over half the readings
    ("throttled 50.01%", gpu(throttled=0.5001), "under_provisioned", [THROTTLED]),
    # throttling boundary: exactly half is not "most of the time"
    ("throttled 50%", gpu(throttled=0.5), "optimized", []),
    # every under-provisioning reason at once, each reported
    (
        "all high",
        gpu(mean=99, mem_share=0.99, throttled=0.9),
        "under_provisioned",
        [GPU_UTIL_HIGH, GPU_MEMORY_HIGH, THROTTLED],
    ),
    # under_provisioned wins over over_provisioned (Compute Optimizer's precedence)
    (
        "throttled but low",
        gpu(mean=20, mem_share=0.2, throttled=0.8),
        "under_provisioned",
        [THROTTLED],
    ),
    # idle wins over everything
    (
        "idle and throttled",
        gpu(mean=0, p95=0, mem_share=0.01, throttled=0.9),
        "idle",
        [GPU_UTIL_LOW, GPU_MEMORY_LOW],
    ),
    # no utilisation readings (MIG): memory low is still known, so over_provisioned
    ("no util, low memory", gpu(mean=None, mem_share=0.2), "over_provisioned", [GPU_MEMORY_LOW]),
    # no utilisation readings and memory fine: over-provisioning cannot be ruled out
    ("no util, memory fine", gpu(mean=None, mem_share=0.6), None, []),
    # no memory readings with moderate utilisation: cannot be decided either
    ("no memory", gpu(mean=60, mem_share=None), None, []),
    # unreadable throttling does not block a finding the other figures decide
    ("no throttle reading", gpu(mean=60, throttled=None), "optimized", []),
    # no readings at all
    ("no samples", gpu(samples=0), None, []),
]


@pytest.mark.parametrize(("case", "g", "finding", "codes"), CASES, ids=[c[0] for c in CASES])
def test_classification(
    case: str, g: GpuUtilisation, finding: str | None, codes: list[str]
) -> None:
    result = assess(g, 600)
    assert (result.finding, result.reason_codes) == (finding, codes)
    assert result.evidence  # always a sentence, even when undecided


def test_every_finding_and_reason_code_is_covered() -> None:
    findings = {c[2] for c in CASES}
    assert findings == {"idle", "over_provisioned", "under_provisioned", "optimized", None}
    codes = {code for c in CASES for code in c[3]}
    assert codes == {GPU_UTIL_LOW, GPU_MEMORY_LOW, GPU_UTIL_HIGH, GPU_MEMORY_HIGH, THROTTLED}


def test_evidence_cites_the_numbers(shipped: Catalog) -> None:
    g = gpu(mean=3, p95=4, mem_share=0.01).model_copy(
        update={"power_mean_w": 95.0, "power_limit_w": 700.0}
    )
    out = classify(g, 600, shipped)
    assert out.accelerator == "h200-sxm" and out.finding == "idle"
    util, mem, power = out.evidence
    assert util == (
        "GPU utilisation averaged 3% (p95 4%) over 10 min; p95 below the idle threshold of 5%"
    )
    assert (
        mem == "memory used peaked at 1.0 GiB of 97.7 GiB (1%); peak below the idle threshold of 5%"
    )
    assert power == "power draw averaged 95 W of a 700 W limit (13.6%)"
    throttled = classify(
        gpu(throttled=0.62).model_copy(update={"throttle_reasons": ["hw_slowdown"]}), 30
    )
    assert throttled.evidence[2] == (
        "power or thermal limits held the clocks back in 62% of readings (hw_slowdown); "
        "share above the under-provisioning threshold of 50%"
    )
    unknown = gpu().model_copy(update={"name": "NVIDIA Imaginary 9000"})
    assert classify(unknown, 60, shipped).accelerator is None


# -- duration parsing and the CLI ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("10m", 600),
        ("1h", 3600),
        ("1h30m", 5400),
        ("500ms", 0.5),
        ("90", 90),
        ("1.5min", 90),
        (" 2M ", 120),
        ("1h 30m", 5400),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert monitor_cmd.parse_duration(text, "--duration") == seconds


@pytest.mark.parametrize("text", ["", "10x", "m", "-5s", "0s", "1h30", "1..5s", "10 m s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(InputError, match="--duration"):
        monitor_cmd.parse_duration(text, "--duration")


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--duration", "10x"], "--duration '10x' is not a duration"),
        (["--duration", "0s"], "--duration must be longer than zero"),
        (["--interval", "10ms"], "--interval '10ms' is below 0.1 s"),
        (["--duration", "31d"], "--duration '31d' is not a duration"),
        (["--duration", "745h"], "longer than 30 days"),
        (
            ["--duration", "1m", "--interval", "2m"],
            "--interval '2m' is longer than --duration '1m'",
        ),
        (["--instance-type", "p5en.48xlarg"], "did you mean 'p5en.48xlarge'"),
        (["--output", "/nonexistent-dir/x.json"], "does not exist"),
        (["--report-to", "ftp://svc"], "needs an http(s) URL"),
    ],
)
def test_bad_usage_is_exit_2_with_one_line(args: list[str], text: str) -> None:
    p = run("monitor", *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.startswith("error: ") and text in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and p.stdout == ""


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has NVML"
)
def test_no_nvml_is_exit_3_with_a_diagnosis() -> None:
    p = run("monitor", "--duration", "1s")
    assert p.returncode == 3, (p.stdout, p.stderr)
    line = p.stderr.strip()
    assert line.startswith("error: cannot monitor: nvml_"), line
    assert len(line.splitlines()) == 1 and "Traceback" not in p.stderr
    assert p.stdout == ""
    # with --json the same error is one JSON object
    p = run("monitor", "--duration", "1s", "--json")
    assert p.returncode == 3 and p.stdout == ""
    body = json.loads(p.stderr)
    assert body["exit_code"] == 3 and body["error"].startswith("cannot monitor: nvml_")


@pytest.fixture
def fake_machine(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeNvmlLib]:
    lib = busy_and_idle()
    monkeypatch.setattr(monitor_cmd, "open_nvml", lambda: Nvml(lib))
    yield lib


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_cli_json_report_on_a_fake_machine(fake_machine: FakeNvmlLib, tmp_path: Path) -> None:
    out = tmp_path / "util.json"
    r = invoke(
        "monitor", "--duration", "0.6s", "--interval", "0.1s", "--json",
        "--output", str(out), "--instance-type", "p5en.48xlarge",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    report = UtilisationReport.model_validate_json(r.stdout)
    assert report.instance_type == "p5en.48xlarge" and report.interval_s == 0.1
    assert report.duration_s > 0.5  # the window was sampled (a lower bound: load only adds)
    busy, idle = report.gpus
    assert busy.accelerator == idle.accelerator == "h200-sxm"
    assert (busy.finding, busy.reason_codes) == ("optimized", [])
    assert (idle.finding, idle.reason_codes) == ("idle", [GPU_UTIL_LOW, GPU_MEMORY_LOW])
    assert json.loads(out.read_text()) == json.loads(r.stdout)
    assert "monitor: sampling 2 GPU(s) every 0.1 s for 0.6 s" in r.stderr
    assert not fake_machine.initialised  # NVML shut down


def test_cli_table(fake_machine: FakeNvmlLib) -> None:
    r = invoke("monitor", "--duration", "0.3s", "--interval", "0.1s")
    assert r.exit_code == 0, r.output
    assert "advisor monitor on" in r.stdout and "NVIDIA H200 (h200-sxm)" in r.stdout
    # GPU 1's row: idle, its reasons, and 0.5 GiB of the fake's 150,754,820,096 B = 140.4 GiB
    (row,) = [line for line in r.stdout.splitlines() if "0.5 / 140.4 GiB" in line]
    assert "idle" in row and "GPU_UTIL_LOW, GPU_MEMORY_LOW" in row and "80 / 700 W" in row
    assert "GPU 1: GPU utilisation averaged 0% (p95 0%) over" in r.stdout


def _interrupt_once_handled(before: Any) -> None:
    """Ctrl-C as soon as the monitor has put its own handler in place (never before it)."""
    deadline = time.monotonic() + 10
    while signal.getsignal(signal.SIGINT) is before and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGINT)


def test_cli_ctrl_c_ends_the_window_with_a_report(fake_machine: FakeNvmlLib) -> None:
    before = signal.getsignal(signal.SIGINT)
    threading.Thread(target=_interrupt_once_handled, args=(before,), daemon=True).start()
    r = invoke("monitor", "--duration", "1m", "--interval", "0.1s", "--json")
    assert r.exit_code == 0, r.output
    report = UtilisationReport.model_validate_json(r.stdout)
    # stopped early: fewer readings than the minute's 600
    assert report.duration_s < 60 and 1 <= report.gpus[0].samples < 600
    assert "monitor: stopped after" in r.stderr
    assert signal.getsignal(signal.SIGINT) is before  # handler restored


def test_cli_without_gpus_is_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(monitor_cmd, "open_nvml", lambda: Nvml(FakeNvmlLib(devices=[])))
    r = invoke("monitor", "--duration", "1s")
    assert r.exit_code == 3
    assert r.stderr.strip() == "error: cannot monitor: no_gpu: NVML sees no GPU on this machine"
