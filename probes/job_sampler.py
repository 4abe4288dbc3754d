"""Readings of a running job (`advisor doctor`): every GPU through NVML, with GPM's SM and tensor
activity where the GPU supports it, and the job's process tree on the host through psutil.

NVML's "GPU utilisation" is the share of time any kernel ran: one tiny kernel at a time reads as
100%. GPM (Hopper and later) says what share of the SMs and tensor cores were busy between two
samples, which is what shows a GPU doing little. A figure NVML cannot read is None, and the
reason is collected once in `unmeasured`, never raised. No torch.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from probes.monitor import GpuSeries
from probes.nvml import Nvml, _text
from probes.report import GpuUtilisation, HostSample, JobGpuSample, JobSample

_MIB = 1024 * 1024
# GPM metrics read per GPU (nvml.h nvmlGpmMetricId_t, by name so no number is guessed); PCIe
# through GPM is in MiB/s.
GPM_METRICS = {
    "sm_active_pct": "NVML_GPM_METRIC_SM_UTIL",
    "tensor_active_pct": "NVML_GPM_METRIC_ANY_TENSOR_UTIL",
    "pcie_tx_mb_s": "NVML_GPM_METRIC_PCIE_TX_PER_SEC",
    "pcie_rx_mb_s": "NVML_GPM_METRIC_PCIE_RX_PER_SEC",
}
MIB_TO_MB = _MIB / 1e6
MAX_SAMPLES = 4000  # a long window keeps every other reading beyond this (the report stays small)


@dataclass
class _Gpu:
    index: int
    handle: Any
    gpm: bool
    series: GpuSeries  # the monitor's figures (util, memory, power, throttling) of the window
    previous: Any = None  # the last GPM sample, the start of the next interval
    memory_total_mib: float | None = None
    power_limit_mw: int | None = None  # read once: the doctor changes no setting


@dataclass
class JobSampler:
    """Reads every GPU and the job's processes every `interval_s` in a background thread until
    stopped; `samples` holds the readings, `unmeasured` what could not be read."""

    nvml: Nvml | None
    job_pids: Callable[[], list[Any]]  # psutil.Process objects of the job's tree, root first
    interval_s: float
    samples: list[JobSample] = field(default_factory=list)
    unmeasured: list[str] = field(default_factory=list)
    _gpus: list[_Gpu] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _start: float = 0.0
    _cpu_seen: dict[int, Any] = field(default_factory=dict)

    def start(self) -> None:
        self._start = time.monotonic()
        self._open_gpus()
        self._thread = threading.Thread(target=self._loop, name="doctor-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> float:
        """Stop sampling (one last reading first); the seconds sampled."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for gpu in self._gpus:
            if gpu.previous is not None and self.nvml is not None:
                self.nvml.soft(self.nvml.lib.nvmlGpmSampleFree, gpu.previous)
                gpu.previous = None
        return time.monotonic() - self._start

    @property
    def memory_total_mib(self) -> dict[int, float | None]:
        return {g.index: g.memory_total_mib for g in self._gpus}

    def summaries(self) -> list[GpuUtilisation]:
        """Each GPU's readings reduced to the monitor's figures (advisor.fleet.utilisation
        classifies them, and the review prices them, as for `advisor monitor`)."""
        return [g.series.result() for g in self._gpus]

    def _note(self, what: str) -> None:
        if what not in self.unmeasured:
            self.unmeasured.append(what)

    def _open_gpus(self) -> None:
        if self.nvml is None:
            return
        lib, soft = self.nvml.lib, self.nvml.soft
        for i in range(self.nvml.device_count()):
            handle = self.nvml.handle(i)
            support = soft(getattr(lib, "nvmlGpmQueryDeviceSupport", _missing), handle)
            gpm = bool(support is not None and getattr(support, "isSupportedDevice", 0))
            if not gpm:
                self._note(
                    f"GPU {i}: SM and tensor activity (GPM) not supported by this GPU or driver"
                )
            mem = soft(lib.nvmlDeviceGetMemoryInfo, handle)
            name = _text(soft(lib.nvmlDeviceGetName, handle))
            series = GpuSeries(i, handle, _text(soft(lib.nvmlDeviceGetUUID, handle)), name)
            self._gpus.append(
                _Gpu(
                    i,
                    handle,
                    gpm,
                    series,
                    self._gpm_sample(handle) if gpm else None,
                    mem.total / _MIB if mem is not None else None,
                    soft(lib.nvmlDeviceGetEnforcedPowerLimit, handle),
                )
            )

    def _loop(self) -> None:
        while True:
            stopped = self._stop.wait(self.interval_s)
            self.samples.append(self.read())
            if len(self.samples) > MAX_SAMPLES:
                self.samples = self.samples[::2]
            if stopped:
                return

    def read(self) -> JobSample:
        procs = self._tree()
        pids = {p.pid for p in procs}
        return JobSample(
            t_s=round(time.monotonic() - self._start, 3),
            host=self._host(procs),
            gpus=[self._gpu(g, pids) for g in self._gpus],
        )

    def _tree(self) -> list[Any]:
        try:
            return self.job_pids()
        except Exception:  # the job exited between readings: nothing left to read
            return []

    def _host(self, procs: list[Any]) -> HostSample | None:
        if not procs:
            return None
        cpu, busiest, rss = 0.0, 0.0, 0.0
        for found in procs:
            # psutil's cpu_percent compares with the previous call on the same object: keep them
            p = self._cpu_seen.setdefault(found.pid, found)
            try:
                pct = p.cpu_percent(None)
                rss += p.memory_info().rss / _MIB
            except Exception:  # gone, or no permission (another user's child)
                continue
            cpu += pct
            busiest = max(busiest, pct)
        return HostSample(
            processes=len(procs),
            cpu_pct=round(cpu, 1),
            busiest_process_cpu_pct=round(busiest, 1),
            rss_mib=round(rss, 1),
        )

    def _gpu(self, gpu: _Gpu, pids: set[int]) -> JobGpuSample:
        assert self.nvml is not None
        lib, soft, h = self.nvml.lib, self.nvml.soft, gpu.handle
        util = soft(lib.nvmlDeviceGetUtilizationRates, h)
        mem = soft(lib.nvmlDeviceGetMemoryInfo, h)
        power = soft(lib.nvmlDeviceGetPowerUsage, h)
        running = soft(lib.nvmlDeviceGetComputeRunningProcesses, h)
        job_mib: float | None = None
        on_gpu: bool | None = None
        if running is None:
            self._note(f"GPU {gpu.index}: the processes on the GPU (NVML cannot list them)")
        else:
            mine = [p for p in running if p.pid in pids]
            on_gpu = bool(mine)
            used = [getattr(p, "usedGpuMemory", None) for p in mine]
            job_mib = sum(u for u in used if isinstance(u, int) and u >= 0) / _MIB
        reasons = self.nvml._throttle(h)
        gpu.series.add(util, mem, power, gpu.power_limit_mw, reasons)
        metrics = self._gpm(gpu)
        if metrics.get("pcie_tx_mb_s") is None:
            metrics.update(self._pcie_counters(h))
        return JobGpuSample(
            index=gpu.index,
            util_gpu_pct=float(util.gpu) if util is not None else None,
            memory_used_mib=round(mem.used / _MIB, 1) if mem is not None else None,
            job_memory_mib=round(job_mib, 1) if job_mib is not None else None,
            job_on_gpu=on_gpu,
            power_w=power / 1000.0 if power is not None else None,
            clock_sm_mhz=soft(lib.nvmlDeviceGetClockInfo, h, lib.NVML_CLOCK_SM),
            throttle_reasons=reasons,
            **metrics,
        )

    def _gpm_sample(self, handle: Any) -> Any:
        assert self.nvml is not None
        lib, soft = self.nvml.lib, self.nvml.soft
        sample = soft(lib.nvmlGpmSampleAlloc)
        if sample is None:
            return None
        try:
            lib.nvmlGpmSampleGet(handle, sample)
        except lib.NVMLError:
            soft(lib.nvmlGpmSampleFree, sample)
            return None
        return sample

    def _gpm(self, gpu: _Gpu) -> dict[str, float | None]:
        """GPM figures over the interval since the previous reading (its sample, then this one)."""
        out: dict[str, float | None] = dict.fromkeys(GPM_METRICS)
        if not gpu.gpm or gpu.previous is None or self.nvml is None:
            return out
        lib, soft = self.nvml.lib, self.nvml.soft
        current = self._gpm_sample(gpu.handle)
        if current is None:
            return out
        names = [(key, getattr(lib, const, None)) for key, const in GPM_METRICS.items()]
        names = [(key, metric_id) for key, metric_id in names if metric_id is not None]
        request = lib.c_nvmlGpmMetricsGet_t()
        request.version = lib.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(names)
        request.sample1, request.sample2 = gpu.previous, current
        for i, (_, metric_id) in enumerate(names):
            request.metrics[i].metricId = metric_id
        try:
            lib.nvmlGpmMetricsGet(request)
            measured = True
        except lib.NVMLError:
            measured = False
        if measured:
            for i, (key, _) in enumerate(names):
                metric = request.metrics[i]
                value = float(metric.value)
                if metric.nvmlReturn == 0 and not math.isnan(value):  # else: not measured
                    scale = MIB_TO_MB if key.startswith("pcie") else 1.0
                    out[key] = round(value * scale, 2)
        soft(lib.nvmlGpmSampleFree, gpu.previous)
        gpu.previous = current
        return out

    def _pcie_counters(self, handle: Any) -> dict[str, float | None]:
        """PCIe throughput from NVML's older counter (KB/s over its last 20 ms) where GPM has
        none."""
        assert self.nvml is not None
        lib, soft = self.nvml.lib, self.nvml.soft
        fn = getattr(lib, "nvmlDeviceGetPcieThroughput", None)
        tx_id = getattr(lib, "NVML_PCIE_UTIL_TX_BYTES", None)
        rx_id = getattr(lib, "NVML_PCIE_UTIL_RX_BYTES", None)
        if fn is None or tx_id is None or rx_id is None:
            return {"pcie_tx_mb_s": None, "pcie_rx_mb_s": None}
        tx, rx = soft(fn, handle, tx_id), soft(fn, handle, rx_id)
        return {
            "pcie_tx_mb_s": round(tx * 1e3 / 1e6, 2) if tx is not None else None,
            "pcie_rx_mb_s": round(rx * 1e3 / 1e6, 2) if rx is not None else None,
        }


def _missing(*_args: Any) -> None:
    return None
