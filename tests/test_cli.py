"""The command line: exit codes, JSON contracts, one-line errors, no traceback, no torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import mini_catalog_data, write_catalog


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "advisor", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=60,
    )


def test_recommend_json_contract() -> None:
    p = run(
        "recommend",
        "--workload",
        "large_scale_training",
        "--memory-gb",
        "80",
        "--interconnect-gb-s",
        "900",
        "--show-rejected",
        "--json",
    )
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["recommendations"] and "rejected" in data
    rec = data["recommendations"][0]
    for key in (
        "instance_type",
        "accelerator",
        "gpu_count",
        "hourly_usd",
        "region",
        "score",
        "reasons",
    ):
        assert key in rec
    # Of today's GPUs only Hopper SXM (H100 80 GB, H200 141 GB: 900 GB/s NVLink 4 each) and
    # Blackwell B200 (180 GB, 1,800 GB/s NVLink 5), per NVIDIA's datasheets, meet both 80 GB and
    # 900 GB/s; MI300X's 896 GB/s falls short; B300, GB200/GB300 (NVLink 5) and MI355X (Infinity
    # Fabric 7 x 153.6 = 1,075 GB/s) meet them.
    meet = {"h100-sxm", "h200-sxm", "b200", "b300", "gb200", "gb300", "mi355x"}
    assert {r["accelerator"] for r in data["recommendations"]} <= meet
    # large_scale_training ranks by price: cheapest first, scores falling
    hourly = [r["hourly_usd"] for r in data["recommendations"]]
    assert hourly == sorted(hourly)
    scores = [r["score"] for r in data["recommendations"]]
    assert scores == sorted(scores, reverse=True) and scores[0] == 1.0
    assert all(r["reasons"] for r in data["recommendations"])
    assert data["rejected"], "CPU-only and smaller GPUs are rejected, with reasons"
    assert all(r["id"] and r["reasons"] for r in data["rejected"])
    rejected = {r["id"] for r in data["rejected"]}
    assert "g5.xlarge" in rejected  # one A10G, 24 GB: short of 80 GB


def test_recommend_table_shows_reasons() -> None:
    p = run("recommend", "--workload", "edge_inference", "--power-budget-w", "25")
    assert p.returncode == 0
    # Jetson Orin NX 16GB's fastest mode is 25 W (NVIDIA's module datasheet): it fits the budget
    assert "jetson-orin-nx-16gb (25W mode)" in p.stdout
    assert "in its 25W power mode draws 25 W, within the 25 W budget" in p.stdout
    assert "jetson-agx-orin-64gb (50W mode)" not in p.stdout  # over the budget: not offered


def test_no_recommendation_exits_1_and_explains() -> None:
    p = run("recommend", "--workload", "edge_inference", "--power-budget-w", "1", "--json")
    assert p.returncode == 1
    data = json.loads(p.stdout)
    assert data["recommendations"] == [] and "power budget" in data["explanation"]
    assert data["alternatives"][0]["constraint"] == "power_budget_w"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["recommend", "--workload", "edge_inferenc"], "did you mean 'edge_inference'"),
        # the CLI names the field by its flag (errors in the words of the interface)
        (["recommend", "--workload", "fine_tuning", "--memory-gb", "-5"], "--memory-gb:"),
        (
            ["recommend", "--workload", "fine_tuning", "--region", "mars-1"],
            "unknown region 'mars-1'",
        ),
        (["recommend", "--workload", "fine_tuning", "--objective", "fastest"], "valid: cheapest"),
        (["recommend", "--workload", "fine_tuning", "--purchase", "yearly"], "purchase"),
        (["catalog", "show", "h100-sxn"], "did you mean 'h100-sxm'"),
        (["catalog", "instances", "--provider", "amazon"], "valid: aws"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], needle: str) -> None:
    p = run(*args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert needle in p.stderr
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_debug_shows_traceback() -> None:
    p = run("--debug", "recommend", "--workload", "nope")
    assert p.returncode == 2 and "Traceback" in p.stderr


def test_invalid_user_catalog_exits_2_naming_file(tmp_path: Path) -> None:
    data = mini_catalog_data()
    data["accelerators"][0]["memry_gb"] = 1
    write_catalog(tmp_path / "c", data)
    p = run("--catalog", str(tmp_path / "c"), "--replace-catalog", "catalog", "validate")
    assert p.returncode == 2
    assert "catalog.yaml: big: memry_gb: unknown field (did you mean 'memory_gb'?)" in p.stderr


def test_catalog_env_var(tmp_path: Path) -> None:
    write_catalog(tmp_path / "c", mini_catalog_data())
    p = run(
        "catalog",
        "accelerators",
        "--json",
        env={"ADVISOR_CATALOG": str(tmp_path / "c"), "ADVISOR_CATALOG_MODE": "replace"},
    )
    assert p.returncode == 0, p.stderr
    assert {a["id"] for a in json.loads(p.stdout)} == {"big", "small", "cpu-x", "edge-a", "edge-b"}


def test_catalog_commands_json() -> None:
    accs = json.loads(run("catalog", "accelerators", "--json").stdout)
    assert {
        "id",
        "name",
        "vendor",
        "form_factor",
        "memory_gb",
        "memory_bandwidth_gbps",
        "peak_tflops",
        "tdp_w",
        "interconnect_gb_s",
        "source",
    } <= set(accs[0])
    its = json.loads(
        run("catalog", "instances", "--provider", "aws", "--region", "us-east-1", "--json").stdout
    )
    assert its and all(i["provider"] == "aws" for i in its)
    assert all(p["region"] == "us-east-1" for i in its for p in i["prices"])
    one = json.loads(run("catalog", "show", "p5.48xlarge", "--json").stdout)
    assert one["accelerator"] == "h100-sxm" and one["gpu_count"] == 8


# (case guarded, arguments, words that one line of the output must hold together)
TABLES = [
    ("every accelerator is listed by id", ["catalog", "accelerators"], ["h100-sxm", "80"]),
    ("instance types with their provider", ["catalog", "instances"], ["p5.48xlarge", "aws"]),
    # H100 SXM: 80 GB, L4: 72 W, on NVIDIA's datasheets
    ("one entry, field by field", ["catalog", "show", "l4"], ["tdp_w", "72"]),
    ("validation states its result", ["catalog", "validate"], ["catalog OK: "]),
]


@pytest.mark.parametrize(("args", "text"), [t[1:] for t in TABLES], ids=[t[0] for t in TABLES])
def test_tables_render(args: list[str], text: list[str]) -> None:
    p = run(*args)
    assert p.returncode == 0, (args, p.stderr)
    lines = (p.stdout + p.stderr).splitlines()  # validate's stream is another helper's change
    assert any(all(word in line for word in text) for line in lines), p.stdout


def test_recommend_imports_neither_torch_nor_fastapi() -> None:
    """Nor, with --json, the table renderer (rich) or the HTTP client (only --server needs it):
    imports are most of a command's wall time (benchmarks/bench_recommend.py)."""
    code = (
        "import sys\n"
        "from advisor.cli import main\n"
        "try:\n    main(['recommend', '--workload', 'fine_tuning', '--json'])\n"
        "except SystemExit:\n    pass\n"
        "heavy = ('torch', 'fastapi', 'pynvml', 'uvicorn', 'rich', 'httpx', 'advisor.http_client')\n"
        "bad = [m for m in heavy if m in sys.modules]\n"
        "sys.stderr.write(repr(bad))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stderr.strip().endswith("[]"), p.stderr


def test_an_unsized_recommend_loads_no_performance_model() -> None:
    """A request sized by memory alone needs the planners' limits (advisor/planning/limits.py),
    not the serving or training models, the serving simulation, a config.json's reader or the
    fleet's calibration: those load only for sized work, a config.json or --server (start-up,
    benchmarks/bench_startup.py)."""
    code = (
        "import sys\n"
        "from advisor.cli import main\n"
        "try:\n    main(['recommend', '--workload', 'high_throughput_inference',"
        " '--memory-gb', '20', '--json'])\n"
        "except SystemExit:\n    pass\n"
        "models = ('advisor.perf.inference', 'advisor.perf.training', 'advisor.planning.serving',"
        " 'advisor.planning.training_plan', 'advisor.perf.correction', 'advisor.perf.serving_sim',"
        " 'advisor.perf.work', 'advisor.planning.fit', 'advisor.perf.calibration',"
        " 'advisor.catalog.hf_config',"
        # the cross-checks and the curated sections (node facts, price sanity) only when the
        # catalog is read from YAML, not from the cache (warmed below)
        " 'advisor.catalog.cross_checks', 'advisor.catalog.curation')\n"
        "sys.stderr.write(repr([m for m in models if m in sys.modules]))\n"
    )
    assert run("recommend", "--workload", "fine_tuning", "--json").returncode == 0  # the cache
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stderr.strip().endswith("[]"), p.stderr


def test_an_unset_option_builds_no_coercion() -> None:
    """Typer builds an option's coercion (a pydantic TypeAdapter) when it parses the command
    line; advisor/cli/__init__.py has it built only for an option with a value to coerce, and an
    unset option still comes to the command as None, a missing required one is still an
    error."""
    from typer._click.exceptions import MissingParameter
    from typer.main import get_command

    from advisor.cli import build_app

    root = get_command(build_app("recommend"))
    args = ["recommend", "--workload", "fine_tuning", "--gpu-count", "8", "--json"]
    ctx = root.make_context("advisor", list(args))
    command = root.get_command(ctx, "recommend")  # type: ignore[attr-defined]
    assert command is not None
    params = command.make_context("recommend", args[1:], parent=ctx).params
    assert params["gpu_count"] == 8 and params["workload"] == "fine_tuning"
    assert params["memory_gb"] is None and params["recompute"] is None
    built = {p.name for p in command.params if p._runtime_param is not None}
    assert built <= {name for name, value in params.items() if value is not None}, built
    assert "gpu_count" in built and "memory_gb" not in built
    with pytest.raises(MissingParameter):
        command.make_context("recommend", ["--json"], parent=ctx)


def test_the_cli_runs_on_a_typer_without_the_parameter_class_it_tunes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The command line tunes typer's parameter processing where typer has the class it tunes
    (typer.core._TyperParameter); where typer has none (another version, as on the GPU image,
    whose CLI stopped at that import), the tuning is left out and the CLI builds as before."""
    import typer.core

    from advisor.cli import _coerce_given_values_only, build_app

    monkeypatch.delattr(typer.core, "_TyperParameter")
    assert _coerce_given_values_only() is None
    assert build_app(only="recommend") is not None
