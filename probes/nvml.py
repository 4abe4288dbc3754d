"""NVML behind one lazily initialised query wrapper.

"Not supported" (and "no permission") is a value, None, so one odd GPU or driver never breaks a
report. Only failures to reach NVML at all are raised, translated into EnvironmentProblem.
The `lib` seam is the nvidia-ml-py module (`pynvml`) or tests.fake_nvml for tests.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from probes.errors import INSTALL_PROBE_EXTRA, EnvironmentProblem
from probes.report import GpuInventory, LoadSample, ProcessInfo

T = TypeVar("T")

# NVML return codes (nvml.h) that mean NVML itself cannot be reached.
_LIBRARY_NOT_FOUND = 12
_DRIVER_NOT_LOADED = 9

# Clock-event ("throttle") reason bits, nvml.h nvmlClocksEventReason*.
THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def load_pynvml() -> ModuleType:
    try:
        return importlib.import_module("pynvml")
    except ImportError as exc:
        raise EnvironmentProblem(
            "nvml_bindings_missing",
            f"the nvidia-ml-py package is not installed ({exc}); {INSTALL_PROBE_EXTRA}",
        ) from None


class Nvml:
    """Lazily initialised: nothing touches the driver until the first query."""

    def __init__(self, lib: Any = None) -> None:
        self._lib = lib
        self._ready = False

    @property
    def lib(self) -> Any:
        if self._lib is None:
            self._lib = load_pynvml()
        if not self._ready:
            self._init()
        return self._lib

    def _init(self) -> None:
        lib = self._lib
        try:
            lib.nvmlInit()
        except lib.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code == _LIBRARY_NOT_FOUND:
                raise EnvironmentProblem(
                    "nvml_library_missing",
                    "the NVML library (libnvidia-ml.so) was not found: no NVIDIA driver installed",
                ) from None
            if code == _DRIVER_NOT_LOADED:
                raise EnvironmentProblem(
                    "driver_not_loaded", "the NVIDIA driver is installed but not loaded"
                ) from None
            raise EnvironmentProblem("nvml_error", f"NVML failed to initialise: {exc}") from None
        self._ready = True

    def shutdown(self) -> None:
        if self._ready:
            self.soft(self._lib.nvmlShutdown)
            self._ready = False

    def soft(self, fn: Callable[..., T], *args: Any) -> T | None:
        """Call an NVML query; None when the GPU or driver does not support it."""
        error = self.lib.NVMLError  # resolved before any except names it
        try:
            return fn(*args)
        except error:
            return None

    # -- system ------------------------------------------------------------------------------
    def driver_version(self) -> str | None:
        value = self.soft(self.lib.nvmlSystemGetDriverVersion)
        return _text(value)

    def cuda_driver_version(self) -> str | None:
        value = self.soft(self.lib.nvmlSystemGetCudaDriverVersion)
        if value is None:
            return None
        return f"{value // 1000}.{(value % 1000) // 10}"

    def device_count(self) -> int:
        lib = self.lib  # resolved (or EnvironmentProblem raised) before any except names it
        try:
            count: int = lib.nvmlDeviceGetCount()
        except lib.NVMLError as exc:
            raise EnvironmentProblem("nvml_error", f"NVML cannot count devices: {exc}") from None
        return count

    # -- one device -------------------------------------------------------------------------
    def handle(self, index: int) -> Any:
        lib = self.lib
        try:
            return lib.nvmlDeviceGetHandleByIndex(index)
        except lib.NVMLError as exc:
            raise EnvironmentProblem("no_device", f"NVML has no device {index}: {exc}") from None

    def handle_by_uuid(self, uuid: str) -> Any | None:
        return self.soft(self.lib.nvmlDeviceGetHandleByUUID, uuid)

    def inventory(self, handle: Any) -> GpuInventory:
        lib, soft = self.lib, self.soft
        mem = soft(lib.nvmlDeviceGetMemoryInfo, handle)
        ecc = soft(lib.nvmlDeviceGetEccMode, handle)
        mig = soft(lib.nvmlDeviceGetMigMode, handle)
        util = soft(lib.nvmlDeviceGetUtilizationRates, handle)
        mib = 1024 * 1024
        return GpuInventory(
            index=soft(lib.nvmlDeviceGetIndex, handle),
            name=_text(soft(lib.nvmlDeviceGetName, handle)),
            uuid=_text(soft(lib.nvmlDeviceGetUUID, handle)),
            memory_total_mib=mem.total / mib if mem else None,
            memory_free_mib=mem.free / mib if mem else None,
            memory_used_mib=mem.used / mib if mem else None,
            pcie_gen_current=soft(lib.nvmlDeviceGetCurrPcieLinkGeneration, handle),
            pcie_gen_max=soft(lib.nvmlDeviceGetMaxPcieLinkGeneration, handle),
            pcie_width_current=soft(lib.nvmlDeviceGetCurrPcieLinkWidth, handle),
            pcie_width_max=soft(lib.nvmlDeviceGetMaxPcieLinkWidth, handle),
            power_limit_w=_milli(soft(lib.nvmlDeviceGetEnforcedPowerLimit, handle)),
            power_default_limit_w=_milli(
                soft(lib.nvmlDeviceGetPowerManagementDefaultLimit, handle)
            ),
            power_draw_w=_milli(soft(lib.nvmlDeviceGetPowerUsage, handle)),
            clock_sm_mhz=soft(lib.nvmlDeviceGetClockInfo, handle, lib.NVML_CLOCK_SM),
            clock_sm_max_mhz=soft(lib.nvmlDeviceGetMaxClockInfo, handle, lib.NVML_CLOCK_SM),
            clock_mem_mhz=soft(lib.nvmlDeviceGetClockInfo, handle, lib.NVML_CLOCK_MEM),
            clock_mem_max_mhz=soft(lib.nvmlDeviceGetMaxClockInfo, handle, lib.NVML_CLOCK_MEM),
            temperature_c=soft(lib.nvmlDeviceGetTemperature, handle, lib.NVML_TEMPERATURE_GPU),
            throttle_reasons=self._throttle(handle),
            ecc_enabled=bool(ecc[0]) if ecc else None,
            mig_enabled=bool(mig[0]) if mig else None,
            utilization_gpu_pct=util.gpu if util else None,
            utilization_memory_pct=util.memory if util else None,
            processes=self._processes(handle),
        )

    def _throttle(self, handle: Any) -> list[str] | None:
        lib = self.lib
        getter = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        bits = self.soft(getter, handle) if getter else None
        if bits is None:
            return None
        return [name for bit, name in THROTTLE_BITS.items() if bits & bit]

    def _processes(self, handle: Any) -> list[ProcessInfo] | None:
        procs = self.soft(self.lib.nvmlDeviceGetComputeRunningProcesses, handle)
        if procs is None:
            return None
        out = []
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            name = _text(self.soft(self.lib.nvmlSystemGetProcessName, p.pid))
            mib = used / (1024 * 1024) if isinstance(used, int) and used >= 0 else None
            out.append(ProcessInfo(pid=p.pid, name=name, used_memory_mib=mib))
        return out


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _milli(value: int | None) -> float | None:
    return None if value is None else value / 1000.0


class LoadSampler:
    """Polls NVML in a background thread while measurements run.

    A PCIe link idles at a lower generation to save power and throttle reasons only show under
    load, so both are judged from what was seen during the measurements, not before them.
    """

    def __init__(self, nvml: Nvml, handle: Any, period_s: float = 0.25) -> None:
        self._nvml, self._handle, self._period = nvml, handle, period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
        self._reasons: set[str] = set()
        self._temps: list[int] = []
        self._power: list[float] = []
        self._clocks: list[int] = []
        self._gens: list[int] = []
        self._widths: list[int] = []
        self._count = 0

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _loop(self) -> None:
        lib, soft, h = self._nvml.lib, self._nvml.soft, self._handle
        while not self._stop.is_set():
            self._count += 1
            self._reasons.update(r for r in (self._nvml._throttle(h) or []) if r != "gpu_idle")
            readings: list[tuple[list[Any], Any]] = [
                (self._temps, soft(lib.nvmlDeviceGetTemperature, h, lib.NVML_TEMPERATURE_GPU)),
                (self._power, _milli(soft(lib.nvmlDeviceGetPowerUsage, h))),
                (self._clocks, soft(lib.nvmlDeviceGetClockInfo, h, lib.NVML_CLOCK_SM)),
                (self._gens, soft(lib.nvmlDeviceGetCurrPcieLinkGeneration, h)),
                (self._widths, soft(lib.nvmlDeviceGetCurrPcieLinkWidth, h)),
            ]
            for bucket, value in readings:
                if value is not None:
                    bucket.append(value)
            self._stop.wait(self._period)

    def result(self) -> LoadSample:
        return LoadSample(
            samples=self._count,
            throttle_reasons=sorted(self._reasons),
            temperature_max_c=max(self._temps, default=None),
            power_draw_max_w=max(self._power, default=None),
            clock_sm_min_mhz=min(self._clocks, default=None),
            pcie_gen_max_seen=max(self._gens, default=None),
            pcie_width_max_seen=max(self._widths, default=None),
        )
