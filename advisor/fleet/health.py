"""NVML health counters of one GPU judged as checks, each with the action a platform team takes.

Actions follow NVIDIA's XID catalog and DCGM's vocabulary: `monitor` (keep running, watch it),
`reset` (reset the GPU or reboot the node, then probe again), `drain` (take the node out of
service until it is repaired), `replace` (the part is bad). A counter the GPU does not support
is a `skip` check saying so, never an error.
"""

from __future__ import annotations

from collections.abc import Callable

from probes.report import Action, Check, GpuHealth, Status

# XIDs by what to do: the application's own faults, errors a GPU reset clears, and errors that
# take the node out of service. From NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors,
# "Analyzing Xid Errors with the Xid Catalog": each XID's resolution bucket) and NVIDIA Health
# Validation's Xid checks (docs.nvidia.com/health-validation/reference/checks/xid: XIDs 46 and
# 48 "drain: reset_gpu -> service_required"), read 2026-12-01; an XID not listed drains.
XID_ACTIONS: dict[int, Action] = {
    13: "monitor",  # graphics engine exception (usually the application)
    31: "monitor",  # GPU memory page fault (usually the application)
    43: "monitor",  # GPU stopped processing (the application's context)
    45: "monitor",  # preemptive cleanup after an earlier error
    92: "monitor",  # high single-bit ECC error rate
    63: "reset",  # row remapping recorded: reset to apply it
    64: "reset",  # row remapping failed to record
    74: "reset",  # NVLink error
    94: "reset",  # contained ECC error
    46: "drain",  # GPU stopped processing
    48: "drain",  # double-bit ECC error
    79: "drain",  # the GPU has fallen off the bus
    95: "drain",  # uncontained ECC error
    119: "drain",  # GSP timeout
    120: "drain",  # GSP error
}
ACTION_ORDER: tuple[Action, ...] = ("monitor", "reset", "drain", "replace")


def health_checks(health: GpuHealth) -> list[Check]:
    return [check(health) for check in HEALTH_CHECKS]


def _check(name: str, status: Status, detail: str, action: Action | None = None) -> Check:
    return Check(name=name, status=status, detail=detail, action=action, scope="health")


def _xid(h: GpuHealth) -> Check:
    if h.xid_events is None:
        return _check("xid_events", "skip", "not supported: NVML cannot listen for XID events")
    if not h.xid_events:
        return _check("xid_events", "pass", "no XID event while the probe ran")
    actions = [XID_ACTIONS.get(x, "drain") for x in h.xid_events]
    action = max(actions, key=ACTION_ORDER.index)
    status: Status = "warn" if action == "monitor" else "fail"
    listed = ", ".join(str(x) for x in sorted(set(h.xid_events)))
    return _check("xid_events", status, f"XID {listed} while the probe ran: {action}", action)


def _row_remapping(h: GpuHealth) -> Check:
    if h.remap_failed is None and h.retired_pages_pending is None:
        return _check("row_remapping", "skip", "not supported: no row remapping or page retirement")
    if h.remap_failed:
        return _check(
            "row_remapping", "fail", "a row remapping failed: the memory is bad", "replace"
        )
    if h.remap_pending or h.retired_pages_pending:
        what = "row remapping" if h.remap_pending else "page retirement"
        return _check("row_remapping", "warn", f"a {what} waits for a GPU reset", "reset")
    if h.remapped_rows_uncorrectable is not None:
        rows = (h.remapped_rows_uncorrectable or 0) + (h.remapped_rows_correctable or 0)
        detail = f"{rows} row(s) remapped, none pending or failed"
        return _check("row_remapping", "pass", detail)
    return _check("row_remapping", "pass", f"{h.retired_pages or 0} page(s) retired, none pending")


def _ecc(h: GpuHealth) -> Check:
    if h.ecc_volatile_uncorrected is None and h.ecc_aggregate_uncorrected is None:
        return _check("ecc_errors", "skip", "not supported: ECC counters unreadable (ECC off?)")
    volatile = h.ecc_volatile_uncorrected or 0
    aggregate = h.ecc_aggregate_uncorrected or 0
    corrected = h.ecc_volatile_corrected or 0
    if volatile:
        detail = f"{volatile} uncorrected ECC error(s) since the driver loaded"
        return _check("ecc_errors", "fail", detail, "reset")
    if aggregate:
        detail = (
            f"{aggregate} uncorrected ECC error(s) over the GPU's life, none since the driver "
            "loaded"
        )
        return _check("ecc_errors", "warn", detail, "monitor")
    return _check(
        "ecc_errors",
        "pass",
        f"no uncorrected ECC error; {corrected} corrected since the driver loaded",
    )


def _pcie_replays(h: GpuHealth) -> Check:
    if h.pcie_replays is None:
        return _check(
            "pcie_replays", "skip", "not supported: the PCIe replay counter is unreadable"
        )
    if h.pcie_replays_during:
        detail = (
            f"{h.pcie_replays_during} PCIe replay(s) while the probe ran ({h.pcie_replays} in "
            "all): the link retransmits"
        )
        return _check("pcie_replays", "warn", detail, "monitor")
    return _check(
        "pcie_replays", "pass", f"no PCIe replay while the probe ran ({h.pcie_replays} in all)"
    )


def _nvlinks(h: GpuHealth) -> Check:
    if h.nvlinks is None:
        return _check("nvlink_links", "skip", "no NVLink on this GPU (or not readable)")
    down = [link.link for link in h.nvlinks if link.active is False]
    up = len(h.nvlinks) - len(down)
    errors = {
        name: sum(link.errors.get(name, 0) for link in h.nvlinks)
        for name in ("replay", "recovery", "crc_flit", "crc_data")
    }
    counted = ", ".join(f"{n} {v}" for n, v in errors.items() if v)
    if down and up:
        listed = ", ".join(str(d) for d in down)
        detail = f"NVLink {listed} down while {up} other(s) are up: the fabric runs degraded"
        return _check("nvlink_links", "fail", detail, "drain")
    if down and not up:
        detail = (
            f"none of the {len(down)} NVLink(s) NVML lists is up: no NVLink traffic (on an "
            "NVSwitch node, is the fabric manager running?)"
        )
        return _check("nvlink_links", "warn", detail, "monitor")
    if counted:
        return _check(
            "nvlink_links", "warn", f"{up} NVLink(s) up; error counters: {counted}", "monitor"
        )
    return _check("nvlink_links", "pass", f"{up} NVLink(s) up, no link errors counted")


HEALTH_CHECKS: tuple[Callable[[GpuHealth], Check], ...] = (
    _xid,
    _row_remapping,
    _ecc,
    _pcie_replays,
    _nvlinks,
)
