"""Whole-node power (advisor/catalog/power.py): published system figures for HGX-built instances,
GPUs plus the host's share otherwise, CPU VMs prorated by their share of the socket; and the
engine's power budget and reasons reading that one figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from advisor import Catalog, CatalogError, recommend
from advisor.catalog.power import HOST_MEMORY_W_PER_GIB, instance_power
from advisor.request import RecommendRequest
from tests.factories import load_mini


def power_w(catalog: Catalog, instance_id: str) -> float:
    it = catalog.instance_types[instance_id]
    return instance_power(it, catalog.accelerators, catalog.systems).watts


def test_dgx_h100_node_is_its_published_system_power(shipped: Catalog) -> None:
    # NVIDIA DGX H100/H200 user guide: "System Power Usage ~10.2 kW max" -- not 8 x 700 W TDP.
    system = shipped.systems["dgx-h100"]
    assert system.max_power_w == 10.2e3 and "10.2 kW" in system.source
    for instance_id in ("p5.48xlarge", "a3-highgpu-8g", "Standard_ND96isr_H100_v5"):
        assert power_w(shipped, instance_id) == 10_200
    assert power_w(shipped, "p5.48xlarge") > 8 * shipped.accelerators["h100-sxm"].tdp_w


def test_dgx_a100_node_and_a_one_gpu_share(shipped: Catalog) -> None:
    # NVIDIA DGX A100 datasheet: "6.5 kW max"; a one-GPU slice of the same board: 6,500 / 8.
    assert "6.5 kW" in shipped.systems["dgx-a100"].source
    assert power_w(shipped, "p4d.24xlarge") == 6_500
    assert power_w(shipped, "a2-highgpu-1g") == 6_500 / 8


def test_four_vcpu_vm_is_prorated_by_hand(shipped: Catalog) -> None:
    # m7i.xlarge: 4 vCPUs of a Xeon Platinum 8480+ (56 cores, 112 threads, 350 W): 4/112 x 350.
    assert power_w(shipped, "m7i.xlarge") == pytest.approx(4 / 112 * 350)  # 12.5 W, not 350 W
    # c7a: one vCPU per physical core (no SMT): 32 of EPYC 9654's 96 cores x 360 W = 120 W.
    assert power_w(shipped, "c7a.8xlarge") == pytest.approx(32 / 96 * 360)


def test_gpu_instance_without_a_system_adds_its_host_share(shipped: Catalog) -> None:
    # g6.xlarge: one 72 W L4 + 4 of 128 threads of a 280 W EPYC (Milan class) + 16 GiB RAM.
    expected = 72 + 4 / 128 * 280 + 16 * HOST_MEMORY_W_PER_GIB
    power = instance_power(
        shipped.instance_types["g6.xlarge"], shipped.accelerators, shipped.systems
    )
    assert power.watts == pytest.approx(expected) and power.estimated
    assert "72 W GPU TDP" in power.basis and "(estimated)" in power.basis


def test_every_figure_says_how_it_was_reached(shipped: Catalog) -> None:
    for it in shipped.instance_types.values():
        power = instance_power(it, shipped.accelerators, shipped.systems)
        assert power.watts > 0 and power.basis, it.id
        if it.system is None and it.accelerator is not None:
            acc = shipped.accelerators[it.accelerator]
            if it.cpu is None:
                # no host CPU published (TPU VMs, Trn2/Inf2) or not yet in
                # catalog/node_facts.yaml (p6-b300, OCI bare metal): GPUs only, said, estimated
                assert power.estimated and "host not in the catalog" in power.basis, it.id
                continue
            assert power.watts > it.gpu_count * acc.tdp_w, it.id


def test_power_budget_reads_the_node_figure(shipped: Catalog) -> None:
    # 7 kW: a DGX A100-class node (6.5 kW) fits; an H100 node (10.2 kW) does not, although its
    # GPUs' TDP alone (5.6 kW) would.
    w = RecommendRequest(workload="large_scale_training", power_budget_w=7000, limit=1000)
    result = recommend(shipped, w)
    p4d = next(r for r in result.recommendations if r.instance_type == "p4d.24xlarge")
    assert p4d.power_w == 6_500
    assert any("6,500 W (1 x the NVIDIA DGX A100's published maximum" in s for s in p4d.reasons)
    p5 = next(r for r in result.rejected if r.id == "p5.48xlarge")
    assert p5.codes == ("POWER_OVER_BUDGET",)
    assert "draw 10,200 W (1 x the NVIDIA DGX H100's published maximum" in p5.reasons[0]


def test_a_cpu_class_without_threads_is_charged_the_whole_socket(tmp_path: Path) -> None:
    mini = load_mini(tmp_path)  # cpu-x states no socket threads
    power = instance_power(mini.instance_types["cpu4"], mini.accelerators, mini.systems)
    assert power.watts == 300 and power.estimated


def _with_system(**system: Any) -> Any:
    def mutate(data: dict[str, Any]) -> None:
        data["systems"] = [
            {
                "id": "sys-big",
                "name": "SYS",
                "accelerator": "big",
                "gpu_count": 8,
                "max_power_w": 10_000,
                "source": "test",
                **system,
            }
        ]
        data["instance_types"][0]["system"] = "sys-big"  # big8
        data["instance_types"][3]["system"] = "sys-big"  # small1: another GPU

    return mutate


def test_a_system_of_other_gpus_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CatalogError) as info:
        load_mini(tmp_path, _with_system())
    text = str(info.value)
    assert "small1" in text and "its power does not stand for this instance's" in text
    assert "big8" not in text


def test_systems_forbid_unknown_fields(tmp_path: Path) -> None:
    with pytest.raises(CatalogError) as info:
        load_mini(tmp_path, _with_system(max_power_kw=10))
    assert "max_power_kw" in str(info.value)


def test_unknown_system_is_refused(tmp_path: Path) -> None:
    def mutate(data: dict[str, Any]) -> None:
        data["instance_types"][0]["system"] = "dgx-nope"

    with pytest.raises(CatalogError) as info:
        load_mini(tmp_path, mutate)
    assert "unknown system 'dgx-nope'" in str(info.value)
