"""probes.probe.run_probe on a machine without a GPU (real CPU torch), failure mapping, the
watchdog, the out-of-memory guard and probes.stats.summarize."""

from __future__ import annotations

import contextlib
import datetime as dt
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from probes import cpu, measure
from probes.device import TorchDevice
from probes.environment import import_torch
from probes.errors import LockBusy, MeasurementError, OutOfDeviceMemory, WatchdogTimeout
from probes.nvml import Nvml
from probes.probe import ProbeRun, _run_step, run_probe
from probes.report import Inventory
from probes.stats import Measurement, failed, summarize
from probes.watchdog import run_with_watchdog
from tests.fake_nvml import FakeNvmlLib
from tests.probe_fakes import fake_torch


@pytest.fixture(scope="module")
def torch() -> Any:
    return import_torch()


def no_nvml() -> Nvml:
    return Nvml(FakeNvmlLib(init_error=12))


def canned(name: str, unit: str, value: float = 1.0) -> Measurement:
    return summarize(name, unit, [value, value], "max")


def empty_run() -> ProbeRun:
    inv = Inventory(hostname="h", python="3.11")
    return ProbeRun(dt.datetime.now(dt.UTC), "quick", 0, inv, [])


# -- the whole run on this CPU machine ---------------------------------------------------------


def test_cpu_run_diagnoses_and_still_measures_the_cpu() -> None:
    said: list[str] = []
    run = run_probe(nvml=no_nvml(), progress=said.append, environ={})
    codes = [d.code for d in run.diagnosis]
    assert "nvml_library_missing" in codes
    assert run.gpu_measured is False and run.watchdog_tripped is False
    by_name = {m.name: m for m in run.measurements}
    assert list(by_name) == ["cpu_matmul_fp32", "cpu_memcpy"]
    for m in by_name.values():
        assert m.error is None, m.error
        assert m.value is not None and m.value > 0
        assert m.statistic == "max" and m.value == max(m.samples) and len(m.samples) == 5
    assert by_name["cpu_matmul_fp32"].unit == "TFLOP/s"
    assert by_name["cpu_matmul_fp32"].params["n"] == 1024
    assert by_name["cpu_memcpy"].unit == "GB/s"
    assert by_name["cpu_memcpy"].params["bytes"] == 128 << 20
    assert said == [
        "inspecting the machine",
        "[1/2] measuring cpu_matmul_fp32",
        "[2/2] measuring cpu_memcpy",
    ]
    assert run.duration_s > 0


def test_without_torch_the_cpu_is_still_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """No torch and no numpy: the memory copy is measured by probes.cpu, the matmul is skipped
    with the reason (numpy is blocked so the case is the same on every machine)."""

    def no_torch() -> Any:
        raise ImportError("no torch")

    monkeypatch.setitem(sys.modules, "numpy", None)  # makes `import numpy` raise ImportError
    run = run_probe(nvml=no_nvml(), torch_loader=no_torch, environ={})
    assert [d.code for d in run.diagnosis] == ["torch_missing", "nvml_library_missing"]
    matmul, memcpy = run.measurements
    assert (matmul.name, matmul.value) == ("cpu_matmul_fp32", None)
    assert matmul.error == "unsupported: " + cpu.NO_MATMUL
    assert (memcpy.name, memcpy.unit, memcpy.error) == ("cpu_memcpy", "GB/s", None)
    assert memcpy.params["bytes"] == 128 << 20 and len(memcpy.samples) == 5
    # Each sample copies 128 MiB, read and written: a plausible machine moves 0.5-1000 GB/s.
    assert memcpy.value is not None and 0.5 < memcpy.value < 1000
    assert memcpy.value == max(memcpy.samples)


def test_cpu_matmul_through_numpy_counts_two_n_cubed_flops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("numpy")
    ticks = iter([0.0, 0.5, 1.0, 1.25])  # two timed samples: 0.5 s and 0.25 s

    monkeypatch.setattr(cpu.time, "perf_counter", lambda: next(ticks))
    m = cpu.matmul(64, 2)
    # 2 * 64**3 = 524,288 FLOPs: 1.048576e6 FLOP/s at 0.5 s, 2.097152e6 at 0.25 s (best)
    assert m.samples == pytest.approx([1.048576e-6, 2.097152e-6])
    assert m.value == pytest.approx(2.097152e-6) and m.params["n"] == 64


