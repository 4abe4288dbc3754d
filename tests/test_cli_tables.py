"""Tables at 80 columns and in a pipe: ids and the column the rows are sorted by are whole;
`catalog validate` prints its result on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from advisor import load_catalog


def run(*args: str, columns: str | None = "80") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    # capture_output: stdout is a pipe, as in a log or `| less`
    return subprocess.run(
        [sys.executable, "-m", "advisor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _json(*args: str) -> Any:
    p = run(*args, "--json", columns="200")
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("columns", ["80", None], ids=["COLUMNS=80", "pipe default"])
def test_instance_ids_are_never_cut(columns: str | None) -> None:
    p = run("catalog", "instances", columns=columns)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    ids = [row["id"] for row in _json("catalog", "instances")]  # type: ignore[index, union-attr]
    # the longest shipped ids (Azure's, GCP's a3-highgpu-8g) are the ones that used to be cut
    assert any(len(i) > 20 for i in ids)
    for i in ids:  # a whole word of some line (the table has no frame: ids may start a line)
        assert any(i in line.split() for line in lines), f"{i} cut or missing"
    assert "…" not in p.stdout


def test_accelerator_ids_are_never_cut() -> None:
    p = run("catalog", "accelerators")
    ids = [a.id for a in load_catalog().accelerators.values()]
    for i in ids:
        assert any(i in line.split() for line in p.stdout.splitlines()), f"{i} cut or missing"


@pytest.mark.parametrize(
    ("args", "sort_header", "sort_field"),
    [
        (
            ["--workload", "fine_tuning", "--model", "llama-3-8b", "--tokens", "2e9"],
            "to completion",
            "cost_to_completion_usd",
        ),
        (
            ["--workload", "high_throughput_inference", "--model", "llama-3-8b"],
            "$/M tokens",
            "cost_per_million_tokens_usd",
        ),
    ],
    ids=["cost to completion", "$/M tokens"],
)
def test_recommend_keeps_ids_and_the_sort_column_whole(
    args: list[str], sort_header: str, sort_field: str
) -> None:
    p = run("recommend", *args, "--purchase", "any")
    assert p.returncode == 0, p.stderr
    data = _json("recommend", *args, "--purchase", "any")
    recs = data["recommendations"]  # type: ignore[index, call-overload]
    assert sort_header in p.stdout
    table = p.stdout.split("#1 ")[0]  # the table, before the reasons
    for r in recs:
        option = r["instance_type"]
        # the id and the figure the rows are sorted by (ranked_value: the sizing figure times
        # any soft-preference penalty, tests/test_cli_trust.py) on one row, both whole
        assert r["ranked_value"] == pytest.approx(r["sizing"][sort_field] * r["penalty_factor"])
        row = next(line.split() for line in table.splitlines() if option in line.split())
        shown = next(w for w in row if w.startswith("$"))
        assert float(shown.strip("$*=").replace(",", "")) == pytest.approx(
            r["ranked_value"], abs=0.005
        ), (option, shown)
    assert "…" not in table


def test_edge_device_ids_are_whole_at_80_columns() -> None:
    p = run("recommend", "--workload", "edge_inference", "--power-budget-w", "30")
    assert p.returncode == 0, p.stderr
    assert "jetson-orin-nx-16gb" in p.stdout and "…" not in p.stdout


def test_catalog_validate_prints_its_result_on_stdout() -> None:
    p = run("catalog", "validate")
    assert p.returncode == 0
    assert p.stdout.startswith("catalog OK:") and "catalog OK" not in p.stderr
