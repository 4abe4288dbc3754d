"""A model given as its Hugging Face config.json, or as two sizes, through the command line:
the same answers as the matching preset; bad files and configs refused naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_planning_questions import run

CONFIGS = Path(__file__).resolve().parent.parent / "catalog" / "model_configs"
KEYS = ("fits", "ttft_ms", "itl_ms", "throughput_tokens_s", "memory_per_gpu_gb", "tensor_parallel")


@pytest.mark.parametrize("model", ["qwen3-32b", "qwen3-235b-a22b", "deepseek-v3.1"])
def test_a_config_answers_as_its_preset(model: str) -> None:
    """One dense, one GQA mixture of experts, one MLA mixture of experts."""
    ask = ("estimate", "-w", "high_throughput_inference", "-a", "h200-sxm", "-g", "8",
           "--precision", "fp8", "--json")  # fmt: skip
    by_config = run(*ask, "--hf-config", str(CONFIGS / f"{model}.json"))
    by_preset = run(*ask, "-m", model)
    assert by_config.returncode == by_preset.returncode == 0, by_config.stderr
    a, b = json.loads(by_config.stdout), json.loads(by_preset.stdout)
    assert {k: a[k] for k in KEYS} == {k: b[k] for k in KEYS}
    assert a["model"] == model  # named by its file


def test_a_checkpoint_folder_names_the_model(tmp_path: Path) -> None:
    folder = tmp_path / "Qwen3-32B"
    folder.mkdir()
    (folder / "config.json").write_text((CONFIGS / "qwen3-32b.json").read_text())
    p = run("estimate", "-w", "low_latency_inference", "-a", "h100-sxm", "--json",
            "--hf-config", str(folder / "config.json"))  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["model"] == "Qwen3-32B"


def test_a_bad_config_is_exit_2_naming_the_flag_and_key(tmp_path: Path) -> None:
    cfg = json.loads((CONFIGS / "qwen3-235b-a22b.json").read_text())
    del cfg["num_hidden_layers"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(cfg))
    p = run("estimate", "-w", "low_latency_inference", "-a", "h100-sxm", "--hf-config", str(bad))
    assert p.returncode == 2
    assert "--hf-config" in p.stderr and "num_hidden_layers" in p.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    p = run("estimate", "-w", "low_latency_inference", "-a", "h100-sxm", "--hf-config", str(broken))
    assert p.returncode == 2 and "--hf-config" in p.stderr and "not JSON" in p.stderr
    p = run("estimate", "-w", "low_latency_inference", "-a", "h100-sxm", "-m", "qwen3-32b",
            "--hf-config", str(CONFIGS / "qwen3-32b.json"))  # fmt: skip
    assert p.returncode == 2 and "not model and hf_config" in p.stderr.replace("--", "")


def test_active_params_make_a_bare_size_a_mixture_of_experts() -> None:
    """gpt-oss-120b by its two sizes (117B, 5.1B active): an assumed mixture of experts
    (sizing.assumed_moe_shape: 256 experts top-8), so a fine-tune's compute follows the active
    parameters, about 5.1 / 117 of the dense 117B's GPU-hours; every expert's weights and
    states stay, but the activations are a 5.1B-active model's and the experts may split over
    EP: less memory per GPU than the dense 117B's."""
    ask = ("estimate", "-w", "fine_tuning", "--params-b", "117", "-a", "h100-sxm", "-g", "64",
           "--tokens", "1e9", "--json")  # fmt: skip
    dense = json.loads(run(*ask).stdout)
    moe = json.loads(run(*ask, "--active-params-b", "5.1").stdout)
    assert moe["memory_per_gpu_gb"] < dense["memory_per_gpu_gb"]
    assumed = next(f for f in moe["figures"] if f["name"] == "assumed_layers")
    assert "256 experts" in assumed["formula"]
    # compute follows the active parameters; the gradients' all-reduce stays the dense size's
    assert moe["hours"] < dense["hours"] / 3
    wrong = run(*ask, "--active-params-b", "200")
    assert wrong.returncode == 2 and "--active-params-b" in wrong.stderr
