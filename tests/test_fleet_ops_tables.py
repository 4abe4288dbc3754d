"""The fleet's operator table from its hosts' `advisor probe --ops` tables: one vote per host,
outliers out (advisor/fleet/ops_tables.py), checked on the shipped H200 table scaled per host."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.fleet.ops_tables import fleet_ops_table
from probes.ops_table import ROW_SECTIONS, OpsTable

TABLE = Path(__file__).resolve().parent.parent / "catalog" / "ops"
H200 = TABLE / "h200-sxm--torch2.11.0-cu130-driver580.json"


@pytest.fixture(scope="module")
def h200() -> OpsTable:
    table = OpsTable.model_validate_json(H200.read_bytes())
    # a few rows of each section keep the test quick; every section is still voted
    return table.model_copy(update={s: getattr(table, s)[:12] for s in ROW_SECTIONS})


def scaled(table: OpsTable, factor: float) -> OpsTable:
    """The same table measured `factor` times slower."""
    return table.model_copy(
        update={
            s: [r.model_copy(update={"median_us": r.median_us * factor}) for r in getattr(table, s)]
            for s in ROW_SECTIONS
        }
    )


def medians(table: OpsTable) -> list[float]:
    return [r.median_us for s in ROW_SECTIONS for r in getattr(table, s)]


def test_an_outlier_host_is_left_out(h200: OpsTable) -> None:
    """Hosts at x0.98, x1.0, x1.02 and x2.0 of each row's time r: the fleet's centre is the
    median of the four, 1.01 r; the deviations 0.03, 0.01, 0.01, 0.99 r have a median (MAD) of
    0.02 r, a spread of max(1.4826 x 0.02, 2% of 1.01) r = 0.02965 r; 3.5 spreads = 0.1038 r,
    so the x2.0 host is out and the vote is the median of the other three: r itself."""
    hosts = [("a", 0.98), ("b", 1.0), ("c", 1.02), ("slow", 2.0)]
    fleet = fleet_ops_table((h, scaled(h200, f)) for h, f in hosts)
    assert fleet is not None
    assert medians(fleet.table) == pytest.approx(medians(h200), rel=1e-12)
    assert fleet.hosts == ("a", "b", "c", "slow")
    assert {host for _, host, _ in fleet.ignored} == {"slow"}
    assert len(fleet.ignored) == len(medians(h200))  # out of every row
    assert fleet.table.notes[0].startswith("fleet table: 4 host(s) voted")
    # the spread kept is the fleet's: the three voting hosts' medians, 0.98 r to 1.02 r
    row = fleet.table.gemm[0]
    assert row.iqr_us == pytest.approx(0.02 * h200.gemm[0].median_us, rel=1e-9)


def test_a_host_reporting_often_votes_once(h200: OpsTable) -> None:
    """Host 'loud' posts five tables at x1.4, hosts b and c one each at x1.0: by host the
    medians are 1.4, 1.0, 1.0 (centre 1.0, MAD 0, spread 2% of 1.0, 'loud' 20 spreads out):
    r. Counted by table the median of seven would have been 1.4 r."""
    pairs = [("loud", scaled(h200, 1.4))] * 5 + [("b", h200), ("c", h200)]
    fleet = fleet_ops_table(pairs)
    assert fleet is not None
    assert medians(fleet.table) == pytest.approx(medians(h200), rel=1e-12)
    assert {host for _, host, _ in fleet.ignored} == {"loud"}


def test_two_hosts_both_count(h200: OpsTable) -> None:
    """Fewer than three hosts: no outliers, the median of the two (x1.0 and x1.2: x1.1)."""
    fleet = fleet_ops_table([("a", h200), ("b", scaled(h200, 1.2))])
    assert fleet is not None and fleet.ignored == ()
    assert medians(fleet.table) == pytest.approx([1.1 * m for m in medians(h200)], rel=1e-12)


def test_one_accelerator_at_a_time(h200: OpsTable) -> None:
    other = h200.model_copy(update={"accelerator": "h100-sxm"})
    with pytest.raises(ValueError, match="one accelerator"):
        fleet_ops_table([("a", h200), ("b", other)])
    assert fleet_ops_table([]) is None