def test_the_lock_is_only_taken_for_gpu_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measure, "matmul", lambda *a: canned("cpu_matmul_fp32", "TFLOP/s"))
    taken: list[str] = []

    def lock(key: str) -> contextlib.AbstractContextManager[object]:
        taken.append(key)
        return contextlib.nullcontext()

    run_probe(nvml=no_nvml(), environ={}, only={"cpu_matmul_fp32"}, lock=lock)
    assert taken == []


# -- one failing measurement never loses the others -------------------------------------------


def _raise(exc: BaseException) -> Callable[..., Measurement]:
    def step(*args: Any) -> Measurement:
        raise exc

    return step


def _oom_inside_the_guard(dev: TorchDevice, *args: Any) -> Measurement:
    with dev.oom_guard("cpu_matmul_fp32 at n=1024"):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")


# (case guarded, replacement of probes.measure.matmul, the error recorded for cpu_matmul_fp32)
FAILURES: list[tuple[str, Callable[..., Measurement], str]] = [
    ("a foreign exception is named by type", _raise(ValueError("boom")), "ValueError: boom"),
    (
        "torch's out-of-memory through the device guard",
        _oom_inside_the_guard,
        "out of memory for cpu_matmul_fp32 at n=1024: CUDA out of memory. Tried to allocate 2.00 GiB",
    ),
    (
        "OutOfDeviceMemory raised by a step",
        _raise(OutOfDeviceMemory("out of device memory for d2d of 256 MiB")),
        "out of device memory for d2d of 256 MiB",
    ),
    (
        "NotImplementedError means unsupported (verification skips it)",
        _raise(NotImplementedError("fp8 matmul needs compute capability 8.9 or newer")),
        "unsupported: fp8 matmul needs compute capability 8.9 or newer",
    ),
    ("a MeasurementError keeps its own words", _raise(MeasurementError("bad size")), "bad size"),
]


@pytest.mark.parametrize(
    ("replacement", "error"), [(r, e) for _, r, e in FAILURES], ids=[c for c, _, _ in FAILURES]
)
def test_a_failing_step_becomes_an_error_and_the_next_still_runs(
    monkeypatch: pytest.MonkeyPatch, replacement: Callable[..., Measurement], error: str
) -> None:
    monkeypatch.setattr(measure, "matmul", replacement)
    monkeypatch.setattr(measure, "d2d", lambda *a: canned("cpu_memcpy", "GB/s", 20.0))
    run = run_probe(nvml=no_nvml(), environ={})
    first, second = run.measurements
    assert (first.name, first.unit, first.value, first.error) == (
        "cpu_matmul_fp32",
        "TFLOP/s",
        None,
        error,
    )
    assert (second.name, second.value, second.error) == ("cpu_memcpy", 20.0, None)
    assert run.watchdog_tripped is False


def test_run_step_maps_exceptions_directly() -> None:
    run = empty_run()
    ok = _run_step("x", "GB/s", lambda: canned("x", "GB/s", 3.0), 5.0, run)
    assert ok.value == 3.0 and ok.error is None
    bad = _run_step("x", "GB/s", _raise(KeyError("k")), 5.0, run)
    assert bad.error == "KeyError: 'k'" and bad.value is None and bad.unit == "GB/s"
    assert run.watchdog_tripped is False


# -- the watchdog ------------------------------------------------------------------------------


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Lets a deliberately hung step's thread finish when the test ends."""
    event = threading.Event()
    yield event
    event.set()


def test_a_hung_step_trips_the_watchdog_and_later_steps_do_not_run(
    monkeypatch: pytest.MonkeyPatch, release: threading.Event
) -> None:
    def hang(*args: Any) -> Measurement:
        release.wait(10)
        return canned("cpu_matmul_fp32", "TFLOP/s")

    ran: list[str] = []
    monkeypatch.setattr(measure, "matmul", hang)

    def memcpy(*args: Any) -> Measurement:
        ran.append("d2d")
        return canned("cpu_memcpy", "GB/s")

    monkeypatch.setattr(measure, "d2d", memcpy)
    run = run_probe(nvml=no_nvml(), environ={}, watchdog_s=0.2)
    assert run.watchdog_tripped is True
    hung, skipped = run.measurements
    assert hung.name == "cpu_matmul_fp32" and hung.value is None
    assert hung.error == "cpu_matmul_fp32 did not finish within 0.2 s (watchdog)"
    assert (skipped.name, skipped.unit, skipped.value, skipped.error) == (
        "cpu_memcpy",
        "GB/s",
        None,
        "not run: an earlier step hung",
    )
    assert ran == []


