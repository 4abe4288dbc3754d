"""`advisor catalog import skypilot` and `advisor catalog stale`.

Fixtures in tests/data/skypilot/ copy the real header layouts of skypilot-org/skypilot-catalog
(catalogs/v8/aws/vms.csv @00148f2, catalogs/v8/gcp/vms.csv @006059e, catalogs/v6/azure/vms.csv
@098741e) with a few real rows each (the Azure NC A100 row's figures are those the shipped
azure.yaml recorded from that file). Expected prices are hand calculations written beside them.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import re
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor.catalog import shipped_catalog_dir
from advisor.catalog.importers import skypilot
from advisor.cli import main
from advisor.cli.common import STATE
from advisor.errors import InputError

DATA = Path(__file__).parent / "data" / "skypilot"
AWS_CSV = DATA / "aws" / "vms.csv"
GCP_CSV = DATA / "gcp" / "vms.csv"
AZURE_CSV = DATA / "azure" / "vms.csv"
KNOWN = {"a100-40gb-sxm", "a100-80gb-sxm", "a100-80gb-pcie", "h100-sxm", "t4", "l4"}
AS_OF = dt.date(2026, 11, 30)


def _shipped(provider: str, *ids: str) -> list[dict[str, Any]]:
    data = yaml.safe_load((shipped_catalog_dir() / "instances" / f"{provider}.yaml").read_text())
    by_id = {e["id"]: e for e in data["instance_types"]}
    return [by_id[i] for i in ids]


def _import(
    provider: str, csv: Path, existing: list[dict[str, Any]], known: set[str] = KNOWN
) -> tuple[list, Any]:
    rows = skypilot.parse_csv(csv.read_text(), str(csv), provider)
    wanted = skypilot.wanted_ids(
        provider, rows, [e["id"] for e in existing], skypilot.names.FAMILIES[provider]
    )
    found = skypilot.source_types(provider, rows, wanted)
    return skypilot.merge(
        provider, existing, found, known_accelerators=known, as_of=AS_OF, source="fixture"
    )


def _price(entry: dict[str, Any], region: str, purchase: str) -> float:
    [hit] = [p for p in entry["prices"] if (p["region"], p["purchase"]) == (region, purchase)]
    return float(hit["hourly_usd"])


# --- spot = median across zones, never the minimum -------------------------------------------


def test_aws_spot_is_the_zone_median_not_the_minimum() -> None:
    entries, _ = _import("aws", AWS_CSV, _shipped("aws", "p4d.24xlarge"))
    p4d = next(e for e in entries if e["id"] == "p4d.24xlarge")
    # us-east-1 zones az1 2.4655 (a single-zone outlier), az2 8.1915, az4 8.1203,
    # az6 7.8799: median = (7.8799 + 8.1203) / 2 = 8.0001; the minimum would be 2.4655.
    assert _price(p4d, "us-east-1", "spot") == pytest.approx(8.0001)
    # us-west-2: 7.9992, 8.2259, 9.7315 -> 8.2259
    assert _price(p4d, "us-west-2", "spot") == pytest.approx(8.2259)
    assert _price(p4d, "us-east-1", "on_demand") == pytest.approx(21.957642)
    spot_source = next(p["source"] for p in p4d["prices"] if p["purchase"] == "spot")
    assert "median of" in spot_source


def test_aws_local_zone_rows_are_left_out_of_the_region() -> None:
    header, *rows = AWS_CSV.read_text().splitlines()
    # one synthetic Local Zone row (use1-atl2-az1) far below the region's zones
    local = rows[4].replace("use1-az1", "use1-atl2-az1").replace("2.465500", "0.100000")
    text = "\n".join([header, local, *rows[5:8]])
    parsed = skypilot.parse_csv(text, "aws.csv", "aws")
    found = skypilot.source_types("aws", parsed, {"p4d.24xlarge"})
    spot = [q for q in found["p4d.24xlarge"].quotes if q.purchase.value == "spot"]
    assert spot[0].hourly_usd == pytest.approx(8.1203)  # median of 8.1915, 8.1203, 7.8799


def test_gcp_adds_the_gpu_rows_to_the_vm_rows_per_zone() -> None:
    entries, summary = _import("gcp", GCP_CSV, [])
    a3 = next(e for e in entries if e["id"] == "a3-highgpu-1g")
    assert a3["accelerator"] == "h100-sxm" and a3["gpu_count"] == 1
    # VM row + GPU row H100 x1: us-central1 1.18251 + 4.20076; spot 0.36117 + 2.9926
    assert _price(a3, "us-central1", "on_demand") == pytest.approx(5.38327)
    assert _price(a3, "us-central1", "spot") == pytest.approx(3.35377)
    # europe-west4: 1.24163 + 12.73552; spot 0.28434 + 2.9112
    assert _price(a3, "europe-west4", "on_demand") == pytest.approx(13.97715)
    assert _price(a3, "europe-west4", "spot") == pytest.approx(3.19554)
    assert summary.added == ["a3-highgpu-1g"]
    # B200 and the TPU chips have no catalog id in KNOWN; TPU v4 has none in the table: reported
    assert [e["id"] for e in entries] == ["a3-highgpu-1g"]  # no a4 VM rows: no B200 type
    unknown = skypilot.unknown_names(
        skypilot.parse_csv(GCP_CSV.read_text(), "gcp.csv", "gcp"), "gcp", KNOWN
    )
    assert unknown["B200"] == "'b200' not in catalog"
    assert unknown["tpu-v6e-1"] == "'tpu-v6e' not in catalog"
    assert unknown["tpu-v4-8"] == "no catalog id in the mapping table"


# Chips per slice name, from Google's TPU pages: v5p counts TensorCores (two per chip: "v5p-32
# specifies a v5p TPU slice with 32 TensorCores (16 chips)"); v5e and v6e count chips.
TPU_SLICES = [
    ("tpu-v5p-8", ("tpu-v5p", 4)),  # the 2x2x1 single-host slice
    ("tpu-v5p-32", ("tpu-v5p", 16)),  # the page's own example
    ("tpu-v5litepod-8", ("tpu-v5e", 8)),  # ct5lp-hightpu-8t: 8 chips
    ("tpu-v6e-1", ("tpu-v6e", 1)),
    ("tpu-v4-8", None),  # not in the table: skipped and reported, never guessed
    ("tpu-v6e-x", None),  # not a slice name
]


@pytest.mark.parametrize(("name", "expected"), TPU_SLICES)
def test_tpu_slice_chips(name: str, expected: tuple[str, int] | None) -> None:
    assert skypilot.tpu_slice(name) == expected


def test_a_tpu_slice_is_priced_by_its_accelerator_row() -> None:
    """A hand-written slice entry (host facts the CSV lacks) is priced by the slice's rows alone:
    on-demand 2.7 in all three us-central1 zones; spot the median of 0.54421, 0.6, 0.7."""
    existing = [
        {
            "id": "tpu-v6e-1",
            "provider": "gcp",
            "accelerator": "tpu-v6e",
            "gpu_count": 1,
            "vcpus": 44,
            "memory_gib": 176,
            "gpu_link": "none",
            "interconnect_gb_s": 0,
            "network_gbps": 0,
            "prices": [],
            "source": "test",
        }
    ]
    entries, summary = _import("gcp", GCP_CSV, existing, known=KNOWN | {"tpu-v6e"})
    tpu = next(e for e in entries if e["id"] == "tpu-v6e-1")
    assert tpu["vcpus"] == 44 and tpu["memory_gib"] == 176  # kept: the CSV has no host figures
    assert _price(tpu, "us-central1", "on_demand") == pytest.approx(2.7)
    assert _price(tpu, "us-central1", "spot") == pytest.approx(0.6)
    assert "tpu-v6e-1" in summary.refreshed


def test_gcp_machine_gpu_counts_come_from_the_table() -> None:
    assert skypilot.gcp_gpus("a3-highgpu-8g") == ("a3-highgpu-8g", "H100", 8)
    assert skypilot.gcp_gpus("a2-ultragpu-1g") == ("a2-ultragpu-1g", "A100-80GB", 1)
    assert skypilot.gcp_gpus("g2-standard-24") == ("g2-standard-24", "L4", 2)
    assert skypilot.gcp_gpus("n1-standard-8-t4x1") == ("n1-standard-8", "T4", 1)
    assert skypilot.gcp_gpus("n2-standard-8") is None


def test_azure_name_overrides_per_family() -> None:
    # Azure NC A100 v4 is the PCIe card; ND A100 v4 the SXM one (same SkyPilot name)
    assert skypilot.accelerator_id("azure", "Standard_NC24ads_A100_v4", "A100-80GB") == (
        "a100-80gb-pcie"
    )
    assert skypilot.accelerator_id("azure", "Standard_ND96amsr_A100_v4", "A100-80GB") == (
        "a100-80gb-sxm"
    )
    assert skypilot.accelerator_id("aws", "p4de.24xlarge", "A100-80GB") == "a100-80gb-sxm"
    assert skypilot.accelerator_id("aws", "x", "NoSuchGPU") is None


# --- facts preserved, summary -----------------------------------------------------------------


def test_hand_written_facts_are_preserved() -> None:
    [before] = _shipped("azure", "Standard_NC24ads_A100_v4")
    entries, summary = _import("azure", AZURE_CSV, [before])
    [after] = entries
    for key in before:
        if key != "prices":
            assert after[key] == before[key], key  # gpu_link, cpu, network, notes, source ...
    assert list(after) == list(before)  # field order too
    assert _price(after, "eastus", "on_demand") == pytest.approx(3.673)
    assert _price(after, "eastus", "spot") == pytest.approx(0.444433)
    assert summary.refreshed == ["Standard_NC24ads_A100_v4"] and not summary.moved


def test_committed_prices_written_beside_the_import_survive_it() -> None:
    # A reserved_1y row and a capacity_block row written by hand (SkyPilot's CSVs price on
    # demand and spot only): a refresh replaces the on-demand and spot rows and keeps these.
    [before] = _shipped("azure", "Standard_NC24ads_A100_v4")
    reserved = {
        "region": "eastus",
        "purchase": "reserved_1y",
        "hourly_usd": 2.2,
        "as_of": "2026-11-01",
        "source": "test: a reservation price written by hand",
    }
    block = {**reserved, "purchase": "capacity_block", "hourly_usd": 2.9}
    entry = {**before, "prices": [*before["prices"], reserved, block]}
    [after], _ = _import("azure", AZURE_CSV, [entry])
    assert reserved in after["prices"] and block in after["prices"]
    assert _price(after, "eastus", "on_demand") == pytest.approx(3.673)  # refreshed
    assert {p["purchase"] for p in after["prices"]} == {
        "on_demand",
        "spot",
        "reserved_1y",
        "capacity_block",
    }


def test_summary_added_removed_moved_unknown() -> None:
    p4d, g5 = _shipped("aws", "p4d.24xlarge", "g5.xlarge")
    old = dict(p4d)
    old["prices"] = [  # an older price 20% below today's on-demand, one 5% below
        {**p4d["prices"][0], "region": "us-east-1", "purchase": "on_demand", "hourly_usd": 18.3},
        {**p4d["prices"][0], "region": "us-west-2", "purchase": "on_demand", "hourly_usd": 20.9},
    ]
    entries, summary = _import("aws", AWS_CSV, [old, g5])
    assert summary.removed == ["g5.xlarge"]  # not priced by the source
    assert summary.added == ["p4de.24xlarge"]  # family p4de., A100-80GB -> a100-80gb-sxm
    # 21.957642 / 18.3 - 1 = 20% > 10%: moved; 21.95764 / 20.9 - 1 = 5.1%: not
    assert [(m[0], m[1], m[2]) for m in summary.moved] == [
        ("p4d.24xlarge", "us-east-1", "on_demand")
    ]
    assert summary.unknown_accelerators == {}
    new = next(e for e in entries if e["id"] == "p4de.24xlarge")
    assert "facts not sourced" in new["notes"]
    assert new["gpu_link"] == "pcie" and new["network_gbps"] == 0
    # p4de in ap-northeast-1: spot median of 15.9785 and 37.6223 = 26.8004
    assert _price(new, "ap-northeast-1", "spot") == pytest.approx(26.8004)


# --- bad input: exit 2 naming file, line and column --------------------------------------------

HEADER = AWS_CSV.read_text().splitlines()[0]
GOOD_ROW = "a1.large,,,2.0,4.0,,0.051,0.051000,us-east-1,use1-az2,arm64"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            HEADER.replace("SpotPrice", "SpotPrise") + "\n" + GOOD_ROW,
            "line 1, column 8: unknown column 'SpotPrise'",
        ),
        (HEADER.replace(",Region", "") + "\n", "line 1: missing column 'Region'"),
        (
            HEADER + "\n" + GOOD_ROW.replace("0.051,", "cheap,", 1),
            "line 2, column 7 (Price): 'cheap'",
        ),
        (HEADER + "\n" + GOOD_ROW.replace(",2.0,", ",-2.0,"), "line 2, column 4 (vCPUs): '-2.0'"),
        (
            HEADER + "\n" + GOOD_ROW + "\n" + "p9.x,Z900,8,1,1,,1,1,us-east-1,use1-az1,x86_64",
            "line 3, column 2 (AcceleratorName): unknown accelerator 'Z900'",
        ),
        (HEADER + "\n" + "a1.large,,,2.0", "line 2: 4 cells, header has 11"),
        ("", "line 1: empty file"),
    ],
)
def test_bad_csv_names_file_line_and_column(text: str, expected: str) -> None:
    with pytest.raises(InputError) as err:
        skypilot.parse_csv(text, "bad.csv", "aws")
    assert "bad.csv" in str(err.value)
    assert expected in str(err.value)


# --- the command: validation, atomicity, dry run -----------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in this process (a subprocess per case costs a second of the shared CPUs);
    the global options' state is put back afterwards."""
    code = 0
    saved = copy.copy(STATE)
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        STATE.catalog_dir, STATE.replace, STATE.debug = (
            saved.catalog_dir,
            saved.replace,
            saved.debug,
        )
    out, err = capsys.readouterr()
    return code, out, err


