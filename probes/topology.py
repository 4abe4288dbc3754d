"""How NVML says the GPUs of a node are connected: NVLinks between each pair (direct or through
an NVSwitch), the PCIe common ancestor, and NVML's P2P read status. Every reading may be None."""

from __future__ import annotations

from typing import Any

from probes.health import NVLINK_MAX_LINKS, NVML_FEATURE_ENABLED
from probes.nvml import Nvml
from probes.report import PeerLink

# nvml.h nvmlGpuTopologyLevel_t
ANCESTORS = {
    0: "internal",
    10: "single",
    20: "multiple",
    30: "hostbridge",
    40: "node",
    50: "system",
}
_P2P_CAPS_INDEX_READ = 0  # nvidia-ml-py spells NVML_P2P_CAPS_INDEX_READ as the tuple (0,)
_P2P_STATUS_OK = 0


def peer_links(nvml: Nvml, handles: dict[int, Any]) -> list[PeerLink]:
    """One PeerLink per ordered pair of the GPUs in `handles` (CUDA index -> NVML handle)."""
    lib, soft = nvml.lib, nvml.soft
    bus = {i: _bus_id(soft(lib.nvmlDeviceGetPciInfo, h)) for i, h in handles.items()}
    by_bus = {b: i for i, b in bus.items() if b is not None}
    direct: dict[tuple[int, int], int] = {}
    switched: dict[int, int] = {}  # links of a GPU that end at a device other than a GPU
    for i, h in handles.items():
        for link in range(NVLINK_MAX_LINKS):
            if soft(lib.nvmlDeviceGetNvLinkState, h, link) != NVML_FEATURE_ENABLED:
                continue
            remote = _bus_id(soft(lib.nvmlDeviceGetNvLinkRemotePciInfo, h, link))
            peer = by_bus.get(remote) if remote is not None else None
            if peer is not None and peer != i:
                direct[(i, peer)] = direct.get((i, peer), 0) + 1
            else:
                switched[i] = switched.get(i, 0) + 1
    out = []
    for i, hi in handles.items():
        for j, hj in handles.items():
            if i == j:
                continue
            level = soft(lib.nvmlDeviceGetTopologyCommonAncestor, hi, hj)
            p2p = soft(lib.nvmlDeviceGetP2PStatus, hi, hj, _P2P_CAPS_INDEX_READ)
            # Through an NVSwitch every GPU reaches every other over all of its switch links.
            links = direct.get((i, j), 0) + (switched.get(i, 0) if switched.get(j) else 0)
            out.append(
                PeerLink(
                    gpu=i,
                    peer=j,
                    nvlink_links=links,
                    via_nvswitch=bool(switched.get(i) and switched.get(j)),
                    common_ancestor=ANCESTORS.get(level) if level is not None else None,
                    p2p_supported=None if p2p is None else p2p == _P2P_STATUS_OK,
                )
            )
    return out


def _bus_id(info: Any) -> str | None:
    if info is None:
        return None
    value = getattr(info, "busId", None)
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else str(value)
    return text.strip().lower() or None
