"""Validation the documentation promises (tensor-parallel degrees, flags that do nothing,
NaN, "did you mean" within a family) and the conventions people expect (--version, short
flags, JSON errors, imports that write where they are told)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor import __version__
from advisor.did_you_mean import did_you_mean


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "advisor", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )


def one_line_error(p: subprocess.CompletedProcess[str], *texts: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert p.stderr.startswith("error: ") and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "Traceback" not in p.stderr
    for text in texts:
        assert text in p.stderr, p.stderr


SERVE_70B = ["--workload", "high_throughput_inference", "--model", "llama-3.1-70b"]


def test_tensor_parallel_must_divide_the_heads() -> None:
    """Llama 3.1 70B has 64 attention heads (catalog/models.yaml, from its config.json): TP 3
    splits none of them evenly; the divisors of 64 up to the cap of 64 are the valid degrees."""
    for command in (
        ["recommend", *SERVE_70B, "--tensor-parallel", "3"],
        ["estimate", *SERVE_70B, "--instance-type", "p5.48xlarge", "--tensor-parallel", "3"],
        ["estimate", *SERVE_70B, "-a", "h100-sxm", "-g", "8", "--tensor-parallel", "3"],
    ):
        one_line_error(
            run(*command),
            "--tensor-parallel 3 must divide llama-3.1-70b's 64 attention heads",
            "valid degrees are 1, 2, 4, 8, 16, 32, 64",
        )


def test_tensor_parallel_must_divide_a_node() -> None:
    """TP 8 divides the heads but not g6e.12xlarge's 4 GPUs; TP 16 exceeds p5's node of 8."""
    one_line_error(
        run("estimate", *SERVE_70B, "-i", "g6e.12xlarge", "--tensor-parallel", "8"),
        "must divide 4 GPUs and the 4 of a node: valid degrees are 1, 2, 4",
    )
    one_line_error(
        run("estimate", *SERVE_70B, "-i", "p5.48xlarge", "--tensor-parallel", "16"),
        "valid degrees are 1, 2, 4, 8",
    )


def test_a_valid_tensor_parallel_degree_still_answers() -> None:
    p = run("estimate", *SERVE_70B, "-i", "p5.48xlarge", "--tensor-parallel", "4", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["tensor_parallel"] == 4


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--workload", "fine_tuning", "--tokens", "2e9"], "--tokens sizes the work from a model"),
        (
            [
                "--workload",
                "high_throughput_inference",
                "--input-tokens",
                "5",
                "--concurrency",
                "2",
            ],
            "--input-tokens, --concurrency size the work from a model",
        ),
        (
            ["--workload", "high_throughput_inference", "--model", "llama-3-8b", "--tokens", "2e9"],
            "--tokens: training only",
        ),
    ],
    ids=["tokens without a model", "serving fields without a model", "tokens when serving"],
)
def test_flags_that_would_do_nothing_are_refused(args: list[str], text: str) -> None:
    one_line_error(run("recommend", *args), text)


def test_the_same_rule_holds_over_http(tmp_path: Path) -> None:
    """One rule for the CLI and the API (advisor.request.refuse_idle_fields): a 422 there."""
    from fastapi.testclient import TestClient

    from advisor.api import create_app
    from tests.test_api import settings

    with TestClient(create_app(settings(tmp_path))) as client:
        r = client.post("/v1/recommendations", json={"workload": "fine_tuning", "tokens": 2e9})
    assert r.status_code == 422, r.text
    assert "tokens sizes the work from a model" in r.json()["detail"]


@pytest.mark.parametrize("value", ["nan", "NaN", "inf"])
def test_nan_is_not_a_number(value: str) -> None:
    p = run("recommend", "--workload", "fine_tuning", "--memory-gb", value)
    word = "not a number" if "n" in value.lower()[:1] else "not a finite number"
    one_line_error(p, f"--memory-gb: {float(value)!r} is {word}")
    assert "unit" not in p.stderr


@pytest.mark.parametrize(
    ("word", "choices", "expected"),
    [
        ("h200", ["b200", "h200-nvl", "h200-sxm", "h100-sxm"], "one of 'h200-nvl', 'h200-sxm'"),
        ("h100-sxn", ["h100-sxm", "h100-nvl"], "'h100-sxm'"),  # a typo: similarity
        (
            "europe",
            [f"europe-west{i}" for i in range(1, 10)] + ["eu-west-1", "us-east-1"],
            "one of 'europe-west1', 'europe-west2', 'europe-west3', 'europe-west4' and 5 more",
        ),
    ],
)
def test_did_you_mean_prefers_the_family(word: str, choices: list[str], expected: str) -> None:
    assert did_you_mean(word, choices) == f" (did you mean {expected}?)"


def test_probe_expect_suggests_the_h200s() -> None:
    p = run("probe", "--expect", "h200")
    assert p.returncode == 2
    assert "did you mean one of 'h200-nvl', 'h200-sxm'" in p.stderr and "b200" not in p.stderr


def test_version() -> None:
    for flag in ("--version", "-V"):
        p = run(flag)
        assert p.returncode == 0 and p.stdout == f"advisor {__version__}\n"


def test_short_flags_mean_the_long_ones() -> None:
    long = run(
        "recommend", "--workload", "fine_tuning", "--model", "llama-3-8b", "--region",
        "us-east-1", "--purchase", "any", "--limit", "3", "--objective", "cheapest", "--json",
    )  # fmt: skip
    short = run(
        "recommend", "-w", "fine_tuning", "-m", "llama-3-8b", "-r", "us-east-1", "-p", "any",
        "-n", "3", "-o", "cheapest", "-j",
    )  # fmt: skip
    assert long.returncode == short.returncode == 0, short.stderr
    assert long.stdout == short.stdout
    assert len(json.loads(short.stdout)["recommendations"]) == 3


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["recommend", "--workload", "fine_tuning", "--purchase", "x"], "purchase"),
        (["recommend", "--workload", "fine_tuning", "--memory-gb", "nan"], "memory_gb"),
        (["recommend", "--workload", "fine_tunin"], None),
        (["recommend", "--memory-gb", "3"], "--workload"),  # a usage error: the option
        (["recommend", "--workload", "fine_tuning", "--memroy-gb", "3"], "--memroy-gb"),
        (SERVE := ["recommend", *SERVE_70B, "--tensor-parallel", "3"], "tensor_parallel"),
    ],
)
def test_json_errors_are_json(args: list[str], field: str | None) -> None:
    """With --json (or -j, or --format json) a bad input is one JSON object on stderr, stdout
    empty, exit 2; "field" names the request field (or, for a usage error, the option)."""
    for flag in (["--json"], ["-j"], ["--format", "json"]):
        p = run(*args, *flag)
        assert p.returncode == 2, p.stderr
        assert p.stdout == ""
        body = json.loads(p.stderr)
        assert set(body) >= {"error", "field", "exit_code"} and body["exit_code"] == 2
        assert body["field"] == field, body
        assert body["error"] and not body["error"].startswith("error:")


def test_usage_errors_are_one_line() -> None:
    """Click's framed panel becomes advisor's one line, naming the option and where help is."""
    p = run("recommend", "--workload", "fine_tuning", "--format", "xml")
    one_line_error(p, "'--format'", "'xml'", "see 'advisor recommend --help'")
    one_line_error(run("recommend", "--memory-gb", "3"), "Missing option '--workload'")


def test_import_writes_only_where_told(tmp_path: Path) -> None:
    csv = Path(__file__).parent / "data" / "skypilot" / "aws" / "vms.csv"
    shipped = Path(__file__).parents[1] / "catalog" / "instances" / "aws.yaml"
    before = shipped.read_bytes()
    p = run("catalog", "import", "skypilot", str(csv), "--provider", "aws")
    one_line_error(p, "--out DIR: name the directory to write into")
    assert shipped.read_bytes() == before
    told = run("catalog", "import", "skypilot", str(csv), "--provider", "aws", "-o", str(tmp_path))
    assert told.returncode == 0, told.stderr
    assert (tmp_path / "aws.yaml").exists() and shipped.read_bytes() == before


def _offerings(*region: str) -> set[tuple[str, str]]:
    p = run(
        "recommend", "-w", "fine_tuning", "--memory-gb", "80", "-p", "any", "--each-offering",
        "--limit", "1000", "-r", ",".join(region), "-j",
    )  # fmt: skip
    assert p.returncode in (0, 1), p.stderr  # 1: nothing there
    data = json.loads(p.stdout)
    assert len(data["recommendations"]) == data["feasible_count"]  # every offering listed
    return {(r["instance_type"], r["region"]) for r in data["recommendations"]}


def test_several_regions_are_the_union_of_each() -> None:
    both = _offerings("us-east-1", "eu-west-1")
    assert both == _offerings("us-east-1") | _offerings("eu-west-1")
    assert {region for _, region in both} == {"us-east-1", "eu-west-1"}


@pytest.mark.slow
def test_a_region_prefix_is_every_region_it_starts() -> None:
    from advisor import load_catalog

    europe = sorted(r for r in load_catalog().regions if r.startswith("europe-"))
    assert len(europe) > 3
    got = _offerings("europe-*")
    assert {region for _, region in got} <= set(europe)
    union: set[tuple[str, str]] = set()
    for region in europe:
        union |= _offerings(region)
    assert got == union


def test_bad_region_specs_are_refused() -> None:
    one_line_error(run("recommend", "-w", "fine_tuning", "-r", "mars-*"), "'mars-*' matches no")
    one_line_error(
        run("recommend", "-w", "fine_tuning", "-r", "us-east-1,marz"), "unknown region 'marz'"
    )


def test_catalog_instances_takes_the_same_region_specs() -> None:
    from advisor import load_catalog

    catalog = load_catalog()
    p = run("catalog", "instances", "-r", "europe-*,eu-west-1", "-j")
    assert p.returncode == 0, p.stderr
    listed = json.loads(p.stdout)
    regions = {price["region"] for it in listed for price in it["prices"]}
    assert regions and all(r.startswith("europe-") or r == "eu-west-1" for r in regions)
    expected = {
        it.id
        for it in catalog.instance_types.values()
        if any(p.region.startswith("europe-") or p.region == "eu-west-1" for p in it.prices)
    }
    assert {it["id"] for it in listed} == expected
    one_line_error(run("catalog", "instances", "-r", "mars-*"), "'mars-*' matches no region")


def test_a_probe_that_cannot_run_says_so_in_json_with_json() -> None:
    """Exit 3 (cannot run) with --json: the same JSON error object as a bad input's."""
    p = run("probe", "--expect", "tpu-v6e", "--json")
    assert p.returncode == 3 and p.stdout == ""
    body = json.loads(p.stderr)
    assert body["exit_code"] == 3 and body["field"] == "expect" and body["flag"] == "--expect"
    assert "cannot measure tpu-v6e" in body["error"]
