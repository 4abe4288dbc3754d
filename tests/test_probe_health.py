"""probes.health and probes.topology through the NVML seam (tests.fake_nvml, checked against the
real nvidia-ml-py by tests/test_fake_nvml_contract.py)."""

from __future__ import annotations

import time

from probes.health import XidListener, pcie_replays, read_health
from probes.nvml import Nvml
from probes.topology import peer_links
from tests.fake_nvml import FakeNvmlLib, h200


def test_health_of_a_healthy_h200() -> None:
    nvml = Nvml(FakeNvmlLib())
    h = read_health(nvml, nvml.handle(0), [], 0)
    assert (h.remap_failed, h.remap_pending, h.remapped_rows_uncorrectable) == (False, False, 0)
    assert h.retired_pages is None and h.retired_pages_pending is None  # not supported: None
    assert h.ecc_volatile_uncorrected == 0 and h.pcie_replays == 0 and h.pcie_replays_during == 0
    assert h.nvlinks is None and h.xid_events == []


def test_counters_that_moved() -> None:
    lib = FakeNvmlLib(
        devices=[
            h200(
                remapped_rows=(1, 2, 1, 0),
                ecc_errors={(1, 0): 3, (1, 1): 5, (0, 0): 40},
                pcie_replays=12,
                nvlinks=[
                    {"active": True, "remote": "x", "errors": {2: 7}},
                    {"active": False, "remote": "x"},
                ],
            )
        ]
    )
    nvml = Nvml(lib)
    handle = nvml.handle(0)
    h = read_health(nvml, handle, None, replays_before=9)
    assert (h.remapped_rows_correctable, h.remapped_rows_uncorrectable, h.remap_pending) == (
        1,
        2,
        True,
    )
    assert (h.ecc_volatile_uncorrected, h.ecc_aggregate_uncorrected, h.ecc_volatile_corrected) == (
        3,
        5,
        40,
    )
    assert (h.pcie_replays, h.pcie_replays_during) == (12, 3)
    assert h.nvlinks is not None and [(n.link, n.active) for n in h.nvlinks] == [
        (0, True),
        (1, False),
    ]
    assert h.nvlinks[0].errors == {"replay": 0, "recovery": 0, "crc_flit": 7, "crc_data": 0}
    assert h.xid_events is None and pcie_replays(nvml, handle) == 12


def test_xid_events_raised_while_listening_are_collected() -> None:
    lib = FakeNvmlLib(devices=[h200(xids=[79, 13]), h200(uuid="GPU-other")])
    nvml = Nvml(lib)
    with XidListener(nvml, [nvml.handle(0), nvml.handle(1)]) as listener:
        deadline = time.monotonic() + 5
        while listener.events(0) != [79, 13] and time.monotonic() < deadline:
            time.sleep(0.01)
    assert listener.events(0) == [79, 13] and listener.events(1) == []


def test_xid_events_not_supported_is_none() -> None:
    nvml = Nvml(FakeNvmlLib(devices=[h200(events=False)]))
    with XidListener(nvml, [nvml.handle(0)]) as listener:
        pass
    assert listener.events(0) is None


def test_topology_direct_nvlinks_and_through_a_switch() -> None:
    a, b = "00000000:18:00.0", "00000000:2a:00.0"
    direct = FakeNvmlLib(
        devices=[
            h200(bus_id=a, nvlinks=[{"active": True, "remote": b}] * 4),
            h200(uuid="GPU-b", bus_id=b, nvlinks=[{"active": True, "remote": a}] * 4),
        ]
    )
    nvml = Nvml(direct)
    links = peer_links(nvml, {0: nvml.handle(0), 1: nvml.handle(1)})
    assert [(t.gpu, t.peer, t.nvlink_links, t.via_nvswitch) for t in links] == [
        (0, 1, 4, False),
        (1, 0, 4, False),
    ]
    assert {t.common_ancestor for t in links} == {"hostbridge"} and {
        t.p2p_supported for t in links
    } == {True}
    switch = "00000000:c0:00.0"  # an NVSwitch, not a GPU
    switched = FakeNvmlLib(
        devices=[
            h200(bus_id=a, nvlinks=[{"active": True, "remote": switch}] * 18),
            h200(uuid="GPU-b", bus_id=b, nvlinks=[{"active": True, "remote": switch}] * 18),
        ]
    )
    nvml = Nvml(switched)
    links = peer_links(nvml, {0: nvml.handle(0), 1: nvml.handle(1)})
    assert [(t.nvlink_links, t.via_nvswitch) for t in links] == [(18, True), (18, True)]
    pcie = Nvml(FakeNvmlLib(devices=[h200(bus_id=a), h200(uuid="GPU-b", bus_id=b)]))
    links = peer_links(pcie, {0: pcie.handle(0), 1: pcie.handle(1)})
    assert [(t.nvlink_links, t.via_nvswitch) for t in links] == [(0, False), (0, False)]
