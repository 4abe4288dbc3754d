"""Rankings that answer the question asked: a chip without the job's precision is not offered
for it (the T4 has no bf16 tensor-core rate: NVIDIA T4 datasheet lists FP16/INT8/INT4 only)."""

from __future__ import annotations

import pytest

from advisor import Catalog, Workload, recommend
from advisor.catalog import load_catalog


@pytest.fixture(scope="module")
def shipped() -> Catalog:
    return load_catalog()


def _accelerators(catalog: Catalog, **kw: object) -> set[str]:
    result = recommend(catalog, Workload(workload="fine_tuning", limit=1000, **kw))  # type: ignore[arg-type]
    return {r.accelerator for r in result.recommendations}


def test_a_full_bf16_fine_tune_is_never_offered_a_chip_without_bf16(shipped: Catalog) -> None:
    found = _accelerators(shipped, params_b=1)
    assert "t4" not in found and "l4" in found
    result = recommend(shipped, Workload(workload="fine_tuning", params_b=1, limit=1000))
    refused = {r.id: r for r in result.rejected}
    # the T4 offerings are refused for the precision, naming it
    assert any(
        r.codes == ("PRECISION_UNSUPPORTED",) and "bf16" in r.reasons[0]
        for i, r in refused.items()
        if "T4" in i or i.startswith("g4dn")
    )


@pytest.mark.parametrize("kw", [{"method": "qlora"}, {"method": "lora"}, {"precision": "fp16"}])
def test_adapters_or_fp16_still_run_on_a_t4(shipped: Catalog, kw: dict[str, str]) -> None:
    assert "t4" in _accelerators(shipped, params_b=1, **kw)


def test_fp8_training_is_refused_on_a_chip_without_fp8(shipped: Catalog) -> None:
    found = _accelerators(shipped, params_b=1, precision="fp8")
    assert "a100-80gb-sxm" not in found and "h100-sxm" in found
