"""Which precision an accelerator computes a workload in, and at what dense peak. Pure.

The catalog states, per accelerator, the dense matrix/tensor-unit rate of each precision it runs
(`peak_tflops`); a precision left out has no such units (T4 and V100: no bf16; A100, A10G, T4: no
fp8). One rule reads it:

- fp32 / bf16 / fp16 / fp8 / fp4 (weights and activations in that format): computed in that
  precision where the accelerator has a rate for it, otherwise refused with a reason naming what
  it runs. fp4 is NVFP4 (Blackwell tensor cores: E2M1 values with an FP8 scale per 16), which
  only Blackwell parts list.
  A request's precision is never silently swapped for another.
- int8 / int4 *weight-only* quantisation (GPTQ, AWQ and the like): the weights are stored in
  8 or 4 bits and dequantised to a 16-bit compute precision inside the matmul kernel, so the
  matmuls run at the bf16 rate, else the fp16 rate (T4: fp16), and the note says so. Weight bytes
  shrink (memory and decode bandwidth), compute does not speed up. Sources: Frantar et al. 2022,
  GPTQ (arXiv:2210.17323) section 5, "weights are dequantized ... on the fly" in the fp16 kernel;
  Lin et al. 2023, AWQ (arXiv:2306.00978) section 4 (W4A16: 4-bit weights, 16-bit activations);
  TensorRT-LLM docs, "Numerical Precision" (INT4/INT8 weight-only: W4A16/W8A16).

`key_peak` serves the ranking of work *without* a model, whose profile names a key precision as
a hint (fp8 for high-throughput inference): there the nearest precision the part does run is
shown, labelled with the precision actually used.
"""

from __future__ import annotations

from typing import NamedTuple

from advisor.catalog.models import PRECISIONS, Accelerator
from advisor.errors import InputError

WEIGHT_ONLY = ("int8", "int4")  # weight-only quantisation: dequantised to a 16-bit compute rate
DEQUANTISE_TO = ("bf16", "fp16")  # the compute precision of weight-only kernels, in preference
REQUEST_PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "fp4", "int8", "int4")  # advisor/request.py


# A NamedTuple, not a frozen dataclass: the engine imports it for every request, and a dataclass
# takes several times as long to make (its methods are compiled when the class is).
class ComputePrecision(NamedTuple):
    """Supported: the precision the matmuls run in and its dense peak (TFLOP/s) on one chip."""

    precision: str
    peak_tflops: float
    note: str | None = None  # set when the compute precision differs from the weights'


class Unsupported(NamedTuple):  # a NamedTuple as ComputePrecision is
    """Refused: the sentence says why and what the accelerator runs instead."""

    reason: str


def supported_precisions(acc: Accelerator) -> tuple[str, ...]:
    """What a request may ask of the accelerator: the floating-point precisions it has a dense
    matrix/tensor-unit rate for, and int8/int4 weight-only where it has a 16-bit rate to
    dequantise to (request int8 means weight-only int8: advisor/request.py)."""
    native = tuple(p for p in PRECISIONS if p not in WEIGHT_ONLY and acc.peak_tflops.get(p))
    compute = next((p for p in DEQUANTISE_TO if acc.peak_tflops.get(p)), None)
    weight_only = (f"int8/int4 weight-only (computed in {compute})",) if compute else ()
    return native + weight_only


def compute_precision(acc: Accelerator, weights: str) -> ComputePrecision | Unsupported:
    """The one precision rule: how `acc` computes a model whose weights are in `weights`."""
    if weights in WEIGHT_ONLY:
        return _weight_only(acc, weights)
    peak = acc.peak_tflops.get(weights) if weights in PRECISIONS else None
    if peak:
        return ComputePrecision(weights, peak)
    return Unsupported(
        f"{acc.name} ({acc.generation.value}) has no {weights} matrix/tensor units; "
        f"it runs: {', '.join(supported_precisions(acc)) or 'none published'}"
    )


def _weight_only(acc: Accelerator, weights: str) -> ComputePrecision | Unsupported:
    for compute in DEQUANTISE_TO:
        peak = acc.peak_tflops.get(compute)
        if peak:
            note = (
                f"{weights} weight-only: weights are dequantised to {compute} in the matmul "
                f"kernel, so compute runs at the dense {compute} rate ({peak:g} TFLOP/s); "
                f"{weights} shrinks weight memory and bytes read, not FLOPs"
            )
            return ComputePrecision(compute, peak, note)
    return Unsupported(
        f"{acc.name} ({acc.generation.value}) has no bf16 or fp16 matrix rate to dequantise "
        f"{weights} weights to; it runs: {', '.join(supported_precisions(acc)) or 'none published'}"
    )


def require_precision(acc: Accelerator, weights: str) -> ComputePrecision:
    """`compute_precision`, raising InputError (CLI exit 2, HTTP 400) when refused."""
    found = compute_precision(acc, weights)
    if isinstance(found, Unsupported):
        raise InputError(f"precision {weights} is not supported: {found.reason}", field="precision")
    return found


# For ranking work without a model only: a profile's key precision on hardware lacking it is
# shown at the nearest wider format the hardware runs (never used for a request's precision).
_KEY_FALLBACK: dict[str, tuple[str, ...]] = {
    "fp64": ("fp64",),
    "fp32": ("fp32",),
    "tf32": ("tf32", "fp32"),
    "bf16": ("bf16", "fp16"),
    "fp16": ("fp16", "bf16"),
    "fp8": ("fp8", "fp16", "bf16"),
    "fp4": ("fp4", "fp8", "fp16", "bf16"),
    "int8": ("int8", "fp8", "fp16", "bf16"),
}


def key_peak(acc: Accelerator, key_precision: str) -> tuple[str, float]:
    """(precision used, dense peak) for a workload profile's key precision; (key, 0) if none."""
    for p in _KEY_FALLBACK[key_precision]:
        value = acc.peak_tflops.get(p)
        if value:
            return p, value
    return key_precision, 0.0
