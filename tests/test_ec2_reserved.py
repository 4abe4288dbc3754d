"""Commitment prices: `advisor catalog import ec2-reserved`, the shipped reserved, savings-plan,
committed-use and Capacity Block rows, and where they show (the GPU grid, `catalog show`, the
explanations of rejections, the documented counts).

tests/data/ec2instances/instances.json holds two records of instances.vantage.sh's instances.json
as the tsaol/aws-gpu repository kept it (data/gpu_instances_raw.json @2d0108c, 2025-11-30), cut to
two and one regions, every other key as written. The shipped capture is
catalog/snapshots/aws-gpu-7412fd2.../data/all_gpu_instances.js. Expected rates are read off those
files by eye and written here.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor.catalog import load_catalog, shipped_catalog_dir
from advisor.catalog.importers import ec2_reserved
from advisor.catalog.models import Purchase
from advisor.catalog.purchase import choose
from advisor.engine import recommend
from advisor.errors import InputError
from advisor.request import Workload
from tests.factories import TODAY
from tests.test_skypilot_import import _cli  # the CLI in this process, global state put back

FULL = Path(__file__).parent / "data" / "ec2instances" / "instances.json"
SNAPSHOT = next((shipped_catalog_dir() / "snapshots").glob("aws-gpu-*/data/all_gpu_instances.js"))
AS_OF = dt.date(2026, 1, 21)
R1, R3 = Purchase.reserved_1y, Purchase.reserved_3y


def test_instances_json_gives_both_no_upfront_terms_of_linux_shared_tenancy() -> None:
    rates = ec2_reserved.parse(FULL.read_text(), str(FULL))
    # linux yrTerm1Standard.noUpfront / yrTerm3Standard.noUpfront; not the dedicated-tenancy
    # 15.313, not the all-upfront 12.993037, not the convertible 16.705312
    assert rates["p4d.24xlarge"] == {
        "us-east-1": {R1: 13.921094, R3: 9.374219},
        "eu-central-1": {R1: 17.392445, R3: 11.711766},
    }
    assert rates["p5.48xlarge"] == {"us-east-1": {R3: 23.77728}}  # AWS lists no 1-year term


def test_the_capture_gives_its_one_year_rate_per_region() -> None:
    rates = ec2_reserved.parse(SNAPSHOT.read_text(), str(SNAPSHOT))
    p4d = rates["p4d.24xlarge"]
    assert len(p4d) == 13 and p4d["us-east-1"] == {R1: 13.921094}
    assert p4d["eu-central-1"] == {R1: 17.392445}  # the instances.json figure of the same rate
    assert "p5.48xlarge" not in rates and "p6-b200.48xlarge" not in rates


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{}", "no JSON array"),
        ("var x; [1]", "expected a JSON array"),
        ('[{"name": "g5.xlarge", "pricing": {"us-east-1": {"reserved": "n/a"}}}]', "'n/a'"),
        ('[{"name": "g5.xlarge", "pricing": {"us-east-1": {"reserved": 0}}}]', "not a positive"),
        ('[{"id": "g5.xlarge"}]', "record 0: neither"),
        ('[{"name": "g5.xlarge", "pricing": []}]', "`pricing` is not an object"),
        ("[1,]", "not JSON at line 1"),
    ],
)
def test_a_bad_file_names_the_record(text: str, expected: str) -> None:
    with pytest.raises(InputError, match="f.json") as err:
        ec2_reserved.parse(text, "f.json")
    assert expected in str(err.value)


def _entry(type_id: str, *prices: tuple[str, str, float]) -> dict[str, Any]:
    return {
        "id": type_id,
        "provider": "aws",
        "prices": [
            {"region": r, "purchase": p, "hourly_usd": h, "as_of": "2026-12-01", "source": "s"}
            for r, p, h in prices
        ],
    }


def test_merge_replaces_reserved_rows_and_keeps_everything_else() -> None:
    existing = [
        _entry(
            "p4d.24xlarge",
            ("us-east-1", "on_demand", 21.96),
            ("us-east-1", "spot", 8.6),
            ("us-east-1", "capacity_block", 14.75),
            ("us-east-1", "reserved_1y", 15.0),  # an older rate: replaced
            ("us-west-2", "on_demand", 21.96),
            ("us-west-2", "reserved_3y", 9.0),  # a term the source does not give: kept
            ("eu-west-1", "on_demand", 23.0),
            ("eu-west-1", "reserved_1y", 15.5),  # no longer listed: removed and said
        ),
        _entry("m7i.xlarge", ("us-east-1", "on_demand", 0.2)),
        {**_entry("n1", ("us-central1", "on_demand", 1.0)), "provider": "gcp"},
    ]
    rates = {
        "p4d.24xlarge": {
            "us-east-1": {R1: 13.921094},
            "us-west-2": {R1: 13.9},
            "il-central-1": {R1: 20.0},
        },
        "p6-b200.48xlarge": {"us-east-1": {R1: 60.0}},
    }
    entries, summary = ec2_reserved.merge(existing, rates, as_of=AS_OF, source="src")
    p4d = entries[0]
    assert [(p["region"], p["purchase"], p["hourly_usd"]) for p in p4d["prices"]] == [
        ("us-east-1", "on_demand", 21.96),
        ("us-east-1", "spot", 8.6),
        ("us-east-1", "capacity_block", 14.75),
        ("us-west-2", "on_demand", 21.96),
        ("us-west-2", "reserved_3y", 9.0),
        ("eu-west-1", "on_demand", 23.0),
        ("us-east-1", "reserved_1y", 13.921094),
        ("us-west-2", "reserved_1y", 13.9),
    ]
    new = p4d["prices"][-1]
    assert new["as_of"] == "2026-01-21" and new["source"].startswith("src: Linux 1-year Standard")
    assert entries[1:] == existing[1:]  # a type the source does not list, another provider
    assert summary.as_dict() == {
        "source": "src",
        "updated": {"p4d.24xlarge": 2},
        "prices": 2,
        "removed": {"p4d.24xlarge": ["eu-west-1 reserved_1y"]},
        "regions_without_other_prices": {"p4d.24xlarge": ["il-central-1"]},
        "without_reserved_prices": ["m7i.xlarge"],
        "not_in_catalog": ["p6-b200.48xlarge"],
    }


def _shipped_aws(*ids: str) -> list[dict[str, Any]]:
    data = yaml.safe_load((shipped_catalog_dir() / "instances" / "aws.yaml").read_text())
    return [e for e in data["instance_types"] if e["id"] in ids]


def test_the_command_writes_a_file_the_loader_accepts_keeping_its_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    [p4d] = _shipped_aws("p4d.24xlarge")
    p4d["prices"] = [p for p in p4d["prices"] if not p["purchase"].startswith("reserved")]
    for p in p4d["prices"]:
        p.pop("flag", None)
    path = tmp_path / "aws.yaml"
    path.write_text("# written by hand\n" + yaml.safe_dump({"instance_types": [p4d]}))
    args = ["catalog", "import", "ec2-reserved", str(FULL), "--out", str(tmp_path), "--json"]
    code, out, err = _cli(capsys, *args, "--as-of", "2025-11-30")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["written"] and summary["updated"] == {"p4d.24xlarge": 4}
    assert summary["not_in_catalog"] == ["p5.48xlarge"]
    assert path.read_text().startswith("# written by hand\ninstance_types:\n")
    catalog = load_catalog(tmp_path, today=TODAY)
    prices = catalog.instance_types["p4d.24xlarge"].prices
    assert {(p.region, p.purchase, p.hourly_usd) for p in prices if p.purchase in (R1, R3)} == {
        ("us-east-1", R1, 13.921094),
        ("us-east-1", R3, 9.374219),
        ("eu-central-1", R1, 17.392445),
        ("eu-central-1", R3, 11.711766),
    }


def test_the_command_refuses_without_out_and_writes_nothing_on_a_bad_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, "catalog", "import", "ec2-reserved", str(FULL))
    assert code == 2 and "--out DIR" in err
    path = tmp_path / "aws.yaml"
    path.write_text(yaml.safe_dump({"instance_types": _shipped_aws("g5.xlarge")}))
    before = path.read_bytes()
    bad = tmp_path / "bad.json"
    bad.write_text('[{"name": "g5.xlarge", "pricing": {"us-east-1": {"reserved": "x"}}}]')
    code, _, err = _cli(
        capsys, "catalog", "import", "ec2-reserved", str(bad), "--out", str(tmp_path)
    )
    assert code == 2 and "record 0 us-east-1 reserved: 'x' is not a number" in err
    assert path.read_bytes() == before


def test_an_import_of_what_is_shipped_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shipped = shipped_catalog_dir() / "instances" / "aws.yaml"
    (tmp_path / "aws.yaml").write_bytes(shipped.read_bytes())
    label = next(
        p["source"].rsplit(": Linux", 1)[0]
        for e in _shipped_aws("p4d.24xlarge")
        for p in e["prices"]
        if p["purchase"] == "reserved_1y"
    )
    args = ["catalog", "import", "ec2-reserved", str(SNAPSHOT), "--out", str(tmp_path)]
    code, _, err = _cli(capsys, *args, "--as-of", "2026-01-21", "--source-label", label)
    assert code == 0, err
    assert (tmp_path / "aws.yaml").read_bytes() == shipped.read_bytes()


# --- the shipped prices ------------------------------------------------------------------------


def test_the_shipped_reserved_prices_come_from_the_capture_and_undercut_on_demand() -> None:
    catalog = load_catalog()
    p4d = catalog.instance_types["p4d.24xlarge"]
    [r1] = [p for p in p4d.prices if p.region == "us-east-1" and p.purchase is R1]
    assert (r1.hourly_usd, r1.as_of) == (13.921094, AS_OF)
    terms = [
        (it, p)
        for it in catalog.instance_types.values()
        for p in it.prices
        if p.purchase in (R1, R3)
    ]
    assert sum(p.as_of == AS_OF for _, p in terms) == 508  # the capture's, all 1-year
    for it, p in terms:  # a commitment never costs more an hour than paying as you go
        [od] = [q for q in it.prices if q.region == p.region and q.purchase is Purchase.on_demand]
        assert p.flag is None and (od.flag is not None or p.hourly_usd < od.hourly_usd), it.id
    # the capture has no 1-year Standard RI for the P5 and P6 families: their terms come from
    # the Savings Plans rates of the term-price source (test_terms_from_the_dated_term_price_list)
    for type_id in ("p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge"):
        [p1] = [p for p in catalog.instance_types[type_id].prices if p.purchase is R1]
        assert p1.as_of == dt.date(2026, 9, 25) and "Savings Plan" in p1.source


def test_a_year_on_a_shipped_p4d_is_cheapest_reserved() -> None:
    prices = [
        p for p in load_catalog().instance_types["p4d.24xlarge"].prices if p.region == "us-east-1"
    ]
    choice = choose(8760, 1, prices)
    assert choice is not None and choice.chosen.price.purchase is R1
    assert choice.chosen.cost_usd == pytest.approx(8760 * 13.921094)  # 121,948.78
    short = choose(
        83 * 24, 1, prices
    )  # 83 days: the year's term costs more than paying by the hour
    assert short is not None and short.chosen.price.purchase is Purchase.on_demand


def test_purchase_reserved_ranks_shipped_reserved_offerings() -> None:
    result = recommend(load_catalog(), Workload(workload="fine_tuning", purchase="reserved"))
    assert result.recommendations
    assert {r.purchase for r in result.recommendations} == {"reserved_1y"}
    assert {r.provider for r in result.recommendations} == {"aws"}


def test_the_gpu_grid_shows_the_cheapest_reserved_rate_where_a_shape_has_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = _cli(capsys, "catalog", "gpus", "a100-40gb-sxm", "--json")
    assert code == 0, err
    rows = {(r["provider"], r["gpu_count"]): r for r in json.loads(out)}
    # p4d.24xlarge's 1-year rate: $13.921092 in us-east-2, $13.921094 in us-east-1
    assert rows["aws", 8]["reserved_1y"] == {
        "instance_type": "p4d.24xlarge",
        "region": "us-east-2",
        "hourly_usd": 13.921092,
    }
    assert rows["aws", 8]["reserved_3y"] is None and rows["gcp", 8]["reserved_1y"] is None
    monkeypatch.setenv("COLUMNS", "160")
    _, table, _ = _cli(capsys, "catalog", "gpus", "a100-40gb-sxm")
    [p4d] = [line for line in table.splitlines() if " aws " in line]
    assert "$21.96" in p4d and "$13.92" in p4d and "1-yr $/h" in table
    _, table, _ = _cli(capsys, "catalog", "gpus", "mi300x")  # no term on any MI300X: no column
    assert "1-yr" not in table and "$/h" in table
    _, csv_text, _ = _cli(capsys, "catalog", "gpus", "a100-40gb-sxm", "--format", "csv")
    header, *lines = csv_text.splitlines()
    [aws] = [
        dict(zip(header.split(","), line.split(","), strict=True))
        for line in lines
        if ",aws," in line
    ]
    assert (aws["reserved_1y_hourly_usd"], aws["reserved_1y_region"]) == ("13.921092", "us-east-2")


def test_catalog_show_lists_each_regions_ways_to_buy_together(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    code, out, err = _cli(capsys, "catalog", "show", "p4d.24xlarge")
    assert code == 0, err
    rows = re.findall(r"([a-z]+-[a-z]+-\d) +(\w+) +(\$[\d.]+) +as of (\S+)", out)
    regions = [region for region, *_ in rows]
    assert regions == sorted(regions)  # each region's rows together, regions in order
    east = [
        (purchase, usd, as_of) for region, purchase, usd, as_of in rows if region == "us-east-1"
    ]
    assert east == [
        ("on_demand", "$21.96", "2026-12-01"),
        ("spot", "$8.00", "2026-12-01"),
        ("reserved_1y", "$13.92", "2026-01-21"),
    ]


def test_a_rejection_is_explained_by_an_offering_the_request_allows() -> None:
    """Any purchase option (on demand or spot), us-east-1, $0.30/h: an option is explained by
    its price in us-east-1 when it has one there (g6.xlarge: spot, over the budget), never by
    another region's cheaper price ("not offered in us-east-1") nor by a reserved price, which
    the request does not buy."""
    catalog = load_catalog()
    w = Workload(
        workload="fine_tuning",
        memory_gb=16,
        purchase="any",
        max_hourly_usd=0.3,
        region="us-east-1",
        show_rejected=True,
    )
    result = recommend(catalog, w)
    rejected = {r.id: r for r in result.rejected}
    [g6_spot] = [
        p
        for p in catalog.instance_types["g6.xlarge"].prices
        if p.region == "us-east-1" and p.purchase is Purchase.spot
    ]
    assert rejected["g6.xlarge"].reasons == (
        f"costs ${g6_spot.hourly_usd:,.2f}/h in us-east-1 (spot), above the $0.30/h budget",
    )
    for r in result.rejected:
        assert not any("reserved" in s for s in r.reasons), r
        it = catalog.instance_types.get(r.id)
        if it is not None and "REGION_NOT_OFFERED" in r.codes:
            assert not [
                p
                for p in it.prices
                if p.region == "us-east-1" and p.purchase.value in ("on_demand", "spot")
            ], r


def test_a_purchase_mismatch_names_the_price_it_saw_and_the_option_asked() -> None:
    catalog = load_catalog()
    for purchase, asked in (("on_demand", "on_demand"), ("any", "on demand or spot")):
        w = Workload(
            workload="fine_tuning",
            memory_gb=80,
            max_hourly_usd=1,
            purchase=purchase,
            show_rejected=True,
        )
        for r in recommend(catalog, w).rejected:
            if "PURCHASE_UNAVAILABLE" in r.codes:
                assert re.fullmatch(rf"a \w+ price, not {asked}", r.reasons[0]), r
    w = Workload(workload="fine_tuning", memory_gb=80, max_hourly_usd=1, show_rejected=True)
    [p5e] = [r for r in recommend(catalog, w).rejected if r.id == "p5e.48xlarge"]
    assert p5e.reasons[0] == "a spot price, not on_demand"  # p5e has no on-demand price
    assert not [
        p for p in catalog.instance_types["p5e.48xlarge"].prices if p.purchase is Purchase.on_demand
    ]


def test_a_missing_source_is_named_without_a_skypilot_word(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = str(tmp_path / "instances.json")
    code, _, err = _cli(capsys, "catalog", "import", "ec2-reserved", missing, "--dry-run")
    assert code == 2 and f"{missing!r} is not a file (give a file's path or an http(s) URL)" in err


def test_the_documented_catalog_counts_are_the_shipped_ones() -> None:
    """docs/catalog-and-prices.md states the shipped catalog's size; a refresh that changes it
    fails here until the page says so."""
    catalog = load_catalog()
    page = (Path(__file__).parents[1] / "docs" / "catalog-and-prices.md").read_text()
    text = " ".join(page.split())
    prices = [p for it in catalog.instance_types.values() for p in it.prices]
    by = {t: sum(p.purchase is t for p in prices) for t in Purchase}
    stated = (
        f"{len(catalog.accelerators)} accelerators and {len(catalog.instance_types)} instance "
        f"types with {len(prices):,} priced offerings ({by[Purchase.on_demand]:,} on demand, "
        f"{by[Purchase.spot]:,} spot, {by[R1]} one-year reserved, {by[R3]} three-year reserved, "
        f"{by[Purchase.capacity_block]} capacity blocks;"
    )
    assert stated in text


def test_merge_keeps_a_term_the_source_does_not_give() -> None:
    """A 1-year capture replaces 1-year rows only: a 3-year rate written beside it (from another
    source) stays, and a region priced by a term alone gets no rate (it is no offering)."""
    existing = [
        _entry(
            "p4de.24xlarge",
            ("us-east-1", "on_demand", 27.45),
            ("us-east-1", "reserved_1y", 18.0),
            ("us-east-1", "reserved_3y", 11.71777),
            ("us-west-2", "reserved_3y", 12.0),
        )
    ]
    rates = {"p4de.24xlarge": {"us-east-1": {R1: 17.401365}, "us-west-2": {R1: 17.5}}}
    entries, summary = ec2_reserved.merge(existing, rates, as_of=AS_OF, source="src")
    got = [(p["region"], p["purchase"], p["hourly_usd"]) for p in entries[0]["prices"]]
    assert got == [
        ("us-east-1", "on_demand", 27.45),
        ("us-east-1", "reserved_3y", 11.71777),
        ("us-west-2", "reserved_3y", 12.0),
        ("us-east-1", "reserved_1y", 17.401365),
    ]
    assert summary.regions_unpriced == {"p4de.24xlarge": ["us-west-2"]}
    assert summary.removed == {}


def test_terms_from_the_dated_term_price_list() -> None:
    """nativ-x/fsku's term catalog (as of 2026-09-27), figures by hand: p5.48xlarge in us-east-1,
    EC2 Instance Savings Plan $34.6752 (1 year) and $23.77728 (3 years), a Capacity Block
    $41.528 against $55.04 on demand; Azure's ND96isr H100 v5 in eastus, $551,221 for a 1-year
    reservation per VM = $62.924772/h; GCP a3-ultragpu-8g in us-central1, CUD $58.471933."""
    catalog = load_catalog()

    def price(type_id: str, region: str, purchase: Purchase) -> float:
        [p] = [
            p
            for p in catalog.instance_types[type_id].prices
            if p.region == region and p.purchase is purchase
        ]
        return p.hourly_usd

    p5 = "p5.48xlarge", "us-east-1"
    assert (price(*p5, R1), price(*p5, R3), price(*p5, Purchase.capacity_block)) == (
        34.6752,
        23.77728,
        41.528,
    )
    assert price("Standard_ND96isr_H100_v5", "eastus", R1) == round(551221 / 8760, 6)
    assert price("a3-ultragpu-8g", "us-central1", R1) == 58.471933
    # 83 days on a p5: a block billed 84 days (weeks past 14) at $41.528 beats on demand
    prices = [p for p in catalog.instance_types["p5.48xlarge"].prices if p.region == "us-east-1"]
    choice = choose(83 * 24, 1, prices)
    assert choice is not None and choice.chosen.price.purchase is Purchase.capacity_block
    assert choice.chosen.cost_usd == pytest.approx(84 * 24 * 41.528)
