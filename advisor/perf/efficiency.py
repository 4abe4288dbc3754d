"""Software efficiency of the datasheet roofline, per vendor, generation and precision.

Pure. The training workload's efficiency (catalog/workloads.yaml, fleet-calibrated) is set from
published runs on NVIDIA Hopper and Ampere (tests/data/published*.yaml). Other generations reach a
different share of their datasheet peak: their kernels and libraries are younger or older, and a
larger peak is harder to feed. `relative_efficiency` is that share relative to the calibrated
NVIDIA one, from a public end-to-end training comparison against H100 on the same job:

    factor = (measured speed vs H100) / (datasheet peak vs H100)

so that the datasheet roofline times the factor reproduces the measured ratio. Each factor keeps
the measured range (`low`, `high`), which the planner reads as the pessimistic and optimistic
efficiency of a deadline margin. All are ESTIMATED (vendor or third-party measurements, one job
family each). Where the accelerator has a measured operator table (advisor/perf/op_table.py,
catalog/ops/*.json; unless ADVISOR_OPERATOR_TABLES=off), its large-GEMM speed wins over the factor
(`table_efficiency`). Serving can read the same factor for the same operator
(`relative_efficiency`).
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.catalog.models import Accelerator
from advisor.perf.op_model import table_for
from advisor.perf.op_table import OperatorTable

H100_BF16_TFLOPS = 989.4  # H100 SXM dense BF16 (NVIDIA H100 datasheet; catalog/accelerators.yaml)
H100_FP8_TFLOPS = 1978.9  # H100 SXM dense FP8 (same datasheet)


@dataclass(frozen=True, slots=True)
class Efficiency:
    """A factor on the calibrated efficiency, the measured range behind it and its source."""

    factor: float
    low: float
    high: float
    source: str
    estimated: bool = True

    def words(self) -> str:
        return f"x {self.factor:.3g} ({self.low:.3g}-{self.high:.3g}; {self.source})"


def _from_ratio(measured: tuple[float, float], peak_ratio: float, source: str) -> Efficiency:
    """The factor that turns the datasheet peak ratio into the measured speed ratio vs H100."""
    low, high = measured[0] / peak_ratio, measured[1] / peak_ratio
    return Efficiency(round((low + high) / 2, 3), round(low, 3), round(high, 3), source)


# The calibrated reference: the rows the workload's efficiency was set from.
REFERENCE = Efficiency(
    1.0, 1.0, 1.0, "NVIDIA Hopper/Ampere: the calibrated value itself", estimated=False
)
# B200 vs H100, per GPU: 2.0x on GPT-3 175B pre-training, 2.2x on Llama 2 70B LoRA fine-tuning
# (NVIDIA, "NVIDIA Blackwell Doubles LLM Training Performance in MLPerf Training v4.1",
# https://developer.nvidia.com/blog/nvidia-blackwell-doubles-llm-training-performance-in-mlperf-training-v4-1/,
# 2024-11-13; both in FP8). Datasheet: 2,250 / 989.4 dense BF16 and 4,500 / 1,978.9 FP8 = 2.27x.
BLACKWELL = _from_ratio(
    (2.0, 2.2),
    2250 / H100_BF16_TFLOPS,
    "MLPerf Training v4.1, B200 2.0-2.2x H100 per GPU (NVIDIA blog, 2024-11-13; estimated)",
)
# MI300X vs H100 on the same training jobs: SemiAnalysis, "MI300X vs H100 vs H200 Benchmark Part 1:
# Training - CUDA Moat Still Alive" (https://semianalysis.com/2024/12/22/mi300x-vs-h100-vs-h200-
# benchmark-part-1-training/, 2024-12-22): on AMD's public stable stack the MI300X trains GPT-style
# and Llama models below the H100 despite 1.32x the dense BF16 peak; with AMD's tuned development
# builds near parity. Range taken: 0.7-1.0x H100. Datasheet: 1,307.4 / 989.4 BF16 = 1.32x.
CDNA3 = _from_ratio(
    (0.7, 1.0),
    1307.4 / H100_BF16_TFLOPS,
    "SemiAnalysis MI300X vs H100 training, 0.7-1.0x H100 (2024-12-22; estimated)",
)

# (vendor, generation) -> factor; precision-specific entries under (vendor, generation, precision)
# win (none differ yet: the sources above ran BF16 and FP8 alike; the FP8 factor relative to BF16
# is advisor/perf/training.py FP8_RELATIVE_EFFICIENCY).
FACTORS: dict[tuple[str, ...], Efficiency] = {
    ("nvidia", "hopper"): REFERENCE,
    ("nvidia", "ampere"): REFERENCE,
    ("nvidia", "blackwell"): BLACKWELL,
    ("amd", "cdna3"): CDNA3,
    # MI355X: ROCm as on CDNA3, no independent training comparison yet: CDNA3's factor, estimated.
    ("amd", "cdna4"): CDNA3,
}
UNMEASURED = Efficiency(
    1.0, 1.0, 1.0, "no public training comparison for this generation: the calibrated value"
)

# Share of the dense BF16 peak a large square GEMM reaches on H100 SXM, the reference a measured
# operator table is compared with: about 720 of 989 TFLOP/s (SemiAnalysis, 2024-12-22, above;
# NVIDIA cuBLAS on H100 SXM). ESTIMATED; the lent H100's own table
# (catalog/ops/h100-sxm--torch2.11.0-cu130-driver580.json) measures 0.739 at 8192 cubed (732
# TFLOP/s, torch 2.11's cuBLAS), within 1.3% of it.
REFERENCE_GEMM_SHARE = 0.73
TABLE_GEMM_SIDE = 8192  # a large square GEMM, where the kernels reach their plateau


# The GPU the generation factors are measured against (FACTORS: whole training jobs against the
# H100, whose GEMMs ran at the job's own shapes on both GPUs).
REFERENCE_ACCELERATOR = "h100-sxm"


def shape_table(acc: Accelerator) -> OperatorTable | None:
    """The operator table a training step's GEMM shapes are read from on `acc`
    (advisor/perf/train_gemms.py): its own; without one, the reference GPU's where the factor it
    runs at is a whole job's speed measured against that GPU's, shapes included (Blackwell,
    CDNA); None where neither is (the calibrated generations and unmeasured ones read the
    calibrated value as it is) or the tables are off."""
    own = table_for(acc.id)
    if own is not None:
        return own
    factor = FACTORS.get((acc.vendor, acc.generation), UNMEASURED)
    return None if factor in (REFERENCE, UNMEASURED) else table_for(REFERENCE_ACCELERATOR)


def relative_efficiency(acc: Accelerator, precision: str = "bf16") -> Efficiency:
    """The factor on the calibrated efficiency for `acc` in `precision`: the measured operator
    table's where one is loaded, else the sourced per-generation factor, else 1."""
    return table_efficiency(acc, precision) or FACTORS.get(
        (acc.vendor, acc.generation, precision),
        FACTORS.get((acc.vendor, acc.generation), UNMEASURED),
    )


