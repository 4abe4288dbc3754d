"""The figure a table sorts by is the figure it shows, counts say what they count, and
no width cuts an id, a region or the sort column (60, 80 and 120 columns, and a pipe)."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest

from advisor import load_catalog
from tests.test_cli_tables import _json as as_json
from tests.test_cli_tables import run

WIDTHS = ["60", "80", "120", None]  # None: a pipe with no COLUMNS (Rich's 80)
WIDTH_IDS = ["60", "80", "120", "pipe"]
FINE_TUNING = ["--workload", "fine_tuning", "--model", "llama-3-8b", "--tokens", "2e9"]
# 15 options: down to the TPU (ranked 11th behind the GPU clouds), whose penalty is the case
FINE_TUNING += ["--limit", "15"]
LOW_LATENCY = ["--workload", "low_latency_inference", "--model", "llama-3.1-8b"]


def table_rows(stdout: str) -> dict[int, list[str]]:
    """The words of each numbered row's first line (the table has no frame: "1   id ...")."""
    rows = {}
    for line in stdout.split("\n#1 ", maxsplit=1)[0].splitlines():
        m = re.match(r"^(\d+)\s", line)
        if m:
            rows[int(m.group(1))] = line.split()
    return rows


def _money(word: str) -> float:
    return float(word.strip("$*=").replace(",", ""))


@pytest.fixture(scope="module")
def fine_tuning() -> Any:
    return as_json("recommend", *FINE_TUNING)


def test_ranked_value_is_the_shown_figure_times_the_stated_penalties(fine_tuning: Any) -> None:
    """Worked by hand from the reasons: each "scored 10% worse" sentence multiplies the cost to
    completion by 1.10 (catalog/workloads.yaml preference_penalty 0.1); rows come in that order."""
    recs = fine_tuning["recommendations"]
    ranked = [r["ranked_value"] for r in recs]
    assert ranked == sorted(ranked)
    for r in recs:
        misses = sum(reason.startswith("scored 10% worse") for reason in r["reasons"])
        expected = r["sizing"]["cost_to_completion_usd"] * 1.1**misses
        assert r["ranked_value"] == pytest.approx(expected)
        assert r["penalty_factor"] == pytest.approx(1.1**misses)
    # the case in the issue: the TPU's ICI link is not the preferred NVLink, 10% on its cost
    tpu = next(r for r in recs if r["instance_type"] == "tpu-v6e-8")
    assert tpu["penalty_factor"] == pytest.approx(1.1)
    # its unpenalised cost is below an unpenalised option ranked above it (a GPU cloud's B200),
    # which is why an unmarked table read out of order
    above = [r for r in recs[: recs.index(tpu)] if r["penalty_factor"] == 1]
    cost = tpu["sizing"]["cost_to_completion_usd"]
    assert any(cost < r["ranked_value"] < tpu["ranked_value"] for r in above)


@pytest.mark.parametrize("columns", WIDTHS, ids=WIDTH_IDS)
def test_the_sort_column_reads_in_order_at_every_width(fine_tuning: Any, columns: str) -> None:
    p = run("recommend", *FINE_TUNING, columns=columns)
    assert p.returncode == 0, p.stderr
    rows = table_rows(p.stdout)
    recs = fine_tuning["recommendations"]
    assert sorted(rows) == list(range(1, len(recs) + 1))
    shown = []
    for n, r in enumerate(recs, 1):
        words = rows[n]
        assert words[1] == r["instance_type"]  # whole, on its row
        figure = next(w for w in words if w.startswith("$"))
        assert _money(figure) == pytest.approx(r["ranked_value"], abs=0.005)
        assert figure.endswith("*") == (r["penalty_factor"] != 1)  # penalised rows marked
        shown.append(_money(figure))
    assert shown == sorted(shown)  # what is printed is in order
    tpu = next(n for n, r in enumerate(recs, 1) if r["instance_type"] == "tpu-v6e-8")
    cost = recs[tpu - 1]["sizing"]["cost_to_completion_usd"]
    ranked = recs[tpu - 1]["ranked_value"]
    # the footnote states the figure as priced and the penalty (words may wrap: compare words)
    note = " ".join(p.stdout.split())
    assert f"#{tpu} tpu-v6e-8: ${cost:,.2f} as priced x 1.10 = ${ranked:,.2f}" in note
    assert "fine_tuning prefers" in note


@pytest.mark.parametrize("columns", WIDTHS, ids=WIDTH_IDS)
def test_no_id_region_or_figure_is_cut(columns: str | None) -> None:
    """Every word of every cell whole: ids, accelerator ids in the hardware column, regions."""
    width = int(columns or 80)
    for args in (FINE_TUNING, LOW_LATENCY, ["--workload", "high_throughput_inference"]):
        p = run("recommend", *args, "--purchase", "any", columns=columns)
        assert p.returncode == 0, p.stderr
        data = as_json("recommend", *args, "--purchase", "any")
        assert max(len(line) for line in p.stdout.splitlines()) <= width
        assert "…" not in p.stdout
        words = set(p.stdout.split())
        table = p.stdout.split("\n#1 ")[0]
        header = table.split("─")[0].split()
        for r in data["recommendations"]:
            assert r["instance_type"] in words
            if "where" in header:
                assert r["region"] in table.split(), (columns, r["region"])
            if "hardware" in header:
                assert r["accelerator"] in table.split(), (columns, r["accelerator"])


