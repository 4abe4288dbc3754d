"""A fake of the nvidia-ml-py module surface that probes.nvml uses, shipped for tests.

Configure devices as dicts of attribute values; list functions in `unsupported` to make them raise
NOT_SUPPORTED; set `init_error` to an NVML return code to make nvmlInit fail. A value wrapped in
`Readings` changes over time: each query function steps through the list on its own (the n-th
call of nvmlDeviceGetPowerUsage and the n-th call of nvmlDeviceGetEnforcedPowerLimit see the same
n-th entry), and the last entry repeats once the list is used up; an NVMLError entry is raised.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1
NVML_GPM_METRIC_SM_UTIL = 2
NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20
NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21
NVML_GPM_METRICS_GET_VERSION = 1
NOT_SUPPORTED = 3
TIMEOUT = 10
LIBRARY_NOT_FOUND = 12
DRIVER_NOT_LOADED = 9


class Readings:
    """A device value that changes from one query to the next (see the module docstring)."""

    def __init__(self, *values: Any) -> None:
        if not values:
            raise ValueError("Readings needs at least one value")
        self.values = values
        self._calls: dict[str, int] = {}

    def next(self, fn: str) -> Any:
        n = self._calls.get(fn, 0)
        self._calls[fn] = n + 1
        return self.values[min(n, len(self.values) - 1)]


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        self.value = value
        super().__init__(f"NVML error {value}")


def h200(**overrides: Any) -> dict[str, Any]:
    """A healthy H200 as our test machine reports it (docs/reference-figures.md section 1)."""
    gpu: dict[str, Any] = {
        "name": "NVIDIA H200",
        "uuid": "GPU-00000000-fake-h200",
        "memory": (150_754_820_096, 150_000_000_000),  # total, free (bytes)
        "pcie": (5, 5, 16, 16),  # gen current, gen max, width current, width max
        "power": (700_000, 700_000, 95_000),  # enforced limit, default limit, draw (mW)
        "clocks": (1980, 1980, 3201, 3201),  # sm, sm max, mem, mem max
        "temperature": 35,
        "throttle": 0x1,  # idle
        "ecc": (1, 1),
        "mig": (0, 0),
        "util": (0, 0),
        "processes": [],
        "bus_id": "00000000:18:00.0",
        "pcie_replays": 0,
        "remapped_rows": (0, 0, 0, 0),  # correctable, uncorrectable, pending, failed
        "retired_pages": None,  # None: not supported (Hopper remaps rows instead)
        "retired_pending": None,
        "ecc_errors": {},  # (error type, counter type) -> count; absent: 0
        "nvlinks": None,  # None: no NVLink; else [{"active": bool, "remote": bus id, "errors": {}}]
        "xids": [],  # XID events raised once the probe listens for them
        "events": True,  # whether NVML lets the probe register for XID events
        "pcie_kb_s": None,  # (tx, rx) of NVML's PCIe throughput counter; None: not supported
        "gpm": None,  # GPM metric values by metric id; None: GPM not supported
    }
    gpu.update(overrides)
    return gpu


@dataclass
class FakeNvmlLib:
    devices: list[dict[str, Any]] = field(default_factory=lambda: [h200()])
    driver: str = "580.159.04"
    cuda_driver: int = 13000
    init_error: int | None = None
    unsupported: set[str] = field(default_factory=set)
    initialised: bool = False
    NVMLError: type[NVMLError] = NVMLError
    NVML_CLOCK_SM: int = NVML_CLOCK_SM
    NVML_CLOCK_MEM: int = NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU: int = NVML_TEMPERATURE_GPU
    NVML_PCIE_UTIL_TX_BYTES: int = NVML_PCIE_UTIL_TX_BYTES
    NVML_PCIE_UTIL_RX_BYTES: int = NVML_PCIE_UTIL_RX_BYTES
    NVML_GPM_METRIC_SM_UTIL: int = NVML_GPM_METRIC_SM_UTIL
    NVML_GPM_METRIC_ANY_TENSOR_UTIL: int = NVML_GPM_METRIC_ANY_TENSOR_UTIL
    NVML_GPM_METRIC_PCIE_TX_PER_SEC: int = NVML_GPM_METRIC_PCIE_TX_PER_SEC
    NVML_GPM_METRIC_PCIE_RX_PER_SEC: int = NVML_GPM_METRIC_PCIE_RX_PER_SEC
    NVML_GPM_METRICS_GET_VERSION: int = NVML_GPM_METRICS_GET_VERSION
    c_nvmlGpmMetricsGet_t: type = field(default_factory=lambda: GpmMetricsGet)

    def _check(self, fn: str) -> None:
        if not self.initialised:
            raise NVMLError(1)  # UNINITIALIZED
        if fn in self.unsupported:
            raise NVMLError(NOT_SUPPORTED)

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False

    def nvmlSystemGetDriverVersion(self) -> str:
        self._check("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._check("nvmlSystemGetCudaDriverVersion")
        return self.cuda_driver

    def nvmlDeviceGetCount(self) -> int:
        self._check("nvmlDeviceGetCount")
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._check("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.devices):
            raise NVMLError(2)  # INVALID_ARGUMENT
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        self._check("nvmlDeviceGetHandleByUUID")
        for i, d in enumerate(self.devices):
            if d["uuid"] == uuid:
                return i
        raise NVMLError(6)  # NOT_FOUND

    def _get(self, fn: str, handle: int, key: str) -> Any:
        self._check(fn)
        value = self.devices[handle][key]
        if callable(value):  # computed at the query (e.g. the processes of a running child)
            value = value()
        if isinstance(value, Readings):
            value = value.next(fn)
            if isinstance(value, NVMLError):  # this reading failed (e.g. NOT_SUPPORTED)
                raise value
        return value

    def nvmlDeviceGetIndex(self, h: int) -> int:
        self._check("nvmlDeviceGetIndex")
        return h

    def nvmlDeviceGetName(self, h: int) -> str:
        return str(self._get("nvmlDeviceGetName", h, "name"))

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return str(self._get("nvmlDeviceGetUUID", h, "uuid"))

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        total, free = self._get("nvmlDeviceGetMemoryInfo", h, "memory")
        return SimpleNamespace(total=total, free=free, used=total - free)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return int(self._get("nvmlDeviceGetCurrPcieLinkGeneration", h, "pcie")[0])

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return int(self._get("nvmlDeviceGetMaxPcieLinkGeneration", h, "pcie")[1])

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return int(self._get("nvmlDeviceGetCurrPcieLinkWidth", h, "pcie")[2])

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return int(self._get("nvmlDeviceGetMaxPcieLinkWidth", h, "pcie")[3])

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return int(self._get("nvmlDeviceGetEnforcedPowerLimit", h, "power")[0])

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: int) -> int:
        return int(self._get("nvmlDeviceGetPowerManagementDefaultLimit", h, "power")[1])

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return int(self._get("nvmlDeviceGetPowerUsage", h, "power")[2])

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        sm, _, mem, _ = self._get("nvmlDeviceGetClockInfo", h, "clocks")
        return int(sm if clock == NVML_CLOCK_SM else mem)

    def nvmlDeviceGetMaxClockInfo(self, h: int, clock: int) -> int:
        _, sm, _, mem = self._get("nvmlDeviceGetMaxClockInfo", h, "clocks")
        return int(sm if clock == NVML_CLOCK_SM else mem)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return int(self._get("nvmlDeviceGetTemperature", h, "temperature"))

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return int(self._get("nvmlDeviceGetCurrentClocksEventReasons", h, "throttle"))

    def nvmlDeviceGetEccMode(self, h: int) -> tuple[int, int]:
        value: tuple[int, int] = self._get("nvmlDeviceGetEccMode", h, "ecc")
        return value

    def nvmlDeviceGetMigMode(self, h: int) -> tuple[int, int]:
        value: tuple[int, int] = self._get("nvmlDeviceGetMigMode", h, "mig")
        return value

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        gpu, mem = self._get("nvmlDeviceGetUtilizationRates", h, "util")
        return SimpleNamespace(gpu=gpu, memory=mem)

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        procs = self._get("nvmlDeviceGetComputeRunningProcesses", h, "processes")
        return [SimpleNamespace(pid=p["pid"], usedGpuMemory=p.get("used")) for p in procs]

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        self._check("nvmlSystemGetProcessName")
        for d in self.devices:
            for p in d["processes"]:
                if p["pid"] == pid:
                    return str(p.get("name", "python"))
        raise NVMLError(6)  # NOT_FOUND

    # -- health and topology ----------------------------------------------------------------
    def _supported(self, fn: str, h: int, key: str) -> Any:
        value = self._get(fn, h, key)
        if value is None:
            raise NVMLError(NOT_SUPPORTED)
        return value

    def nvmlDeviceGetPciInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(busId=self._get("nvmlDeviceGetPciInfo", h, "bus_id").encode())

    def nvmlDeviceGetPcieReplayCounter(self, h: int) -> int:
        return int(self._supported("nvmlDeviceGetPcieReplayCounter", h, "pcie_replays"))

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:
        value: tuple[int, int, int, int] = self._supported(
            "nvmlDeviceGetRemappedRows", h, "remapped_rows"
        )
        return value

    def nvmlDeviceGetRetiredPages(self, h: int, cause: int) -> list[int]:
        return list(self._supported("nvmlDeviceGetRetiredPages", h, "retired_pages"))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: int) -> int:
        return int(self._supported("nvmlDeviceGetRetiredPagesPendingStatus", h, "retired_pending"))

    def nvmlDeviceGetTotalEccErrors(self, h: int, error_type: int, counter_type: int) -> int:
        counts = self._get("nvmlDeviceGetTotalEccErrors", h, "ecc_errors")
        return int(counts.get((error_type, counter_type), 0))

    def _link(self, fn: str, h: int, link: int) -> dict[str, Any]:
        links = self._supported(fn, h, "nvlinks")
        if not 0 <= link < len(links):
            raise NVMLError(2)  # INVALID_ARGUMENT (no such link)
        entry: dict[str, Any] = links[link]
        return entry

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        return 1 if self._link("nvmlDeviceGetNvLinkState", h, link)["active"] else 0

    def nvmlDeviceGetNvLinkErrorCounter(self, h: int, link: int, counter: int) -> int:
        errors = self._link("nvmlDeviceGetNvLinkErrorCounter", h, link).get("errors", {})
        return int(errors.get(counter, 0))

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: int, link: int) -> SimpleNamespace:
        remote = self._link("nvmlDeviceGetNvLinkRemotePciInfo", h, link)["remote"]
        return SimpleNamespace(busId=remote.encode())

    def nvmlDeviceGetTopologyCommonAncestor(self, h1: int, h2: int) -> int:
        self._check("nvmlDeviceGetTopologyCommonAncestor")
        return 30 if h1 != h2 else 0  # HOSTBRIDGE between two GPUs

    def nvmlDeviceGetP2PStatus(self, h1: int, h2: int, index: int) -> int:
        self._check("nvmlDeviceGetP2PStatus")
        return 0  # OK

    def nvmlEventSetCreate(self) -> list[int]:
        self._check("nvmlEventSetCreate")
        return []  # the handles registered

    def nvmlDeviceRegisterEvents(self, h: int, types: int, event_set: list[int]) -> None:
        self._check("nvmlDeviceRegisterEvents")
        if not self.devices[h]["events"]:
            raise NVMLError(NOT_SUPPORTED)
        event_set.append(h)

    def nvmlEventSetWait_v2(self, event_set: list[int], timeout_ms: int) -> SimpleNamespace:
        self._check("nvmlEventSetWait_v2")
        for h in event_set:
            pending = self.devices[h]["xids"]
            if pending:
                return SimpleNamespace(device=h, eventType=0x8, eventData=pending.pop(0))
        time.sleep(min(timeout_ms, 20) / 1000)
        raise NVMLError(TIMEOUT)

    def nvmlEventSetFree(self, event_set: list[int]) -> None:
        self._check("nvmlEventSetFree")

    # -- PCIe throughput and GPM (advisor doctor) --------------------------------------------
    def nvmlDeviceGetPcieThroughput(self, h: int, counter: int) -> int:
        return int(self._supported("nvmlDeviceGetPcieThroughput", h, "pcie_kb_s")[counter])

    def nvmlGpmQueryDeviceSupport(self, h: int) -> SimpleNamespace:
        self._check("nvmlGpmQueryDeviceSupport")
        return SimpleNamespace(isSupportedDevice=int(self.devices[h]["gpm"] is not None))

    def nvmlGpmSampleAlloc(self) -> SimpleNamespace:
        self._check("nvmlGpmSampleAlloc")
        return SimpleNamespace(device=None)

    def nvmlGpmSampleGet(self, h: int, sample: SimpleNamespace) -> SimpleNamespace:
        self._check("nvmlGpmSampleGet")
        sample.device = h
        return sample

    def nvmlGpmSampleFree(self, sample: SimpleNamespace) -> None:
        self._check("nvmlGpmSampleFree")

    def nvmlGpmMetricsGet(self, request: GpmMetricsGet) -> GpmMetricsGet:
        """Each metric's value between the two samples: the device's `gpm` entry (a Readings
        steps once per call, for all metrics alike)."""
        values = self._get("nvmlGpmMetricsGet", request.sample2.device, "gpm")
        for m in request.metrics[: request.numMetrics]:
            m.value = float(values.get(m.metricId, float("nan")))
            m.nvmlReturn = 0
        return request


@dataclass
class GpmMetric:
    metricId: int = 0
    nvmlReturn: int = 0
    value: float = 0.0


@dataclass
class GpmMetricsGet:
    """nvidia-ml-py's c_nvmlGpmMetricsGet_t, as the doctor fills and reads it."""

    version: int = 0
    numMetrics: int = 0
    sample1: Any = None
    sample2: Any = None
    # NVML_GPM_METRIC_MAX slots, as the real array
    metrics: list[GpmMetric] = field(default_factory=lambda: [GpmMetric() for _ in range(477)])
