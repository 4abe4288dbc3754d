"""Prices that are whole and current: a component row (a GCP VM row priced 0 beside its GPU
rows) never becomes an offering, the regional sanity rule holds on every shipped on-demand
price, the OCI layout imports, and a shipped price older than ADVISOR_MAX_PRICE_AGE_DAYS fails.

Expected figures are read by hand from the snapshot CSVs under catalog/snapshots/."""

from __future__ import annotations

import datetime as dt
import os
from statistics import median

import pytest
import yaml

from advisor.catalog import load_catalog, shipped_catalog_dir
from advisor.catalog.importers import skypilot
from advisor.catalog.models import Purchase
from advisor.catalog.settings import DEFAULT_MAX_PRICE_AGE_DAYS

SNAPSHOTS = shipped_catalog_dir() / "snapshots"
GCP_SNAPSHOT = (
    SNAPSHOTS / "skypilot-006059e0f18acb1341e22a27751e9f80df6ba92f/catalogs/v8/gcp/vms.csv"
)
OCI_SNAPSHOT = (
    SNAPSHOTS / "skypilot-0588751183820cf2dab5c8a89447e8aac9f73fd5/catalogs/v8/oci/vms.csv"
)
SANITY = yaml.safe_load((shipped_catalog_dir() / "price_sanity.yaml").read_text())["price_sanity"][
    0
]


def _gcp_found(*ids: str) -> dict[str, skypilot.SourceType]:
    rows = skypilot.parse_csv(GCP_SNAPSHOT.read_text(), str(GCP_SNAPSHOT), "gcp")
    return skypilot.source_types("gcp", rows, set(ids))


def test_a_gpu_row_without_its_vm_row_is_not_a_price() -> None:
    # The snapshot's a4-highgpu-8g VM rows are 0.0 in every zone (lines 116-126); the B200 x8
    # rows alone ($64.44 / $90.216) are what the GPUs cost, not the machine.
    found = _gcp_found("a4-highgpu-8g")["a4-highgpu-8g"]
    assert found.quotes == []
    assert found.incomplete is not None and "VM row a4-highgpu-8g priced 0" in found.incomplete


def test_a_machine_with_both_components_is_still_priced() -> None:
    # a3-highgpu-8g asia-east1-c: VM row 10.95381 + GPU row H100 x8 90.74744 = 101.70125
    quotes = _gcp_found("a3-highgpu-8g")["a3-highgpu-8g"].quotes
    [asia] = [q for q in quotes if q.region == "asia-east1" and q.purchase is Purchase.on_demand]
    assert asia.hourly_usd == pytest.approx(101.70125)


def test_the_import_keeps_an_incomplete_type_unpriced_and_says_so() -> None:
    existing = [
        e
        for e in yaml.safe_load((shipped_catalog_dir() / "instances" / "gcp.yaml").read_text())[
            "instance_types"
        ]
        if e["id"] == "a4-highgpu-8g"
    ]
    entries, summary = skypilot.merge(
        "gcp",
        existing,
        _gcp_found("a4-highgpu-8g"),
        known_accelerators={"b200"},
        as_of=dt.date(2026, 12, 1),
        source="snapshot",
    )
    assert [e["prices"] for e in entries] == [[]]
    assert list(summary.incomplete) == ["a4-highgpu-8g"]
    assert "incomplete" in summary.as_dict()


def test_oci_layout_imports_one_price_per_region() -> None:
    rows = skypilot.parse_csv(OCI_SNAPSHOT.read_text(), str(OCI_SNAPSHOT), "oci")
    wanted = skypilot.wanted_ids("oci", rows, [], skypilot.names.FAMILIES["oci"])
    found = skypilot.source_types("oci", rows, wanted)
    gb200 = found["BM.GPU.GB200.4"]
    assert (gb200.accelerator, gb200.gpu_count, gb200.vcpus) == ("GB200", 4, 144)
    # us-chicago-1 has two ADs at $64 each: one on-demand quote of $64, no spot (empty column)
    chicago = [q for q in gb200.quotes if q.region == "us-chicago-1"]
    assert [(q.purchase, q.hourly_usd) for q in chicago] == [(Purchase.on_demand, 64.0)]
    assert skypilot.accelerator_id("oci", "BM.GPU.MI355X.8", "MI355X") == "mi355x"


def test_every_shipped_on_demand_price_meets_the_regional_rule_or_is_flagged() -> None:
    catalog = load_catalog()
    low = SANITY["region_low_ratio"]["value"]
    high = SANITY["region_high_ratio"]["value"]
    checked = 0
    for it in catalog.instance_types.values():
        on_demand = [p for p in it.prices if p.purchase is Purchase.on_demand]
        for price in on_demand:
            others = [p.hourly_usd for p in on_demand if p.region != price.region]
            if not others:
                continue
            ratio = price.hourly_usd / median(others)
            checked += 1
            if not low <= ratio <= high:
                assert price.flag is not None, (it.id, price.region, round(ratio, 3))
    assert checked > 1000  # the rule really ran over the shipped snapshot


def test_no_shipped_gcp_price_is_built_from_a_zero_vm_row() -> None:
    rows = skypilot.parse_csv(GCP_SNAPSHOT.read_text(), str(GCP_SNAPSHOT), "gcp")
    zero_vm = {r.instance_type for r in rows if r.instance_type and r.price == 0.0}
    catalog = load_catalog()
    priced_from_zero = [
        it.id for it in catalog.instance_types.values() if it.id in zero_vm and it.prices
    ]
    assert "a4-highgpu-8g" in zero_vm
    assert priced_from_zero == []


def _price_ages(today: dt.date) -> dict[str, int]:
    ages: dict[str, int] = {}
    for it in load_catalog().instance_types.values():
        for p in it.prices:
            ages[f"{it.id} {p.region} {p.purchase}"] = p.age_days(today)
    return ages


def test_no_shipped_price_is_older_than_the_max_age() -> None:
    """Fails once the shipped snapshot is older than ADVISOR_MAX_PRICE_AGE_DAYS (default 365):
    the signal to refresh the prices (catalog/README.md)."""
    limit = int(os.environ.get("ADVISOR_MAX_PRICE_AGE_DAYS", DEFAULT_MAX_PRICE_AGE_DAYS))
    stale = {k: v for k, v in _price_ages(dt.date.today()).items() if v > limit}
    assert not stale, f"{len(stale)} prices older than {limit} days, e.g. {next(iter(stale))}"


def test_the_age_check_would_catch_an_old_price() -> None:
    # The same measure a year and a day after the oldest shipped as_of finds it stale.
    oldest = min(p.as_of for it in load_catalog().instance_types.values() for p in it.prices)
    ages = _price_ages(oldest + dt.timedelta(days=DEFAULT_MAX_PRICE_AGE_DAYS + 1))
    assert max(ages.values()) == DEFAULT_MAX_PRICE_AGE_DAYS + 1


def test_each_price_carries_its_own_date_and_source() -> None:
    for it in load_catalog().instance_types.values():
        for p in it.prices:
            assert p.as_of <= dt.date.today() and p.source, (it.id, p.region)


def test_the_snapshots_the_tests_read_are_shipped() -> None:
    assert GCP_SNAPSHOT.is_file() and OCI_SNAPSHOT.is_file()