def table_efficiency(acc: Accelerator, precision: str) -> Efficiency | None:
    """The measured large-GEMM share of the datasheet peak over the reference share, from the
    accelerator's operator table (None: no table loaded, or no GEMM in `precision`)."""
    table = table_for(acc.id)
    peak = getattr(acc.peak_tflops, precision, None)
    if table is None or not peak:
        return None
    side = TABLE_GEMM_SIDE
    # short samples against a short-sample reference: the calibrated efficiency this factor
    # multiplies was fitted to training runs, which ran at their GPUs' sustained clock already
    timed = table.gemm_time(precision, side, side, side, loaded=False)
    if timed is None or timed.seconds <= 0:
        return None
    share = 2 * side**3 / timed.seconds / (peak * 1e12)
    factor = round(min(share, 1.0) / REFERENCE_GEMM_SHARE, 3)
    return Efficiency(factor, factor, factor, f"{table.source}, GEMM {share:.2f} of peak")


# The spread of the calibrated efficiency itself: the median error of the training rows on the
# reference generations, each timed as the plan times it (operator table, vendor factor),
# benchmarks/results/calibration-training-2026-12-05d.txt (38 of 39 within x1.5, median 5.8%).
CALIBRATION_SPREAD = 0.058


def efficiency_bounds(acc: Accelerator, precision: str = "bf16") -> tuple[float, float]:
    """(pessimistic, optimistic) multipliers on the planned efficiency of `acc`: the calibration
    spread, widened by the measured range of the generation's factor."""
    factor = relative_efficiency(acc, precision)
    return (
        (1 - CALIBRATION_SPREAD) * factor.low / factor.factor,
        (1 + CALIBRATION_SPREAD) * factor.high / factor.factor,
    )
