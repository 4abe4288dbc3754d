"""A property sweep of random valid training requests: every answer is physical or a clear
refusal (advisor/planning/estimate.py on advisor/perf/training.py)."""

from __future__ import annotations

import math

from hypothesis import event, given, settings
from hypothesis import strategies as st

from advisor import Catalog, InputError
from advisor.perf.headroom import usable_memory_gb
from advisor.perf.training import ATTENTION_EFFICIENCY, peak16_tflops
from advisor.planning.estimate import estimate
from advisor.request import EstimateRequest

GPUS = ["h100-sxm", "h200-sxm", "a100-80gb-sxm", "b200", "mi300x", "l40s"]


@settings(max_examples=50, deadline=None)
@given(
    params_b=st.floats(0.5, 500),
    tokens=st.floats(1e8, 2e13),
    gpu=st.sampled_from(GPUS),
    gpu_count=st.integers(1, 4096),
)
def test_random_training_requests_are_physical_or_refused(
    shipped: Catalog, params_b: float, tokens: float, gpu: str, gpu_count: int
) -> None:
    """Hours positive and finite and at least the model FLOPs at the whole peak (6ND / (GPUs x
    peak)); 0 < MFU < 1 and at most the larger of the planned GEMM efficiency and attention's
    0.65 (the share of the peak the kernels reach bounds the share of model FLOPs); memory per
    GPU within the usable device memory when it fits; otherwise fits is false with a reason, or
    the request is refused naming a field."""
    req = EstimateRequest(
        workload="large_scale_training",
        params_b=params_b,
        tokens=tokens,
        accelerator=gpu,
        gpu_count=gpu_count,
    )
    try:
        e = estimate(shipped, req)
    except InputError as exc:
        assert str(exc)
        event("refused")
        return
    acc = shipped.accelerators[gpu]
    if not e.fits:
        assert e.notes
    else:
        assert 0 < e.memory_per_gpu_gb <= usable_memory_gb(acc.device_memory_gb) + 1e-6
    event(f"fits={e.fits}, timed={e.hours is not None}")
    if e.hours is None:
        return
    assert math.isfinite(e.hours) and e.hours > 0
    peak = peak16_tflops(acc)
    assert peak
    floor_h = 6 * params_b * 1e9 * tokens / (e.hardware.gpus * peak * 1e12) / 3600
    assert e.hours >= floor_h * (1 - 1e-9)
    assert e.mfu is not None and 0 < e.mfu < 1
    assert e.mfu <= max(e.efficiency, ATTENTION_EFFICIENCY) + 1e-9
    if e.fits:
        assert e.hours < 24 * 365 * 1000  # never the millions of hours of an unrunnable plan
