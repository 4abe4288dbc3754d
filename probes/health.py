"""NVML's health counters of one GPU, and the XID events raised while the probe runs.

Each counter is read through Nvml.soft: a counter the GPU or driver does not support is None in
the report, never an error. advisor judges them (advisor/fleet/health.py); this module only reads.
"""

from __future__ import annotations

import threading
from typing import Any

from probes.nvml import Nvml
from probes.report import GpuHealth, NvLinkState

# nvml.h: the NVLink data-link error counters, and how many links a GPU can have.
NVLINK_COUNTERS = {0: "replay", 1: "recovery", 2: "crc_flit", 3: "crc_data"}
NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS is 18 on Hopper; newer headers say more
NVML_FEATURE_ENABLED = 1
XID_CRITICAL_ERROR = 0x8  # nvmlEventTypeXidCriticalError
_NVML_ERROR_TIMEOUT = 10


class XidListener:
    """Collects the XID events of some GPUs while the probe runs (a background thread).

    `events(handle)` is None when NVML cannot register for them (VMs often cannot)."""

    def __init__(self, nvml: Nvml, handles: list[Any], wait_ms: int = 200) -> None:
        self._nvml, self._wait_ms = nvml, wait_ms
        self._stop = threading.Event()
        self._seen: dict[int, list[int]] = {}
        self._set: Any = None
        self._uuids = [nvml.soft(nvml.lib.nvmlDeviceGetUUID, h) for h in handles]
        self._handles = handles
        self._thread = threading.Thread(target=self._loop, name="nvml-xid", daemon=True)

    def __enter__(self) -> XidListener:
        lib = self._nvml.lib
        self._set = self._nvml.soft(lib.nvmlEventSetCreate)
        if self._set is not None:
            for i, h in enumerate(self._handles):
                try:  # returns None on success, so Nvml.soft cannot tell success from failure
                    lib.nvmlDeviceRegisterEvents(h, XID_CRITICAL_ERROR, self._set)
                except lib.NVMLError:
                    continue  # not supported here (VMs often): this GPU's XIDs stay None
                self._seen[i] = []
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        if self._set is not None:
            self._nvml.soft(self._nvml.lib.nvmlEventSetFree, self._set)

    def _loop(self) -> None:
        lib = self._nvml.lib
        while not self._stop.is_set():
            try:
                data = lib.nvmlEventSetWait_v2(self._set, self._wait_ms)
            except lib.NVMLError as exc:
                if getattr(exc, "value", None) == _NVML_ERROR_TIMEOUT:
                    continue
                return  # the event set broke: what was seen stays
            position = self._position(getattr(data, "device", None))
            if position in self._seen:
                self._seen[position].append(int(getattr(data, "eventData", 0)))

    def _position(self, device: Any) -> int | None:
        """Events name the GPU by an NVML handle: matched by UUID (handles are C pointers)."""
        uuid = (
            self._nvml.soft(self._nvml.lib.nvmlDeviceGetUUID, device)
            if device is not None
            else None
        )
        return self._uuids.index(uuid) if uuid is not None and uuid in self._uuids else None

    def events(self, position: int) -> list[int] | None:
        return list(self._seen[position]) if position in self._seen else None


def read_health(
    nvml: Nvml, handle: Any, xids: list[int] | None, replays_before: int | None
) -> GpuHealth:
    lib, soft = nvml.lib, nvml.soft
    remapped = soft(lib.nvmlDeviceGetRemappedRows, handle)
    replays = pcie_replays(nvml, handle)
    pages = soft(lib.nvmlDeviceGetRetiredPages, handle, 1)  # double-bit ECC cause
    pending = soft(lib.nvmlDeviceGetRetiredPagesPendingStatus, handle)

    def ecc(error_type: int, counter: int) -> int | None:
        value = soft(lib.nvmlDeviceGetTotalEccErrors, handle, error_type, counter)
        return None if value is None else int(value)

    return GpuHealth(
        xid_events=xids,
        retired_pages_pending=None if pending is None else bool(pending),
        retired_pages=None if pages is None else len(pages),
        remapped_rows_correctable=None if remapped is None else int(remapped[0]),
        remapped_rows_uncorrectable=None if remapped is None else int(remapped[1]),
        remap_pending=None if remapped is None else bool(remapped[2]),
        remap_failed=None if remapped is None else bool(remapped[3]),
        ecc_volatile_corrected=ecc(0, 0),
        ecc_volatile_uncorrected=ecc(1, 0),
        ecc_aggregate_corrected=ecc(0, 1),
        ecc_aggregate_uncorrected=ecc(1, 1),
        pcie_replays=replays,
        pcie_replays_during=(
            None if replays is None or replays_before is None else replays - replays_before
        ),
        nvlinks=nvlinks(nvml, handle),
    )


def pcie_replays(nvml: Nvml, handle: Any) -> int | None:
    value = nvml.soft(nvml.lib.nvmlDeviceGetPcieReplayCounter, handle)
    return None if value is None else int(value)


def nvlinks(nvml: Nvml, handle: Any) -> list[NvLinkState] | None:
    """Every NVLink NVML knows of on this GPU: state and error counters. None: no NVLink."""
    lib, soft = nvml.lib, nvml.soft
    links = []
    for link in range(NVLINK_MAX_LINKS):
        state = soft(lib.nvmlDeviceGetNvLinkState, handle, link)
        if state is None:
            continue  # no such link on this GPU
        errors = {}
        for counter, name in NVLINK_COUNTERS.items():
            value = soft(lib.nvmlDeviceGetNvLinkErrorCounter, handle, link, counter)
            if value is not None:
                errors[name] = int(value)
        links.append(NvLinkState(link=link, active=state == NVML_FEATURE_ENABLED, errors=errors))
    return links or None
