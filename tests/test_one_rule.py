"""What a chip can do is decided once (advisor.catalog.capability): `recommend` rejects a
fine-tune on Inferentia2 (catalog `jobs`: serve only), and `estimate` and the review's cost per
unit of work refuse it with the same sentence, where they used to price it (35.3 h, $458)."""

from __future__ import annotations

import dataclasses

from typer.testing import CliRunner

from advisor import Workload, recommend
from advisor.catalog import Catalog, load_catalog
from advisor.catalog.capability import cannot_run
from advisor.cli import app
from advisor.planning.estimate import estimate
from advisor.request import EstimateRequest
from advisor.review.costs import CostedJob, workload_costs

# The sentence worked from the catalog: Inferentia2's name, and its jobs (serve, batch).
WHY = "AWS Inferentia2 (Inf2) does not fine-tune (fine_tuning): it is built to serve only"
JOB = dict(workload="fine_tuning", model="llama-3-8b", tokens=2e9)


def _two_types() -> Catalog:
    """The shipped catalog with two instance types: Inferentia2 and an H100 node."""
    full = load_catalog()
    keep = {i: full.instance_types[i] for i in ("inf2.48xlarge", "p5.48xlarge")}
    return dataclasses.replace(full, instance_types=keep)


def test_the_rule_itself() -> None:
    catalog = load_catalog()
    inf2, h100 = catalog.accelerators["inferentia2"], catalog.accelerators["h100-sxm"]
    assert cannot_run(inf2, catalog.workloads["fine_tuning"]) == WHY
    assert cannot_run(inf2, catalog.workloads["high_throughput_inference"]) is None
    assert cannot_run(h100, catalog.workloads["fine_tuning"]) is None


def test_recommend_rejects_it() -> None:
    result = recommend(_two_types(), Workload(**JOB))
    rejected = {r.id: r.reasons for r in result.rejected}
    assert WHY in rejected["inf2.48xlarge"]
    assert [r.instance_type for r in result.recommendations] == ["p5.48xlarge"]


def test_estimate_refuses_it_naming_why() -> None:
    est = estimate(load_catalog(), EstimateRequest(**JOB, instance_type="inf2.48xlarge"))
    assert not est.fits and est.notes[0] == WHY
    ok = estimate(load_catalog(), EstimateRequest(**JOB, instance_type="p5.48xlarge"))
    assert ok.fits and WHY not in ok.notes


def test_estimate_cli_exits_1_naming_why() -> None:
    args = ["estimate", "-w", "fine_tuning", "-m", "llama-3-8b", "--tokens", "2e9"]
    out = CliRunner().invoke(app, [*args, "-i", "inf2.48xlarge"], env={"COLUMNS": "200"})
    assert out.exit_code == 1, out.output
    assert WHY in out.output


def test_the_review_does_not_list_it() -> None:
    job = CostedJob("fine-tune", "fine_tuning", 2e9, model="llama-3-8b")
    (costed,) = workload_costs(_two_types(), [job], {}, None)
    assert [c.instance_type for c in costed.costs] == ["p5.48xlarge"]
    assert costed.left_out == [f"inf2.48xlarge: {WHY}"]
