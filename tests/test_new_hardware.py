"""Newer hardware: accelerators against their datasheets, the instance-or-reason load check,
Trainium recommended, the probe refusing what it cannot measure, edge cost per year, host memory,
node facts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import probes.probe
from advisor import Catalog, CatalogError, Workload, recommend
from advisor.catalog.models import Accelerator
from advisor.cli import app
from advisor.perf.cost import edge_cost_per_year
from tests.factories import TODAY, acc, inst, load_catalog, price, write_catalog

# Hand-copied from the vendor pages named beside each row (read 2026-12-01). Tensor rates are
# DENSE: where the page prints only the sparse figure, the row says so and halves it by hand.
DATASHEET: list[tuple[str, str, float, str]] = [
    # https://awsdocs-neuron.readthedocs-hosted.com/.../trainium2.rst : "1,299 FP8 TFLOPS",
    # "667 BF16/FP16/TF32 TFLOPS", "181 FP32 TFLOPS", "96 GiB ... 2.9 TB/sec", "1.28 TB/sec"
    ("trainium2", "fp8", 1299, "aws neuron trainium2"),
    ("trainium2", "bf16", 667, "aws neuron trainium2"),
    ("trainium2", "fp32", 181, "aws neuron trainium2"),
    ("trainium2", "memory_gb", 96 * 2**30 / 1e9, "aws neuron trainium2: 96 GiB"),
    ("trainium2", "memory_bandwidth_gbps", 2900, "aws neuron trainium2: 2.9 TB/s"),
    ("trainium2", "interconnect_gb_s", 1280, "aws neuron trainium2: 1.28 TB/s per chip"),
    # https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-hardware/trainium.html
    # "380 INT8 TOPS, 190 FP16/BF16/cFP8/TF32 TFLOPS, and 47.5 FP32", "32 GiB ... 820 GiB/sec"
    ("trainium1", "bf16", 190, "aws neuron trainium"),
    ("trainium1", "int8", 380, "aws neuron trainium"),
    ("trainium1", "fp32", 47.5, "aws neuron trainium"),
    ("trainium1", "memory_bandwidth_gbps", 820 * 2**30 / 1e9, "820 GiB/s"),
    # https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-hardware/inferentia2.html
    ("inferentia2", "bf16", 190, "aws neuron inferentia2"),
    ("inferentia2", "memory_gb", 32 * 2**30 / 1e9, "32 GiB"),
    # https://cloud.google.com/tpu/docs/v5e : 197 TFLOPs bf16, 393 TOPs int8, 16 GB, 819 GBps
    ("tpu-v5e", "bf16", 197, "cloud tpu v5e"),
    ("tpu-v5e", "int8", 393, "cloud tpu v5e"),
    ("tpu-v5e", "memory_gb", 16, "cloud tpu v5e"),
    ("tpu-v5e", "memory_bandwidth_gbps", 819, "cloud tpu v5e"),
    # https://cloud.google.com/tpu/docs/v5p-training : 459 TFLOPs, "95GB, 2765 GBps", 4800 Gbps
    ("tpu-v5p", "bf16", 459, "cloud tpu v5p"),
    ("tpu-v5p", "memory_gb", 95, "cloud tpu v5p"),
    ("tpu-v5p", "memory_bandwidth_gbps", 2765, "cloud tpu v5p"),
    ("tpu-v5p", "interconnect_gb_s", 4800 / 8, "cloud tpu v5p: 4800 Gbps"),
    # https://docs.cloud.google.com/tpu/docs/v6e : 918 TFLOPs, 1836 TOPs, 32 GB, 1638 GBps, 800 GBps
    ("tpu-v6e", "bf16", 918, "cloud tpu v6e"),
    ("tpu-v6e", "int8", 1836, "cloud tpu v6e"),
    ("tpu-v6e", "memory_gb", 32, "cloud tpu v6e"),
    ("tpu-v6e", "memory_bandwidth_gbps", 1638, "cloud tpu v6e"),
    ("tpu-v6e", "interconnect_gb_s", 800, "cloud tpu v6e"),
    # AMD MI325X (dense printed beside sparse; corroborated by awesomeagents.ai/hardware/amd-mi325x)
    ("mi325x", "fp8", 2614.9, "amd mi325x"),
    ("mi325x", "bf16", 1307.4, "amd mi325x"),
    ("mi325x", "memory_gb", 256, "amd mi325x"),
    ("mi325x", "memory_bandwidth_gbps", 6000, "amd mi325x"),
    # NVIDIA H100 NVL: sparse-only page figures halved: tf32 835, bf16 1,671, fp8 3,341
    ("h100-nvl", "tf32", 835 / 2, "nvidia h100 datasheet, NVL column (sparse / 2)"),
    ("h100-nvl", "bf16", 1671 / 2, "nvidia h100 datasheet, NVL column (sparse / 2)"),
    ("h100-nvl", "fp8", 3341 / 2, "nvidia h100 datasheet, NVL column (sparse / 2)"),
    ("h100-nvl", "memory_gb", 94, "nvidia h100 datasheet"),
    # NVIDIA HGX B200, whole 8-GPU system, sparse: FP8 72 PF, BF16 36 PF, TF32 18 PF; 1.44 TB
    ("b200", "fp8", 72_000 / 8 / 2, "nvidia hgx b200 (system / 8 GPUs / 2 for sparsity)"),
    ("b200", "bf16", 36_000 / 8 / 2, "nvidia hgx b200"),
    ("b200", "tf32", 18_000 / 8 / 2, "nvidia hgx b200"),
    ("b200", "memory_gb", 1440 / 8, "nvidia hgx b200"),
]


def _figure(a: Accelerator, field: str) -> float | None:
    if field in ("memory_gb", "memory_bandwidth_gbps", "interconnect_gb_s", "tdp_w"):
        value: float | None = getattr(a, field)
        return value
    return a.peak_tflops.get(field)


@pytest.mark.parametrize(("acc_id", "field", "expected", "where"), DATASHEET)
def test_datasheet_figures(
    shipped: Catalog, acc_id: str, field: str, expected: float, where: str
) -> None:
    got = _figure(shipped.accelerators[acc_id], field)
    assert got == pytest.approx(expected, rel=0.002), where


def test_new_accelerators_are_dense_and_say_what_is_estimated(shipped: Catalog) -> None:
    for acc_id in ("trainium1", "trainium2", "inferentia2", "tpu-v5e", "tpu-v5p", "tpu-v6e"):
        a = shipped.accelerators[acc_id]
        assert "tdp_w" in a.estimated_fields  # no vendor publishes their per-chip power
        assert a.form_factor.value == "datacenter"
    assert shipped.accelerators["tpu-v5e"].generation.value == "tpu"
    assert shipped.accelerators["trainium2"].generation.value == "trainium"
    assert shipped.accelerators["trainium2"].peak_tflops.int8 is None  # unpublished: left out


# --- every datacenter accelerator has an instance type or a reason ---------------------------


def _with_extra(tmp_path: Path, extra: dict[str, Any], instances: list[Any] | None = None) -> Any:
    from tests.factories import mini_catalog_data

    data = mini_catalog_data()
    data["accelerators"].append(extra)
    data["instance_types"].extend(instances or [])
    write_catalog(tmp_path / "c", data)
    return load_catalog(tmp_path / "c", replace=True, today=TODAY, max_age_days=365)


def test_datacenter_accelerator_without_instance_or_reason_is_a_load_error(
    tmp_path: Path,
) -> None:
    with pytest.raises(CatalogError) as err:
        _with_extra(tmp_path, acc("lonely", memory_gb=80, tdp_w=700))
    assert "lonely" in str(err.value) and "no_instance_reason" in str(err.value)


def test_a_reason_lets_it_load_and_a_stale_reason_warns(tmp_path: Path) -> None:
    reasoned = acc("lonely", memory_gb=80, tdp_w=700, no_instance_reason="no sourced price")
    catalog = _with_extra(tmp_path / "a", reasoned)
    assert catalog.accelerators["lonely"].no_instance_reason == "no sourced price"
    priced = inst("lonely1", "lonely", 1, [price("us-east-1", 5.0)])
    catalog = _with_extra(tmp_path / "b", reasoned, [priced])
    assert any("lonely" in w and "stale" in w for w in catalog.warnings)


def test_shipped_datacenter_accelerators_have_an_instance_or_a_reason(shipped: Catalog) -> None:
    used = {it.accelerator for it in shipped.instance_types.values()}
    for a in shipped.accelerators.values():
        if a.form_factor.value == "datacenter":
            assert a.id in used or a.no_instance_reason, a.id


# --- Trainium is recommendable ----------------------------------------------------------------


def test_trainium_instance_is_recommended_for_a_fitting_workload(shipped: Catalog) -> None:
    result = recommend(
        shipped, Workload(workload="fine_tuning", model="llama-3-8b", region="us-east-1", limit=20)
    )
    chosen = {r.instance_type: r for r in result.recommendations}
    assert "trn1.32xlarge" in chosen
    trn = chosen["trn1.32xlarge"]
    assert trn.accelerator == "trainium1" and trn.gpu_count == 16
    assert trn.hourly_usd == pytest.approx(21.50)


# --- the probe says it cannot measure TPUs / Trainium / Inferentia ----------------------------


@pytest.mark.parametrize(
    ("expect", "words"),
    [
        ("tpu-v6e", "Google Cloud TPU"),
        ("trn1.32xlarge", "Trainium"),
        ("inferentia2", "Neuron"),
    ],
)
def test_probe_refuses_what_it_cannot_measure(
    monkeypatch: pytest.MonkeyPatch, expect: str, words: str
) -> None:
    def must_not_run(*a: Any, **kw: Any) -> None:
        raise AssertionError("the probe measured hardware it cannot measure")

    monkeypatch.setattr(probes.probe, "run_probe", must_not_run)
    result = CliRunner().invoke(app, ["probe", "--expect", expect], env={"COLUMNS": "200"})
    assert result.exit_code == 3, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"cannot measure {expect}" in result.output and words in result.output


# --- edge: purchase price, cost per year, host memory -----------------------------------------


def test_edge_cost_per_year_by_hand(shipped: Catalog) -> None:
    nx = shipped.accelerators["jetson-orin-nx-16gb"]
    assert nx.purchase is not None and nx.purchase.list_price_usd == 599
    cost = edge_cost_per_year(nx, 40)
    # 599 / 5 years = 119.80; 40 W x 8,760 h = 350.4 kWh x $0.13 = 45.552
    assert cost.purchase_usd_per_year == pytest.approx(119.80)
    assert cost.energy_usd_per_year == pytest.approx(45.552)
    assert cost.total_usd_per_year == pytest.approx(165.352)


def _edge_catalog(tmp_path: Path) -> Catalog:
    from tests.factories import mini_catalog_data

    data = mini_catalog_data()
    for a in data["accelerators"]:
        if a["id"] == "edge-a":  # 15 W mode; bought for $2,000
            a["purchase"] = purchase(2000)
        if a["id"] == "edge-b":  # 7 W mode; bought for $100
            a["purchase"] = purchase(100)
    write_catalog(tmp_path / "e", data)
    return load_catalog(tmp_path / "e", replace=True, today=TODAY, max_age_days=365)


def purchase(usd: float) -> dict[str, Any]:
    return {"list_price_usd": usd, "item": "module", "as_of": "2026-11-30", "source": "test"}


def test_edge_cheapest_ranks_by_cost_per_year(tmp_path: Path) -> None:
    catalog = _edge_catalog(tmp_path)
    result = recommend(catalog, Workload(workload="edge_inference", objective="cheapest"))
    top = result.recommendations[0]
    # edge-b 7W: 100/5 + 7 W x 8.76 kh x 0.13 = 20 + 7.9716 = 27.97 per year
    # edge-a 15W (least power of edge-a): 2000/5 + 15 x 8.76 x 0.13 = 400 + 17.08 = 417.08
    assert (top.device, top.power_mode) == ("edge-b", "7W")
    assert any("$27.97 per year" in r for r in top.reasons)
    assert top.cost_per_year_usd == pytest.approx(27.97, abs=0.01)
    by_power = [r.power_mode for r in result.recommendations if r.device == "edge-a"]
    assert by_power[0] == "15W"  # still the cheapest way to run edge-a


def test_edge_without_price_is_costed_on_energy_and_says_so(tmp_path: Path) -> None:
    from tests.factories import load_mini

    catalog = load_mini(tmp_path)
    device = catalog.accelerators["edge-b"]
    cost = edge_cost_per_year(device, 25)
    assert cost.purchase_usd_per_year is None
    assert cost.total_usd_per_year == pytest.approx(25 / 1000 * 8760 * 0.13)
    assert "understates" in cost.sentence(25)


def test_host_memory_is_null_and_shown_as_host_memory(shipped: Catalog) -> None:
    hailo = shipped.accelerators["hailo-8"]
    assert hailo.memory_gb is None and hailo.memory_text == "host memory"
    result = recommend(shipped, Workload(workload="edge_inference", objective="cheapest", limit=20))
    hailo_hit = next(r for r in result.recommendations if r.device == "hailo-8")
    assert any("host memory" in r for r in hailo_hit.reasons)
    assert not any("0 GB" in r for r in hailo_hit.reasons)
    table = CliRunner().invoke(app, ["catalog", "accelerators"], env={"COLUMNS": "200"})
    row = next(line for line in table.output.splitlines() if "hailo-8 " in line)
    assert "host memory" in row


def test_only_edge_devices_may_leave_memory_null() -> None:
    base = acc("x", memory_gb=None, tdp_w=10)
    with pytest.raises(ValueError, match="only on an edge device"):
        Accelerator.model_validate(base)
    Accelerator.model_validate({**base, "form_factor": "edge"})


# --- node facts -------------------------------------------------------------------------------


def test_node_facts_are_merged_into_instance_types(shipped: Catalog) -> None:
    nd = shipped.instance_types["Standard_ND96isr_H100_v5"].expected_nccl_busbw
    # Azure/azurehpc-health-checks conf/nd96isr_h100_v5.conf: "check_nccl_allreduce 460.0 ..."
    assert nd is not None and nd.busbw_gb_s == 460 and nd.gpus == 8
    assert "azurehpc-health-checks" in nd.source


def _facts(tmp_path: Path, facts: list[dict[str, Any]], **busbw: Any) -> Catalog:
    from tests.factories import mini_catalog_data

    data = mini_catalog_data()
    if busbw:
        data["instance_types"][0]["expected_nccl_busbw"] = busbw
    write_catalog(tmp_path / "f", data)
    write_catalog(tmp_path / "f", {"node_facts": facts}, name="node_facts.yaml")
    return load_catalog(tmp_path / "f", replace=True, today=TODAY, max_age_days=365)


BUSBW = {"busbw_gb_s": 400, "gpus": 8, "message_size": "16G", "source": "test"}


def test_user_node_fact_merges_and_unknown_id_warns(tmp_path: Path) -> None:
    catalog = _facts(tmp_path, [{"id": "big8", "expected_nccl_busbw": BUSBW}])
    fact = catalog.instance_types["big8"].expected_nccl_busbw
    assert fact is not None and fact.busbw_gb_s == 400
    catalog = _facts(tmp_path / "u", [{"id": "big9", "expected_nccl_busbw": BUSBW}])
    assert any("big9" in w and "big8" in w for w in catalog.warnings)  # did you mean


def test_node_fact_set_in_two_places_is_an_error(tmp_path: Path) -> None:
    other = {**BUSBW, "busbw_gb_s": 300}
    with pytest.raises(CatalogError, match="also set in"):
        _facts(tmp_path, [{"id": "big8", "expected_nccl_busbw": BUSBW}], **other)


def test_host_memory_device_cannot_promise_a_stated_memory_need(shipped: Catalog) -> None:
    result = recommend(shipped, Workload(workload="edge_inference", memory_gb=1, limit=50))
    assert "hailo-8" not in {r.device for r in result.recommendations}
    hailo = next(r for r in result.rejected if r.id == "hailo-8")
    assert "MEMORY_INSUFFICIENT" in hailo.codes
    assert any("host memory" in s for s in hailo.reasons)


def test_shipped_tpu_and_trainium_instances_are_recommendable(shipped: Catalog) -> None:
    # The engine, precision and performance paths take the tpu and trainium generations: the
    # imported TPU slices and trn1/inf2 types (catalog/README.md, snapshots) compete for a model
    # they hold (Llama 3 8B in bf16: 16 GB of weights).
    request = Workload(
        workload="high_throughput_inference", model="llama-3-8b", purchase=None, limit=1000
    )
    result = recommend(shipped, request)
    ids = {r.instance_type for r in result.recommendations}
    assert {"tpu-v6e-8", "tpu-v5litepod-8", "tpu-v5p-8", "trn1.32xlarge", "inf2.48xlarge"} <= ids
    assert not any("stale" in w and ("tpu" in w or "trainium" in w) for w in shipped.warnings)


@pytest.mark.parametrize("accel", ["gb200", "gb300", "b300", "mi300x", "mi325x", "mi355x"])
def test_catalog_gpus_answers_the_2026_hardware_with_a_price(accel: str) -> None:
    # `advisor catalog gpus ACCEL --json`: at least one instance shape of the accelerator with an
    # on-demand $/h (every one of these had none, or no instance type, before it was priced).
    result = CliRunner().invoke(app, ["catalog", "gpus", accel, "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    priced = [r for r in rows if r["accelerator"] == accel and r["on_demand"]]
    assert priced and all(r["on_demand"]["hourly_usd"] > 0 for r in priced), rows