def test_run_with_watchdog_returns_raises_and_times_out(release: threading.Event) -> None:
    assert run_with_watchdog(lambda: 42, 1.0, "quick") == 42
    with pytest.raises(ZeroDivisionError):  # the step's own exception, re-raised in the caller
        run_with_watchdog(lambda: 1 // 0, 1.0, "div")
    with pytest.raises(WatchdogTimeout, match=r"^slow did not finish within 0\.2 s \(watchdog\)$"):
        run_with_watchdog(lambda: release.wait(10), 0.2, "slow")


def test_a_step_finishing_in_time_does_not_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    def quick(*args: Any) -> Measurement:
        time.sleep(0.05)
        return canned("cpu_matmul_fp32", "TFLOP/s", 2.0)

    monkeypatch.setattr(measure, "matmul", quick)
    run = run_probe(nvml=no_nvml(), environ={}, only={"cpu_matmul_fp32"}, watchdog_s=2.0)
    assert run.watchdog_tripped is False
    assert [(m.name, m.value) for m in run.measurements] == [("cpu_matmul_fp32", 2.0)]


# -- the GPU path with fakes: lock, sampling under load, release between steps -----------------


def _fake_gpu_run(
    monkeypatch: pytest.MonkeyPatch,
    torch: Any,
    matmul: Callable[..., Measurement],
    **kw: Any,
) -> ProbeRun:
    monkeypatch.setattr(measure, "pick_matmul_n", lambda dev, elem, preferred: 256)
    monkeypatch.setattr(measure, "matmul", matmul)
    return run_probe(
        nvml=Nvml(FakeNvmlLib()),
        torch_loader=lambda: torch,
        environ={},
        only={"matmul_bf16", "matmul_fp16"},
        **kw,
    )


def test_gpu_path_takes_the_lock_by_uuid_and_samples_under_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch = fake_torch()
    taken: list[str] = []

    @contextlib.contextmanager
    def lock(key: str) -> Iterator[object]:
        taken.append(key)
        yield key

    def mm(dev: TorchDevice, dtype: str, n: int, repeats: int) -> Measurement:
        assert (dev.device, n, repeats) == ("cuda:0", 256, 8)
        return canned(f"matmul_{dtype}", "TFLOP/s", 700.0)

    run = _fake_gpu_run(monkeypatch, torch, mm, lock=lock)
    assert run.diagnosis == []
    assert [(m.name, m.value) for m in run.measurements] == [
        ("matmul_fp16", 700.0),
        ("matmul_bf16", 700.0),
    ]
    assert taken == ["GPU-00000000-fake-h200"]
    load = run.inventory.under_load
    assert load is not None and load.samples >= 1
    assert load.pcie_gen_max_seen == 5 and load.throttle_reasons == []  # gpu_idle left out
    # the allocator cache is emptied between measurements
    assert torch.cuda.calls.count("empty_cache") == 2


def test_lock_busy_stops_the_gpu_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def busy(key: str) -> contextlib.AbstractContextManager[object]:
        raise LockBusy(f"another probe (pid 1) is measuring GPU {key}")

    with pytest.raises(LockBusy, match="GPU-00000000-fake-h200"):
        _fake_gpu_run(monkeypatch, fake_torch(), lambda *a: canned("m", "TFLOP/s"), lock=busy)


def test_no_device_sync_after_the_watchdog_tripped(
    monkeypatch: pytest.MonkeyPatch, release: threading.Event
) -> None:
    torch = fake_torch()

    def hang(*args: Any) -> Measurement:
        release.wait(10)
        return canned("matmul_fp16", "TFLOP/s")

    run = _fake_gpu_run(monkeypatch, torch, hang, watchdog_s=0.2)
    assert run.watchdog_tripped is True
    assert "synchronize" not in torch.cuda.calls


# -- the out-of-memory guard --------------------------------------------------------------------


# (case guarded, exception raised inside the guard, exception type out, its message, or None = same)
OOM: list[tuple[str, BaseException, type[BaseException], str | None]] = [
    (
        "torch's CUDA out-of-memory message",
        RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB"),
        OutOfDeviceMemory,
        "out of memory for matmul: CUDA out of memory. Tried to allocate 20.00 GiB",
    ),
    (
        "any RuntimeError saying 'Out Of Memory', any case",
        RuntimeError("HIP Out Of Memory"),
        OutOfDeviceMemory,
        "out of memory for matmul: HIP Out Of Memory",
    ),
    (
        "other RuntimeErrors pass through untouched",
        RuntimeError("mat1 and mat2 shapes cannot be multiplied"),
        RuntimeError,
        None,
    ),
    (
        "non-RuntimeErrors pass through even when they mention memory",
        ValueError("out of memory"),
        ValueError,
        None,
    ),
]


@pytest.mark.parametrize(
    ("raised", "kind", "message"), [(r, k, m) for _, r, k, m in OOM], ids=[c for c, *_ in OOM]
)
def test_oom_guard(
    torch: Any, raised: BaseException, kind: type[BaseException], message: str | None
) -> None:
    dev = TorchDevice(torch, None)
    with pytest.raises(kind) as info, dev.oom_guard("matmul"):
        raise raised
    assert info.type is kind
    if message is None:
        assert info.value is raised
    else:
        assert str(info.value) == message


def test_oom_guard_maps_torchs_out_of_memory_error(torch: Any) -> None:
    dev = TorchDevice(torch, None)
    with (
        pytest.raises(OutOfDeviceMemory, match=r"^out of device memory for d2d: nope$"),
        dev.oom_guard("d2d"),
    ):
        raise torch.OutOfMemoryError("nope")


def test_oom_guard_lets_a_clean_block_through(torch: Any) -> None:
    with TorchDevice(torch, None).oom_guard("nothing"):
        pass


# -- summarize ----------------------------------------------------------------------------------


# (case guarded, samples, statistic, expected fields)
SUMMARIES: list[tuple[str, list[float], str, dict[str, Any]]] = [
    (
        "odd count: median is the middle, iqr from exclusive quartiles, spread flagged noisy",
        [5.0, 1.0, 3.0, 2.0, 4.0],
        "median",
        dict(
            value=3.0,
            median=3.0,
            min=1.0,
            max=5.0,
            iqr=3.0,
            cv=pytest.approx(2**0.5 / 3),
            noisy=True,
        ),
    ),
    (
        "even count: median of the middle two; a quiet figure is not noisy",
        [99.0, 100.0, 101.0, 100.0],
        "median",
        dict(
            value=100.0,
            median=100.0,
            min=99.0,
            max=101.0,
            iqr=pytest.approx(1.5),
            cv=pytest.approx(0.5**0.5 / 100),
            noisy=False,
        ),
    ),
    (
        "statistic=max reports the best sample and keeps the median",
        [10.0, 30.0, 20.0],
        "max",
        dict(value=30.0, median=20.0, statistic="max", iqr=20.0, max=30.0, min=10.0, noisy=True),
    ),
    (
        "one sample: no spread",
        [7.0],
        "median",
        dict(value=7.0, median=7.0, iqr=0.0, cv=0.0, noisy=False),
    ),
    (
        "cv just above 5% is noisy",
        [94.0, 106.0],
        "median",
        dict(value=100.0, cv=pytest.approx(0.06), noisy=True),
    ),
    (
        "cv at 4% is not noisy",
        [96.0, 104.0],
        "median",
        dict(value=100.0, cv=pytest.approx(0.04), noisy=False),
    ),
]


@pytest.mark.parametrize(
    ("samples", "statistic", "fields"),
    [(s, st, f) for _, s, st, f in SUMMARIES],
    ids=[c for c, *_ in SUMMARIES],
)
def test_summarize(samples: list[float], statistic: Any, fields: dict[str, Any]) -> None:
    m = summarize("x", "GB/s", samples, statistic, bytes=1)
    assert m.error is None and m.samples == samples and m.params == {"bytes": 1}
    assert m.statistic == statistic
    assert {k: getattr(m, k) for k in fields} == fields


def test_summarize_without_samples_is_an_error() -> None:
    m = summarize("d2d", "GB/s", [], "max", bytes=1)
    assert (m.value, m.median, m.samples, m.error) == (None, None, [], "no samples")
    assert m.params == {"bytes": 1}


def test_failed_measurement() -> None:
    m = failed("h2d_pinned", "GB/s", "boom", bytes=8)
    assert (m.name, m.unit, m.value, m.error, m.params) == (
        "h2d_pinned",
        "GB/s",
        None,
        "boom",
        {"bytes": 8},
    )
