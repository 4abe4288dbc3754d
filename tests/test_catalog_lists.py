"""`catalog models|workloads|regions` list what --model, --workload and --region take; catalog
CSV is numbers, one fact per column; an unknown accelerator start gets a did-you-mean."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import yaml

from advisor import load_catalog
from tests.test_cli_tables import _json as as_json
from tests.test_cli_tables import run

CATALOG = Path(__file__).resolve().parent.parent / "catalog"


def _rows(*args: str) -> list[dict[str, str]]:
    p = run(*args, "--format", "csv")
    assert p.returncode == 0, p.stderr
    return list(csv.DictReader(io.StringIO(p.stdout)))


def test_models_lists_every_preset_of_both_yamls() -> None:
    presets = [
        model
        for name in ("models.yaml", "models-from-configs.yaml")
        for model in yaml.safe_load((CATALOG / name).read_text())["models"]
    ]
    rows = _rows("catalog", "models")
    assert {r["id"] for r in rows} == {m["id"] for m in presets}
    by_id = {r["id"]: r for r in rows}
    # a number straight from the YAML, as a plain number
    assert by_id["llama-2-7b"]["params_b"] == "6.74"
    assert by_id["llama-2-7b"]["layers"] == "32"
    listed = as_json("catalog", "models")
    assert [m["id"] for m in listed] == [r["id"] for r in rows]


def test_workloads_lists_the_six_workloads() -> None:
    rows = _rows("catalog", "workloads")
    assert [r["id"] for r in rows] == [
        "batch_processing",
        "edge_inference",
        "fine_tuning",
        "high_throughput_inference",
        "large_scale_training",
        "low_latency_inference",
    ]
    by_id = {r["id"]: r for r in rows}
    assert by_id["large_scale_training"]["default_gpus"] == "8"
    assert by_id["large_scale_training"]["multi_node"] == "true"


def test_regions_count_offerings_per_region_walked_from_the_yaml() -> None:
    """Per (provider, region) the priced offerings, counted here from the instance files."""
    counted: dict[tuple[str, str], int] = {}
    for path in sorted((CATALOG / "instances").glob("*.yaml")):
        for it in yaml.safe_load(path.read_text()).get("instance_types") or []:
            for price in it.get("prices") or []:
                key = (it["provider"], price["region"])
                counted[key] = counted.get(key, 0) + 1
    rows = _rows("catalog", "regions")
    assert {(r["provider"], r["region"]): int(r["offerings"]) for r in rows} == counted
    azure = _rows("catalog", "regions", "--provider", "azure")
    assert azure and all(r["provider"] == "azure" for r in azure)
    bad = run("catalog", "regions", "--provider", "azur")
    assert bad.returncode == 2 and "did you mean 'azure'" in bad.stderr


def test_gpu_csv_is_plain_numbers_one_fact_a_column() -> None:
    rows = _rows("catalog", "gpus", "h100")
    assert rows
    for r in rows:
        for key in ("on_demand_hourly_usd", "spot_hourly_usd"):
            if r[key]:
                assert "$" not in r[key] and "," not in r[key]
                float(r[key])
                assert len(r[key].partition(".")[2]) <= 6, r[key]
        int(r["gpu_count"]), int(r["region_count"])
    # the cheapest sound on-demand p5.48xlarge-class shape, by hand from the catalog's prices
    catalog = load_catalog()
    least = min(
        p.hourly_usd
        for it in catalog.instance_types.values()
        if it.accelerator == "h100-sxm" and it.provider == "aws" and it.gpu_count == 8
        for p in it.prices
        if p.purchase.value == "on_demand" and p.flag is None
    )
    row = next(
        r
        for r in rows
        if (r["accelerator"], r["provider"], r["gpu_count"]) == ("h100-sxm", "aws", "8")
    )
    assert float(row["on_demand_hourly_usd"]) == round(least, 6)


def test_instance_and_accelerator_csv_cells_are_facts() -> None:
    rows = _rows("catalog", "instances")
    for r in rows:
        assert r["from_flagged"] in ("true", "false", "")
        assert int(r["flagged_price_count"]) <= int(r["price_count"])
        if r["from_hourly_usd"]:
            assert not r["from_hourly_usd"].startswith("$")
    accel = {r["id"]: r for r in _rows("catalog", "accelerators")}
    assert accel["b200"]["memory_gb"] == "180" and accel["a10"]["fp8_tflops"] == ""


def test_misspelt_accelerator_start_gets_its_family() -> None:
    p = run("catalog", "gpus", "h1OO")
    assert p.returncode == 2
    assert "did you mean one of 'h100-nvl'" in p.stderr, p.stderr