def test_default_columns_at_80_are_the_chosen_four() -> None:
    """At 80 columns (and in a pipe) the default table holds id, hardware, where and the
    ranked figure, nothing dropped; --wide adds the rest (and may leave some out, saying so)."""
    for columns in ("80", None):
        p = run("recommend", *FINE_TUNING, columns=columns)
        header = " ".join(p.stdout.split("─")[0].split())
        for name in ("option", "completion", "hardware", "where"):
            assert name in header, (columns, header)
        assert "left out" not in p.stdout
    wide = run("recommend", *LOW_LATENCY, "--wide", columns="200")
    header = " ".join(wide.stdout.split("─")[0].split())
    for name in ("TTFT ms", "ITL ms", "tokens/s", "replicas x GPUs", "$/h", "score", "penalty"):
        assert name in header, header


def test_hardware_says_the_nodes() -> None:
    """32 A100s on 4 nodes is not one machine: the hardware cell names the nodes."""
    data = as_json("recommend", "--workload", "large_scale_training", "--memory-gb", "2000")
    multi = [r for r in data["recommendations"] if r["nodes"] > 1]
    assert multi, "the query no longer spans nodes: pick a larger memory need"
    p = run("recommend", "--workload", "large_scale_training", "--memory-gb", "2000", columns="120")
    text = " ".join(p.stdout.split("\n#1 ")[0].split())
    r = multi[0]
    assert f"{r['nodes']} nodes x {r['gpu_count'] // r['nodes']} x {r['accelerator']}" in text


def test_ties_are_marked_and_stated() -> None:
    """Two TPU v6e slices serve 50 requests/s at the same $ per million tokens (the same chips,
    the same price per chip): the second row is marked = and a note says how ties are ranked."""
    data = as_json("recommend", *LOW_LATENCY, "--request-rate", "50", "--limit", "40")
    values = [r["ranked_value"] for r in data["recommendations"]]
    tied = [n for n in range(1, len(values)) if values[n] == values[n - 1]]
    assert tied, "no tie left in this query: pick another"
    p = run("recommend", *LOW_LATENCY, "--request-rate", "50", "--limit", "40", columns="120")
    rows = table_rows(p.stdout)
    for n in range(len(values)):
        figure = next(w for w in rows[n + 1] if w.startswith("$"))
        assert figure.endswith("=") == (n in tied)
    assert "ties are ranked by the lower $/h, then the id" in " ".join(p.stdout.split())


def test_counts_add_up_to_the_catalog() -> None:
    """Types feasible + candidates rejected = the catalog's instance types + edge devices; the
    rows shown are types (each at its best offering); offerings are counted as offerings."""
    catalog = load_catalog()
    edge = sum(a.form_factor.value == "edge" for a in catalog.accelerators.values())
    candidates = len(catalog.instance_types) + edge
    data = as_json("recommend", *FINE_TUNING, "--limit", "1000")
    assert data["feasible_types"] + data["rejected_count"] == candidates
    assert len(data["recommendations"]) == data["feasible_types"]
    assert len({r["instance_type"] for r in data["recommendations"]}) == data["feasible_types"]
    each = as_json("recommend", *FINE_TUNING, "--limit", "1000", "--each-offering")
    assert len(each["recommendations"]) == each["feasible_count"] == data["feasible_count"]
    p = run("recommend", *FINE_TUNING, columns="200")
    text = " ".join(p.stdout.split())
    assert (
        f"{data['feasible_types']} instance type(s) feasible for fine_tuning "
        f"({data['feasible_count']} priced offering(s)" in text
    )
    assert "showing the best 15 type(s), each at its best offering" in text
    assert f"{data['rejected_count']} of the {candidates} candidates" in text


def test_explanation_lines_are_indented() -> None:
    """A reason that wraps continues under its own text, not at column 0."""
    p = run("recommend", *FINE_TUNING, columns="60")
    reasons = p.stdout.split("\n#1 ")[1].split("\n#2 ")[0].splitlines()[1:]
    assert reasons and all(line.startswith(("  - ", "    ")) for line in reasons), reasons


def test_csv_has_every_row_and_the_ranked_figure(fine_tuning: Any) -> None:
    p = run("recommend", *FINE_TUNING, "--format", "csv")
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    recs = fine_tuning["recommendations"]
    assert [r["option"] for r in rows] == [r["instance_type"] for r in recs]
    assert [float(r["ranked_value"]) for r in rows] == [r["ranked_value"] for r in recs]
    assert [float(r["cost_to_completion_usd"]) for r in rows] == [
        r["sizing"]["cost_to_completion_usd"] for r in recs
    ]
    assert (
        run("recommend", *FINE_TUNING, "--format", "json").stdout
        == run("recommend", *FINE_TUNING, "--json").stdout
    )
    clash = run("recommend", *FINE_TUNING, "--json", "--format", "csv")
    assert clash.returncode == 2 and "--format" in clash.stderr


