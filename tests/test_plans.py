"""Plans typed by job: plan_for picks one plan type per question, each refuses what its job
cannot answer, and the walk goes one way (request -> plan -> perf): the performance model
imports neither planning nor the request models."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from advisor.catalog import Catalog
from advisor.errors import InputError
from advisor.perf.work import Work
from advisor.planning.plans import (
    FineTune,
    MemoryOnly,
    Plan,
    ServingDeployment,
    TrainingRun,
    plan_for,
)

PERF = Path(__file__).resolve().parents[1] / "advisor" / "perf"


def _plan(shipped: Catalog, workload: str, **fields: object) -> Plan:
    w = Work(workload=workload, **fields)  # type: ignore[arg-type]
    return plan_for(shipped, w, shipped.workloads[workload])


@pytest.mark.parametrize(
    ("workload", "fields", "kind"),
    [
        ("large_scale_training", {"model": "llama-3-8b", "tokens": 1e9}, TrainingRun),
        ("fine_tuning", {"model": "llama-3-8b", "tokens": 1e9}, TrainingRun),
        ("fine_tuning", {"model": "llama-3-8b", "method": "lora"}, FineTune),
        ("fine_tuning", {"params_b": 7.0, "method": "qlora"}, FineTune),
        ("high_throughput_inference", {"model": "llama-3-8b"}, ServingDeployment),
        ("low_latency_inference", {"params_b": 70.0}, MemoryOnly),
    ],
)
def test_each_question_gets_its_plan_type(
    shipped: Catalog, workload: str, fields: dict[str, object], kind: type[Plan]
) -> None:
    assert type(_plan(shipped, workload, **fields)) is kind


def test_a_fine_tune_trains_adapters_beside_a_frozen_base(shipped: Catalog) -> None:
    """The same model, GPUs and activations: the full run holds every weight's states (16 bytes
    a parameter, mixed-precision Adam), the LoRA fine-tune a frozen bf16 base (2 bytes a
    parameter) and its adapters' states. Worked by hand for Llama 3 8B (8.03B parameters;
    32 layers, hidden 4096, KV 1024, MLP 14336): rank-16 adapters on q, k, v, o, gate, up and
    down are 16 x (8192 + 5120 + 5120 + 8192 + 3 x 18432) x 32 = 41,943,040 parameters."""
    acc = shipped.accelerators["h100-sxm"]
    full = _plan(shipped, "fine_tuning", model="llama-3-8b", tokens=1e9).fit(acc, 8)
    lora = _plan(shipped, "fine_tuning", model="llama-3-8b", tokens=1e9, method="lora").fit(acc, 8)
    adapters = 16 * (8192 + 5120 + 5120 + 8192 + 3 * 18432) * 32
    expected = (8.03e9 * (16 - 2) - adapters * 16) / 1e9
    assert full.memory_total_gb - lora.memory_total_gb == pytest.approx(expected, rel=1e-3)


def test_a_served_bare_size_is_memory_only_and_refuses_latency(shipped: Catalog) -> None:
    with pytest.raises(InputError) as err:
        _plan(shipped, "low_latency_inference", params_b=70.0, max_itl_ms=20.0)
    assert err.value.field == "max_itl_ms"
    fit = _plan(shipped, "low_latency_inference", params_b=70.0).fit(
        shipped.accelerators["h100-sxm"], 8
    )
    # 70B in bf16 is 140 GB of weights: two 80 GB GPUs (72 GB usable each) a replica
    assert fit.itl_ms is None and fit.memory_per_gpu_gb == pytest.approx(70.0)


def test_a_serving_plan_refuses_a_training_method(shipped: Catalog) -> None:
    with pytest.raises(InputError) as err:
        _plan(shipped, "high_throughput_inference", model="llama-3-8b", method="lora")
    assert err.value.field == "method"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


@pytest.mark.parametrize("path", sorted(PERF.glob("*.py")), ids=lambda p: p.name)
def test_the_performance_model_never_calls_back_into_planning(path: Path) -> None:
    bad = {m for m in _imports(path) if m.startswith(("advisor.planning", "advisor.request"))}
    assert not bad, f"{path.name} imports {sorted(bad)}"