def _write_existing(out: Path, provider: str, entries: list[dict[str, Any]]) -> Path:
    path = out / f"{provider}.yaml"
    path.write_text(yaml.safe_dump({"instance_types": entries}, sort_keys=False))
    return path


def test_import_writes_a_file_the_loader_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_existing(tmp_path, "aws", _shipped("aws", "p4d.24xlarge"))
    code, out, err = _cli(
        capsys, "catalog", "import", "skypilot", str(AWS_CSV), "--out", str(tmp_path), "--json"
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["written"] and summary["added"] == ["p4de.24xlarge"]
    assert summary["unknown_accelerators"] == {"V100": "no catalog id in the mapping table"}
    written = yaml.safe_load((tmp_path / "aws.yaml").read_text())["instance_types"]
    p4d = next(e for e in written if e["id"] == "p4d.24xlarge")
    assert p4d["system"] == "dgx-a100" and p4d["network_gbps"] == 400
    from advisor.catalog import load_catalog

    catalog = load_catalog(tmp_path)  # shipped + the written file
    assert catalog.instance_types["p4d.24xlarge"].prices[0].as_of == dt.date.today()


def test_a_failing_import_leaves_the_catalog_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    [p4d] = _shipped("aws", "p4d.24xlarge")
    broken = {**p4d, "accelerator": "no-such-gpu"}  # the loader refuses the result
    path = _write_existing(tmp_path, "aws", [broken])
    before = path.read_bytes()
    code, _, err = _cli(
        capsys, "catalog", "import", "skypilot", str(AWS_CSV), "--out", str(tmp_path)
    )
    assert code == 2
    assert "does not validate; nothing written" in err
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["aws.yaml"]  # no temporary left behind


def test_bad_csv_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "aws" / "vms.csv"
    bad.parent.mkdir()
    bad.write_text(HEADER + "\n" + GOOD_ROW.replace("0.051,", "cheap,", 1) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    code, _, err = _cli(capsys, "catalog", "import", "skypilot", str(bad), "--out", str(out))
    assert code == 2
    assert f"{bad}: line 2, column 7 (Price)" in err.replace("\n", "")
    assert list(out.iterdir()) == []


def test_dry_run_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(
        capsys, "catalog", "import", "skypilot", str(GCP_CSV), "--out", str(tmp_path), "--dry-run"
    )
    assert code == 0, err
    assert "would write (dry run)" in out and "added (1): a3-highgpu-1g" in out
    assert "tpu-v4-8" in out  # unknown accelerators are listed
    assert list(tmp_path.iterdir()) == []


def test_provider_from_path_and_snapshot_label() -> None:
    from advisor.cli.catalog_import import guess_provider, source_label

    assert guess_provider("catalog/snapshots/skypilot-abc123/catalogs/v8/gcp/vms.csv") == "gcp"
    with pytest.raises(InputError):
        guess_provider("/tmp/vms.csv")
    label = source_label("catalog/snapshots/skypilot-abc123/catalogs/v8/gcp/vms.csv")
    assert label.startswith("skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv@abc123")


def test_the_provider_option_names_every_layout_the_importer_reads() -> None:
    """The help is written out (the catalog commands do not import the importer to start); it
    must name what skypilot.LAYOUTS reads, which the error for an unknown path derives from."""
    from advisor.cli.catalog_cmd import import_skypilot

    option = typing.get_type_hints(import_skypilot, include_extras=True)["provider"]
    help_text = option.__metadata__[0].help
    named = re.findall(r"[a-z]+", help_text.split(":")[0])
    assert sorted(n for n in named if n != "or") == sorted(skypilot.LAYOUTS)


# --- stale ----------------------------------------------------------------------------------


def test_stale_lists_prices_older_than_the_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    [nc] = _shipped("azure", "Standard_NC24ads_A100_v4")
    old = dict(nc)
    old["prices"] = [{**nc["prices"][0], "as_of": "2020-01-01", "source": "old page"}]
    _write_existing(tmp_path, "azure", [old])
    monkeypatch.setenv("ADVISOR_MAX_PRICE_AGE_DAYS", "400")
    code, out, err = _cli(capsys, "catalog", "stale", "--catalog", str(tmp_path), "--json")
    assert code == 0, err
    found = json.loads(out)
    assert [(f["id"], f["as_of"], f["source"]) for f in found] == [
        ("Standard_NC24ads_A100_v4", "2020-01-01", "old page")
    ]
    assert found[0]["age_days"] == (dt.date.today() - dt.date(2020, 1, 1)).days


def test_scope_keeps_types_outside_the_snapshot_families() -> None:
    existing = _shipped("aws", "p4d.24xlarge", "g5.xlarge")
    rows = skypilot.parse_csv(AWS_CSV.read_text(), "aws.csv", "aws")
    found = skypilot.source_types("aws", rows, {"p4d.24xlarge", "p4de.24xlarge"})
    entries, summary = skypilot.merge(
        "aws", existing, found, known_accelerators=KNOWN, as_of=AS_OF, source="s", scope=("p4d.",)
    )
    assert summary.removed == [] and summary.added == []  # p4de. is outside the scope
    assert entries[1] == existing[1]  # g5.xlarge untouched
    assert summary.refreshed == ["p4d.24xlarge"]


def test_spot_is_capped_at_on_demand() -> None:
    # real rows of p4d.24xlarge in eu-central-1 (catalogs/v8/aws/vms.csv @00148f2): two zones
    # carry SpotPrice 27.433000 against Price 27.43298; the median 27.433 is capped at 27.43298
    gpu = AWS_CSV.read_text().splitlines()[5].split(",", 5)[5].rsplit(",", 5)[0]
    text = "\n".join(
        [HEADER]
        + [
            f"p4d.24xlarge,A100,8.0,96.0,1152.0,{gpu},27.43298,{spot},eu-central-1,{zone},x86_64"
            for spot, zone in (
                ("13.338300", "euc1-az1"),
                ("27.433000", "euc1-az2"),
                ("27.433000", "euc1-az3"),
            )
        ]
    )
    found = skypilot.source_types("aws", skypilot.parse_csv(text, "a.csv", "aws"), {"p4d.24xlarge"})
    spot = next(q for q in found["p4d.24xlarge"].quotes if q.purchase.value == "spot")
    assert spot.hourly_usd == pytest.approx(27.43298)
    assert "capped at the on-demand price" in spot.basis


def test_a_new_size_takes_its_family_host_facts() -> None:
    assert skypilot.family("p5.4xlarge") == skypilot.family("p5.48xlarge") == "p5"
    assert skypilot.family("a2-highgpu-8g") == "a2-highgpu"
    assert skypilot.family("a3-edgegpu-8g-nolssd") == "a3-edgegpu"
    assert skypilot.family("g2-standard-24") == "g2-standard"
    # Azure names the size inside the id: the NCasT4_v3 sizes are one family, NC A100 v4 another
    assert skypilot.family("Standard_NC16as_T4_v3") == skypilot.family("Standard_NC4as_T4_v3")
    assert skypilot.family("Standard_NC40ads_H100_v5") == skypilot.family(
        "Standard_NC80adis_H100_v5"
    )
    assert skypilot.family("Standard_NC24ads_A100_v4") != skypilot.family("Standard_NC4as_T4_v3")
    p4d = _shipped("aws", "p4d.24xlarge")[0]
    sibling = {**p4d, "id": "p4de.12xlarge", "accelerator": "a100-80gb-sxm"}  # same family key
    entries, _ = _import("aws", AWS_CSV, [p4d, sibling])
    new = next(e for e in entries if e["id"] == "p4de.24xlarge")
    assert new["system"] == "dgx-a100" and "as for p4de.12xlarge" in new["notes"]
    # p4d.24xlarge is another family (p4d): without a p4de sibling nothing is taken
    alone, _ = _import("aws", AWS_CSV, [p4d])
    assert "system" not in next(e for e in alone if e["id"] == "p4de.24xlarge")


def test_families_narrower_than_the_table_still_add_new_types(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the table's GCP family is "a3-"; a scope naming one machine type still adds it
    args = ["catalog", "import", "skypilot", str(GCP_CSV), "--out", str(tmp_path), "--json"]
    code, out, err = _cli(capsys, *args, "--families", "a3-highgpu-1g", "--dry-run")
    assert code == 0, err
    assert json.loads(out)["added"] == ["a3-highgpu-1g"]
    code, out, err = _cli(capsys, *args, "--families", "a2-", "--dry-run")
    assert code == 0, err
    assert json.loads(out)["added"] == []


# --- GPU clouds beyond the three (Lambda) ----------------------------------------------------

LAMBDA_CSV = (
    shipped_catalog_dir().parent
    / "catalog/snapshots/skypilot-0f4070387edc953d7004cff197940e1918a1d6aa/catalogs/v8/lambda/vms.csv"
)


def test_lambda_layout_imports_the_gpu_families_with_hand_facts_kept() -> None:
    # The snapshot rows (real figures of catalogs/v8/lambda/vms.csv @0f40703): gpu_8x_h100_sxm5
    # Price 31.92, 208 vCPUs, 1800 GiB in every region read; no zones, SpotPrice empty, so one
    # on-demand price per region and no spot price.
    existing = _shipped("lambda", "gpu_8x_h100_sxm5")
    entries, summary = _import("lambda", LAMBDA_CSV, existing, KNOWN | {"b200"})
    by_id = {e["id"]: e for e in entries}
    h100 = by_id["gpu_8x_h100_sxm5"]
    assert (h100["vcpus"], h100["memory_gib"]) == (208, 1800.0)
    assert {p["purchase"] for p in h100["prices"]} == {"on_demand"}
    assert _price(h100, "us-east-1", "on_demand") == 31.92
    assert h100["gpu_link"] == "nvswitch" and h100["interconnect_gb_s"] == 900  # kept
    assert set(summary.added) == {
        "gpu_1x_b200_sxm6",
        "gpu_2x_b200_sxm6",
        "gpu_8x_b200_sxm6",
        "gpu_4x_h100_sxm5",
    }
    assert _price(by_id["gpu_8x_b200_sxm6"], "europe-central-1", "on_demand") == 53.52


# --- RunPod (a GPU cloud priced per GPU, countries as regions) -------------------------------

RUNPOD_CSV = (
    shipped_catalog_dir().parent
    / "catalog/snapshots/skypilot-01acdfd419ce5afae1289ff14825b893ced0c196/catalogs/v8/runpod/vms.csv"
)


def test_runpod_imports_on_demand_per_country_and_no_spot() -> None:
    # The snapshot rows (real figures of catalogs/v8/runpod/vms.csv @01acdfd): 8x_H100-SXM_SECURE
    # Price 26.32 (8 x $3.29) and SpotPrice 26.32 in each of 48 data centres of 14 countries.
    # One on-demand price per country; the SpotPrice column is not read (RunPod publishes no
    # interruption rate to plan spot with), though every row has one.
    known = KNOWN | {"b200", "b300", "h200-sxm", "mi300x"}
    entries, summary = _import("runpod", RUNPOD_CSV, [], known)
    by_id = {e["id"]: e for e in entries}
    pods = {
        f"{n}x_{name}_SECURE" for name in ("B200", "H100-SXM", "H200-SXM", "MI300X") for n in (1, 8)
    }
    assert set(summary.added) == pods | {"1x_B300_SECURE"}
    h100 = by_id["8x_H100-SXM_SECURE"]
    assert (h100["accelerator"], h100["gpu_count"], h100["vcpus"]) == ("h100-sxm", 8, 160)
    assert {p["purchase"] for p in h100["prices"]} == {"on_demand"}
    assert len(h100["prices"]) == 14
    assert _price(h100, "US", "on_demand") == 26.32
    assert _price(by_id["8x_MI300X_SECURE"], "IS", "on_demand") == 19.12  # 8 x 2.39
    assert by_id["1x_H200-SXM_SECURE"]["accelerator"] == "h200-sxm"
    assert _price(by_id["1x_B300_SECURE"], "SG", "on_demand") == 7.89
    assert not summary.unknown_accelerators


def test_runpod_names_its_pcie_parts_without_a_suffix() -> None:
    # RunPod's "A100-80GB" and "H100" are the PCIe cards (its fetcher renames A100-PCIe and
    # H100-PCIe so); on AWS "A100-80GB" is the SXM part of p4de and "H100" the SXM part of p5.
    assert skypilot.accelerator_id("runpod", "1x_A100-80GB_SECURE", "A100-80GB") == "a100-80gb-pcie"
    assert skypilot.accelerator_id("runpod", "8x_H100_SECURE", "H100") == "h100-pcie"
    assert skypilot.accelerator_id("runpod", "8x_H100-SXM_SECURE", "H100-SXM") == "h100-sxm"
    assert skypilot.accelerator_id("aws", "p4de.24xlarge", "A100-80GB") == "a100-80gb-sxm"
    assert skypilot.accelerator_id("aws", "p5.48xlarge", "H100") == "h100-sxm"


def test_runpod_layout_reads_a_real_row_and_its_workstation_cards() -> None:
    # A real row of the same file (1x_A100-80GB_SECURE, India) and a row (figures made up) of a
    # workstation card RunPod rents that the catalog has no id for: parsed, not an error.
    header = RUNPOD_CSV.read_text().splitlines()[0]
    gpu_info = "\"{'Gpus': []}\""
    text = "\n".join(
        [
            header,
            f"1x_A100-80GB_SECURE,A100-80GB,1.0,8.0,117.0,IN,1.39,1.39,AP-IN-1,{gpu_info}",
            f"1x_RTX4090_SECURE,RTX4090,1.0,5.0,29.0,US,0.69,0.69,US-TX-3,{gpu_info}",
        ]
    )
    rows = skypilot.parse_csv(text, "vms.csv", "runpod")
    assert [(r.instance_type, r.region, r.zone, r.price) for r in rows] == [
        ("1x_A100-80GB_SECURE", "IN", "AP-IN-1", 1.39),
        ("1x_RTX4090_SECURE", "US", "US-TX-3", 0.69),
    ]


@pytest.mark.parametrize("provider", [*skypilot.LAYOUTS])
def test_a_shipped_provider_file_is_what_an_import_writes(provider: str) -> None:
    """Every provider file an import rewrites is its header comment and the dump of its entries,
    byte for byte: a comment anywhere below the header (a hand note beside a field) would be
    dropped by the next import, so such facts live in the entry's fields."""
    from advisor.cli.catalog_import import header_lines

    path = shipped_catalog_dir() / "instances" / f"{provider}.yaml"
    entries = yaml.safe_load(path.read_text())["instance_types"]
    rewritten = "".join(header_lines(path)) + skypilot.entries_yaml(entries)
    assert rewritten == path.read_text()