@pytest.mark.parametrize("columns", WIDTHS, ids=WIDTH_IDS)
def test_catalog_instances_fits_and_is_short(columns: str | None) -> None:
    """One line or two per type by default (the region list is --wide's), ids whole."""
    p = run("catalog", "instances", columns=columns)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    catalog = load_catalog()
    assert max(len(line) for line in lines) <= int(columns or 80)
    assert len(lines) <= 3 * len(catalog.instance_types) + 6
    for i in catalog.instance_types:
        assert any(i in line.split() for line in lines), i
    wide = run("catalog", "instances", "--wide", "--provider", "gcp", columns="200")
    assert "region names" in wide.stdout and "southamerica-west1," in wide.stdout.split()
    rows = list(csv.DictReader(io.StringIO(run("catalog", "instances", "--format", "csv").stdout)))
    assert len(rows) == len(catalog.instance_types)
    by_id = {r["id"]: r for r in rows}
    for it in catalog.instance_types.values():
        assert int(by_id[it.id]["region_count"]) == len({p.region for p in it.prices})


def _cheapest_by_hand(accelerator_prefix: str) -> dict[tuple[str, str, int], float]:
    """Per (accelerator, provider, GPUs) the least sound on-demand price, from the catalog's
    entries walked here (not through advisor.catalog.queries.gpu_grid)."""
    out: dict[tuple[str, str, int], float] = {}
    for it in load_catalog().instance_types.values():
        if not (it.accelerator or "").startswith(accelerator_prefix):
            continue
        for p in it.prices:
            if p.purchase.value == "on_demand" and p.flag is None:
                key = (it.accelerator or "", it.provider, it.gpu_count)
                out[key] = min(out.get(key, float("inf")), p.hourly_usd)
    return out


@pytest.mark.parametrize("columns", WIDTHS, ids=WIDTH_IDS)
def test_catalog_gpus_is_a_compact_grid(columns: str | None) -> None:
    """`catalog gpus H100`: one line per accelerator x cloud x GPUs per instance, about a
    dozen, with the cheapest sound on-demand $/h; p5.48xlarge's us-east-1 on-demand $55.04
    (catalog/instances/aws.yaml) is the cheapest 8 x H100 SXM on AWS."""
    p = run("catalog", "gpus", "H100", columns=columns)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert max(len(line) for line in lines) <= int(columns or 80)
    expected = _cheapest_by_hand("h100")
    assert 3 <= len(expected) <= 14
    rows = [line.split() for line in lines if line.split() and line.split()[0].startswith("h100")]
    assert len(rows) == len(expected)
    for acc, cloud, gpus, price, *_ in rows:
        assert float(price.strip("$").replace(",", "")) == pytest.approx(
            expected[(acc, cloud, int(gpus))], abs=0.005
        )
    assert ["h100-sxm", "aws", "8", "$55.04"] in [r[:4] for r in rows]
    data = as_json("catalog", "gpus", "h100")
    p5 = next(r for r in data if r["provider"] == "aws" and r["gpu_count"] == 8)
    assert p5["on_demand"] == {
        "instance_type": "p5.48xlarge",
        "region": "us-east-1",
        "hourly_usd": 55.04,
    }
    assert len(p5["regions"]) == len(
        {p.region for p in load_catalog().instance_types["p5.48xlarge"].prices if p.flag is None}
    )


def test_catalog_gpus_takes_a_family_and_hints_a_typo() -> None:
    family = as_json("catalog", "gpus", "h200")  # the start of ids: both H200s
    assert {r["accelerator"] for r in family} == {"h200-sxm", "h200-nvl"} & {
        i.accelerator for i in load_catalog().instance_types.values()
    }
    p = run("catalog", "gpus", "h100-sxn")
    assert p.returncode == 2
    assert "did you mean 'h100-sxm'" in p.stderr


def test_ties_are_marked_under_a_performance_objective() -> None:
    """-o performance sorts by the score: a score equal to the row above's is marked = too."""
    ask = ("recommend", "--workload", "fine_tuning", "--memory-gb", "80", "-o", "performance")
    data = as_json(*ask, "-n", "6")
    values = [r["ranked_value"] for r in data["recommendations"]]
    tied = [n for n in range(1, len(values)) if values[n] == values[n - 1]]
    assert tied, "no tie left in this query: pick another"
    p = run(*ask, "-n", "6", columns="120")
    rows = table_rows(p.stdout)
    for n in range(len(values)):
        score = next(w for w in rows[n + 1] if w[0].isdigit() and "." in w)
        assert score.endswith("=") == (n in tied), (n, rows[n + 1])
    assert "tied with the row above on score" in " ".join(p.stdout.split())
