"""`advisor compare TYPE TYPE...`: the same request estimated on each type, side by side."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from advisor.cli import app, main

REQUEST = ["-w", "fine_tuning", "-m", "llama-3-8b", "--tokens", "2e9"]


def _json(*args: str) -> dict:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_each_column_is_the_estimate_of_that_type() -> None:
    types = ["p5.48xlarge", "gpu_8x_h100_sxm5"]
    compared = _json("compare", *types, *REQUEST)["compared"]
    assert [c["hardware"]["instance_type"] for c in compared] == types
    for column, it in zip(compared, types, strict=True):
        assert column == _json("estimate", *REQUEST, "--instance-type", it)
        # cost = hours x $/h of the rented nodes (by hand from the two figures shown)
        assert column["cost_usd"] == pytest.approx(column["hours"] * column["hourly_usd"])
    # the same H100 SXM node at $31.92/h (Lambda) against $55.04/h (AWS): same hours, and the
    # cost in the ratio of the prices
    aws, lam = compared
    assert lam["hours"] == pytest.approx(aws["hours"])
    assert lam["cost_usd"] / aws["cost_usd"] == pytest.approx(31.92 / 55.04)


def test_the_table_names_every_type() -> None:
    result = CliRunner().invoke(app, ["compare", "p5.48xlarge", "BM.GPU.MI300X.8", *REQUEST])
    assert result.exit_code == 0, result.output
    assert "p5.48xlarge" in result.output and "BM.GPU.MI300X.8" in result.output
    assert "$55.04" in result.output and "$48.00" in result.output


def test_compare_needs_two_types(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["compare", "p5.48xlarge", *REQUEST])
    assert exc.value.code == 2  # bad usage
    assert "two or more instance types" in capsys.readouterr().err
