"""The operator table as data: what `advisor probe --ops` measured on one GPU, per operator and
shape, with the software stack it ran on. No torch here: advisor reads these files.

Every timed row keeps the median time of one call in microseconds and its spread (interquartile
range, coefficient of variation) over the timed samples, as the probe's other measurements do.
Files are JSON, one row a line (`dumps`), so that a person can read and diff them.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1

Precision = Literal["fp32", "bf16", "fp16", "fp8", "fp4"]
ELEM_BYTES: dict[str, float] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "fp4": 0.5}


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    median_us: float = Field(gt=0, description="median time of one call")
    iqr_us: float = Field(ge=0, description="interquartile range of the samples")
    cv: float = Field(ge=0, description="coefficient of variation of the samples")


class GemmRow(_Row):
    """Y[m, n] = X[m, k] @ W[n, k]^T; `groups` > 1: that many independent GEMMs in one batched
    call (MoE experts, each with its own weights and m tokens)."""

    precision: Precision
    m: int = Field(ge=1)
    n: int = Field(ge=1)
    k: int = Field(ge=1)
    groups: int = Field(default=1, ge=1)


class AttentionRow(_Row):
    """Scaled dot-product attention. Prefill: `batch` causal sequences of `tokens` tokens.
    Decode: `batch` sequences of one new token each over `tokens` cached ones. Training: the
    causal forward and backward (gradients of queries, keys and values) of `batch` sequences of
    `tokens` tokens. Ring: the two unmasked blocks a rank of ring context parallelism runs after
    its causal one, forward and backward, each as much work as a causal `tokens`: `tokens`
    queries over `tokens` / 2 keys and `tokens` / 2 queries over `tokens` keys (timed together)."""

    precision: Precision
    batch: int = Field(ge=1)
    tokens: int = Field(ge=1)
    heads: int = Field(ge=1)
    kv_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)


class MemoryOpRow(_Row):
    """A memory-bound operator over `tokens` rows of `width` elements (16-bit activations;
    sampling reads `width` = vocabulary logits per row; kv_write stores `tokens` rows of `width`
    K and V elements at scattered slots of a cache larger than the last-level cache, as an
    engine writes each new token's keys and values into its paged cache)."""

    op: Literal["rms_norm", "silu_mul", "rotary", "residual_add", "sampling", "kv_write"]
    tokens: int = Field(ge=1)
    width: int = Field(ge=1)


class SustainedRow(_Row):
    """One GEMM run back to back for `seconds`: `phase` "first" is its time in the first
    second, "settled" in the last half. A GPU at its power limit lowers its clock after the
    first seconds of compute-bound work, and every other row is a short sample: settled against
    the GEMM row of the same shape is how much slower compute-bound work runs under load."""

    precision: Precision
    m: int = Field(ge=1)
    n: int = Field(ge=1)
    k: int = Field(ge=1)
    seconds: float = Field(gt=0)
    phase: Literal["first", "settled"]


class LaunchRow(_Row):
    """Fixed costs: `kernel` is one tiny kernel's launch; `layer` a transformer layer of tiny
    width (its `kernels` launches, no real work); eager from Python, or (`graph`) replayed
    from a CUDA graph as serving engines run decode. Every other row is timed from a graph."""

    name: Literal["kernel", "layer"]
    kernels: int = Field(ge=1)
    graph: bool


class CollectiveRow(_Row):
    """A collective over `ranks` GPUs of the node (nccl-tests conventions: `bytes` is the whole
    buffer; bus bandwidth = bytes / time x the bus factor)."""

    op: Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
    ranks: int = Field(ge=2)
    bytes: int = Field(ge=1)
    busbw_gb_s: float = Field(ge=0)


class Stack(BaseModel):
    """The software and machine the table was measured on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device_name: str
    compute_capability: str | None = None
    torch: str
    cuda: str | None = None
    driver: str | None = None
    python: str
    machine: str = Field(description="where it ran (host name or a description)")


class OpsTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    accelerator: str | None = Field(description="catalog accelerator id, when matched")
    mode: Literal["quick", "full", "tiny"]
    measured_at: dt.datetime
    duration_s: float = Field(ge=0)
    stack: Stack
    gemm: list[GemmRow] = Field(default_factory=list)
    attention_prefill: list[AttentionRow] = Field(default_factory=list)
    attention_decode: list[AttentionRow] = Field(default_factory=list)
    attention_train: list[AttentionRow] = Field(default_factory=list)
    attention_ring: list[AttentionRow] = Field(default_factory=list)
    memory_ops: list[MemoryOpRow] = Field(default_factory=list)
    sustained: list[SustainedRow] = Field(default_factory=list)
    launch: list[LaunchRow] = Field(default_factory=list)
    collectives: list[CollectiveRow] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="what was skipped, and why")


class OpsReport(BaseModel):
    """An operator table posted to the service (`advisor probe --ops --report-to`): the host
    that measured it, when, and the table. The service makes the fleet's table per accelerator
    from these, one vote per host (advisor/fleet/ops_tables.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    created_at: dt.datetime
    host: str = Field(min_length=1, max_length=255)
    table: OpsTable


ROW_SECTIONS = (
    "gemm",
    "attention_prefill",
    "attention_decode",
    "attention_train",
    "attention_ring",
    "memory_ops",
    "sustained",
    "launch",
    "collectives",
)


# Row sections added to schema 1 after tables were first stored: left out of a report's stored
# form while empty (stored_form), so that a table measured before them, posted again, is the same
# content under the same idempotency key.
LATER_SECTIONS = ("attention_train", "attention_ring", "sustained")


def stored_form(report: OpsReport) -> dict[str, object]:
    """The report as JSON data for storing and keying: LATER_SECTIONS dropped where empty."""
    data = report.model_dump(mode="json")
    table = data["table"]
    for section in LATER_SECTIONS:
        if not table[section]:
            del table[section]
    return data


def dumps(table: OpsTable) -> str:
    """JSON with one row a line: readable, and a re-measurement diffs row by row."""
    data = table.model_dump(mode="json")
    head = {k: v for k, v in data.items() if k not in ROW_SECTIONS}
    lines = ["{"]
    for key, value in head.items():
        lines.append(f"  {json.dumps(key)}: {json.dumps(value)},")
    for i, section in enumerate(ROW_SECTIONS):
        rows = data[section]
        end = "," if i < len(ROW_SECTIONS) - 1 else ""
        if not rows:
            lines.append(f"  {json.dumps(section)}: []{end}")
            continue
        lines.append(f"  {json.dumps(section)}: [")
        lines += [f"    {json.dumps(r)}," for r in rows[:-1]]
        lines.append(f"    {json.dumps(rows[-1])}")
        lines.append(f"  ]{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"
