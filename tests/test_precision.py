"""The one precision rule (advisor/perf/precision.py) and where it refuses: the engine's
PRECISION_UNSUPPORTED constraint, `advisor estimate` (exit 2) and POST /v1/estimates (422, the
status the API gives every InputError).

Independent facts (vendor datasheets, also recorded in catalog/accelerators.yaml):
- A100 (Ampere) Tensor Cores: TF32, BF16, FP16, INT8, INT4; no FP8. Dense bf16/fp16 312 TFLOP/s.
- H100 SXM5 (Hopper): FP8 3,958 TFLOP/s with sparsity, 1,979 dense.
- L4 (Ada): FP8 485 TFLOP/s with sparsity, 242.5 dense.
- T4 (Turing): FP16 65 TFLOP/s mixed-precision Tensor Core, INT8 130 TOPS; no BF16, no FP8.
- A10G: GA102 (Ampere), no FP8.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from advisor import Catalog, InputError, Workload, recommend
from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.perf.precision import (
    ComputePrecision,
    Unsupported,
    compute_precision,
    key_peak,
    require_precision,
)

CASES = [
    # Ampere has no fp8: refused, and the reason lists what it runs
    ("a100-80gb-sxm", "fp8", None, 0.0),
    # Hopper runs fp8 natively at the dense figure (1,979 = 3,958 sparse / 2)
    ("h100-sxm", "fp8", "fp8", 1979.0),
    # Turing has no bf16: refused rather than silently computed in fp16
    ("t4", "bf16", None, 0.0),
    # ... but int4 weight-only runs on T4, dequantised to fp16 (65 TFLOP/s dense)
    ("t4", "int4", "fp16", 65.0),
    # int8 weight-only on T4 likewise computes in fp16, not at the int8 TOPS rate
    ("t4", "int8", "fp16", 65.0),
    # Ada (L4) runs fp8: 485 sparse / 2
    ("l4", "fp8", "fp8", 242.5),
    # Ada (L40S) runs fp8: 1,466 sparse / 2 = 733
    ("l40s", "fp8", "fp8", 733.0),
    # A10G (Ampere) has no fp8
    ("a10g", "fp8", None, 0.0),
    # int4 weight-only on an A100 computes in bf16 (312 dense), not fp16
    ("a100-80gb-sxm", "int4", "bf16", 312.0),
    # bf16 on an A100 is native
    ("a100-40gb-sxm", "bf16", "bf16", 312.0),
    # MI300X (CDNA3) runs fp8: 2,614.9 dense
    ("mi300x", "fp8", "fp8", 2614.9),
]


@pytest.mark.parametrize(("acc_id", "weights", "used", "peak"), CASES)
def test_precision_rule(
    shipped: Catalog, acc_id: str, weights: str, used: str | None, peak: float
) -> None:
    acc = shipped.accelerators[acc_id]
    found = compute_precision(acc, weights)
    if used is None:
        assert isinstance(found, Unsupported)
        assert f"no {weights}" in found.reason and acc.name in found.reason
        assert weights not in found.reason.split("it runs: ")[1].split(", ")
    else:
        assert isinstance(found, ComputePrecision)
        assert (found.precision, found.peak_tflops) == (used, pytest.approx(peak))
        # a note exactly when the matmuls run in another precision than the weights are stored
        assert (found.note is not None) == (used != weights)


def test_refusal_names_what_the_part_runs(shipped: Catalog) -> None:
    with pytest.raises(InputError) as err:
        require_precision(shipped.accelerators["t4"], "bf16")
    message = str(err.value)
    assert "precision bf16 is not supported" in message
    assert "fp16" in message and "int8/int4 weight-only (computed in fp16)" in message


def test_weight_only_without_a_16_bit_rate_is_refused(shipped: Catalog) -> None:
    # Hailo-8 publishes only an int8 rate: nothing to dequantise int4 weights to.
    found = compute_precision(shipped.accelerators["hailo-8"], "int4")
    assert isinstance(found, Unsupported) and "no bf16 or fp16" in found.reason


def test_profile_key_precision_is_shown_at_what_the_part_runs(shipped: Catalog) -> None:
    # Ranking work without a model: fp8 on an A100 is shown at its fp16 rate, labelled so.
    assert key_peak(shipped.accelerators["a100-80gb-sxm"], "fp8") == ("fp16", 312.0)
    assert key_peak(shipped.accelerators["h100-sxm"], "fp8") == ("fp8", 1979.0)


# -- the engine ---------------------------------------------------------------------------------

# Ampere and Turing have no fp8 tensor cores (NVIDIA's datasheets print no fp8 rate); Google's
# TPU v5e/v5p/v6e pages state bf16 and int8 rates only.
NO_FP8 = {
    "a100-40gb-sxm",
    "a100-80gb-sxm",
    "a100-80gb-pcie",
    "a10",
    "a10g",
    "t4",
    "tpu-v5e",
    "tpu-v5p",
    "tpu-v6e",
}


def test_engine_never_recommends_fp8_on_hardware_without_it(shipped: Catalog) -> None:
    request = Workload(workload="high_throughput_inference", model="llama-2-70b", precision="fp8")
    result = recommend(shipped, request)
    assert result.recommendations
    assert not {r.accelerator for r in result.recommendations} & NO_FP8
    refused = {
        shipped.instance_types[r.id].accelerator
        for r in result.rejected
        if "PRECISION_UNSUPPORTED" in r.codes
    }
    assert not {r.id for r in result.rejected if "PRECISION_UNSUPPORTED" in r.codes} - set(
        shipped.instance_types
    )
    # every GPU type without fp8 that the catalog offers is refused for it, none with fp8
    offered = {i.accelerator for i in shipped.instance_types.values() if i.accelerator}
    assert refused == NO_FP8 & offered
    a100 = next(
        r for r in result.rejected if shipped.instance_types[r.id].accelerator == "a100-80gb-sxm"
    )
    reason = a100.reasons[a100.codes.index("PRECISION_UNSUPPORTED")]
    assert reason.startswith("NVIDIA A100 SXM4 80GB (ampere) has no fp8 matrix/tensor units")


def test_engine_refuses_bf16_on_t4_but_runs_int4_weight_only(shipped: Catalog) -> None:
    t4_types = {i.id for i in shipped.instance_types.values() if i.accelerator == "t4"}

    def refused(precision: str) -> set[str]:
        request = Workload(
            workload="low_latency_inference", model="llama-2-7b", precision=precision
        )  # type: ignore[arg-type]
        result = recommend(shipped, request)
        return {r.id for r in result.rejected if "PRECISION_UNSUPPORTED" in r.codes}

    # Turing has no bf16: every T4 type refused for it
    assert refused("bf16") == t4_types
    # int4 weight-only is computed at fp16 there: no precision refusal at all
    assert refused("int4") == set()


# -- estimate: CLI exit 2, HTTP 422 (the API's status for an InputError) ---------------------------------------------------------------

FP8_ON_A100 = [
    "--workload",
    "high_throughput_inference",
    "--model",
    "llama-2-70b",
    "--precision",
    "fp8",
    "--accelerator",
    "a100-80gb-sxm",
    "--gpu-count",
    "8",
]


def test_estimate_cli_refuses_unsupported_precision() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "advisor", "estimate", *FP8_ON_A100],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2, p.stderr
    assert "precision fp8 is not supported" in p.stderr
    assert "it runs: fp64, fp32, tf32, bf16, fp16" in p.stderr


def test_estimate_api_refuses_unsupported_precision(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/p.db", api_tokens=("t",))  # type: ignore[arg-type]
    body = {
        "workload": "high_throughput_inference",
        "model": "llama-2-70b",
        "precision": "fp8",
        "accelerator": "a100-80gb-sxm",
        "gpus_per_node": 8,
    }
    with TestClient(create_app(settings)) as client:
        r = client.post("/v1/estimates", json=body, headers={"Authorization": "Bearer t"})
        assert r.status_code == 422, r.text
        assert "no fp8 matrix/tensor units" in r.text
        ok = client.post(
            "/v1/estimates",
            json={**body, "accelerator": "h100-sxm"},
            headers={"Authorization": "Bearer t"},
        )
        assert ok.status_code == 200, ok.text


def test_training_is_sized_as_16_bit_mixed_precision_not_refused(shipped: Catalog) -> None:
    # Adapter training computes at the bf16, else fp16, rate (T4: fp16 65 TFLOP/s): LoRA is not
    # refused for the precision. A full-weight bf16 job is refused exactly on the GPUs without a
    # bf16 rate (the request asked for bf16, not fp16 mixed precision with loss scaling).
    lora = Workload(workload="fine_tuning", model="llama-2-7b", precision="bf16", method="lora")
    result = recommend(shipped, lora)
    assert all("PRECISION_UNSUPPORTED" not in r.codes for r in result.rejected)
    full = recommend(shipped, lora.model_copy(update={"method": "full", "show_rejected": True}))
    refused = {r.id for r in full.rejected if "PRECISION_UNSUPPORTED" in r.codes}
    no_bf16 = {
        it.id
        for it in shipped.instance_types.values()
        if it.accelerator
        and shipped.accelerators[it.accelerator].form_factor.value == "datacenter"
        and shipped.accelerators[it.accelerator].peak_tflops.bf16 is None
    }
    assert refused and refused <= no_bf16
