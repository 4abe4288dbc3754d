"""`advisor recommend --emit skypilot|dstack`: the launch file of the best option, checked
against the schemas vendored in advisor/deploy/schemas/ (derived from SkyPilot's
sky/utils/schemas.py and dstack's configuration models)."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from advisor.cli import app
from advisor.deploy import launch

FINE_TUNE = ["-w", "fine_tuning", "-m", "llama-3-8b", "--tokens", "2e9", "-P", "aws"]
PRETRAIN = ["-w", "large_scale_training", "-m", "llama-3-70b", "--tokens", "1e12"]
PRETRAIN += ["--deadline-days", "83", "-P", "aws"]


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, ["recommend", *args])
    assert result.exit_code == 0, result.output
    return result.output


def _best(*args: str) -> dict:
    import json

    return json.loads(_run(*args, "--json"))["recommendations"][0]


def test_skypilot_task_pins_the_best_option() -> None:
    best = _best(*FINE_TUNE)
    task = yaml.safe_load(_run(*FINE_TUNE, "--emit", "skypilot"))
    res = task["resources"]
    assert (res["cloud"], res["region"], res["instance_type"]) == (
        "aws",
        best["region"],
        best["instance_type"],
    )
    # SkyPilot's accelerator name (the importer's table backwards) : GPUs per node
    name = launch.skypilot_name(best["accelerator"])
    assert res["accelerators"] == f"{name}:{best['gpu_count'] // best['nodes']}"
    assert res["use_spot"] is False and "num_nodes" not in task
    assert launch.problems(task, "skypilot") == []


def test_a_multi_node_plan_sets_the_node_count_in_both_files() -> None:
    best = _best(*PRETRAIN)
    assert best["nodes"] > 1
    sky = yaml.safe_load(_run(*PRETRAIN, "--emit", "skypilot"))
    assert sky["num_nodes"] == best["nodes"]
    dst = yaml.safe_load(_run(*PRETRAIN, "--emit", "dstack"))
    assert dst["nodes"] == best["nodes"] and dst["type"] == "task"
    assert dst["instance_types"] == [best["instance_type"]] and dst["regions"] == [best["region"]]
    assert dst["spot_policy"] == "on-demand"
    assert dst["resources"]["gpu"]["count"] == best["gpu_count"] // best["nodes"]
    assert launch.problems(dst, "dstack") == []


def test_spot_is_carried_over() -> None:
    args = [*FINE_TUNE, "--purchase", "spot"]
    assert yaml.safe_load(_run(*args, "--emit", "skypilot"))["resources"]["use_spot"] is True
    assert yaml.safe_load(_run(*args, "--emit", "dstack"))["spot_policy"] == "spot"


@pytest.mark.parametrize(
    ("kind", "bad", "found"),
    [
        ("skypilot", {"resources": {"gpus": "H100:8"}, "run": "x"}, "'gpus' was unexpected"),
        ("skypilot", {"resources": {"use_spot": "yes"}, "run": "x"}, "'yes' is not of type"),
        (
            "dstack",
            {"type": "task", "commands": ["x"], "resources": {}, "spot_policy": "cheap"},
            "'cheap' is not one of",
        ),
        ("dstack", {"type": "service", "commands": ["x"], "resources": {}}, "'task' was expected"),
    ],
)
def test_the_schemas_refuse_what_the_tools_refuse(kind: str, bad: dict, found: str) -> None:
    found_problems = launch.problems(bad, kind)  # type: ignore[arg-type]
    assert any(found in p for p in found_problems), found_problems


def test_an_edge_device_cannot_be_launched() -> None:
    result = CliRunner().invoke(app, ["recommend", "-w", "edge_inference", "--emit", "dstack"])
    assert result.exit_code != 0


# RunPod's names for the parts (catalogs/v8/runpod/vms.csv: <N>x_<name>_SECURE), by hand
RUNPOD_NAMES = {"h100-sxm": "H100-SXM", "h200-sxm": "H200-SXM", "b200": "B200", "mi300x": "MI300X"}


@pytest.mark.parametrize("accelerator", sorted(RUNPOD_NAMES))
def test_a_runpod_part_goes_by_runpods_own_name(accelerator: str) -> None:
    # RunPod calls the H100 SXM "H100-SXM" and the PCIe card "H100": "H100:8" there would ask
    # SkyPilot for eight PCIe cards. The other clouds keep their names.
    assert launch.skypilot_name(accelerator, "runpod") == RUNPOD_NAMES[accelerator]
    assert launch.skypilot_name("h100-pcie", "runpod") == "H100"
    assert launch.skypilot_name("h100-sxm", "aws") == "H100"
    assert launch.skypilot_name("h200-sxm", "gcp") == "H200"


def test_runpod_emits_for_skypilot_and_says_why_not_for_dstack() -> None:
    args = [*FINE_TUNE[:-2], "-P", "runpod"]
    best = _best(*args)
    res = yaml.safe_load(_run(*args, "--emit", "skypilot"))["resources"]
    assert (res["cloud"], res["region"], res["instance_type"]) == (
        "runpod",
        best["region"],
        best["instance_type"],
    )
    name = RUNPOD_NAMES[best["accelerator"]]
    assert res["accelerators"] == f"{name}:{best['gpu_count']}"
    result = CliRunner().invoke(app, ["recommend", *args, "--emit", "dstack"])
    assert result.exit_code != 0
    message = str(result.exception)
    assert "not one that dstack is written for here (aws, azure, gcp, lambda, oci)" in message


def test_a_runpod_h100_sxm_task_asks_for_h100_sxm() -> None:
    # The H100 SXM pod among RunPod's options: its task asks for "H100-SXM:8", not "H100:8".
    from advisor import load_catalog
    from advisor.engine.evaluation import recommend
    from advisor.request import Workload

    request = Workload(workload="fine_tuning", memory_gb=500, provider="runpod", limit=20)
    recs = recommend(load_catalog(), request).recommendations
    [h100] = [r for r in recs if r.instance_type == "8x_H100-SXM_SECURE"]
    task = launch.skypilot_task(h100, "x")
    assert task["resources"]["accelerators"] == "H100-SXM:8"
    assert launch.problems(task, "skypilot") == []


@pytest.mark.parametrize(
    ("purchase", "says"),
    [
        ("capacity_block", "buy the block first and launch into its capacity reservation"),
        ("reserved", "a billing discount on matching usage"),
    ],
)
def test_a_plan_priced_on_a_commitment_says_what_the_file_cannot(purchase: str, says: str) -> None:
    """A Capacity Block is capacity the instances must be launched into; a term is a discount
    that applies to usage launched the usual way: the file says which, above the task, and is the
    same task (spot off) as written for on demand."""
    args = [*FINE_TUNE, "--purchase", purchase]
    best = _best(*args)
    text = _run(*args, "--emit", "skypilot")
    comments = [line for line in text.splitlines() if line.startswith("#")]
    assert comments and says in " ".join(c.lstrip("# ") for c in comments)
    assert best["purchase"] in ("capacity_block", "reserved_1y", "reserved_3y")
    task = yaml.safe_load(text)
    assert task["resources"]["use_spot"] is False and launch.problems(task, "skypilot") == []
    plain = _run(*FINE_TUNE, "--emit", "skypilot")
    assert not [line for line in plain.splitlines() if line.startswith("#")]
