"""Operator times read from a measured operator table (`advisor probe --ops`, probes.ops_table).
Pure: the table is handed in.

Between measured shapes a time is interpolated multilinearly in log space (log time against log
M, log N, log K for a GEMM; log tokens and log head dim for prefill and training attention; log
batch and log context for decode attention; log tokens and log width for a memory-bound
operator; log bytes for a collective over a number of the node's GPUs): operator times follow
power laws in their sizes (flat while launch- or latency-bound, then linear in bytes or FLOPs),
which are straight lines in log space. Beyond the measured shapes nothing is extrapolated
silently: the time at the edge is scaled by the operator's own power law in that size (GEMM time
linear in M, N and K; causal prefill and training attention quadratic in tokens, linear in head
dim; decode attention linear in batch and context; memory-bound operators linear in both; a
collective linear in bytes, its bandwidth-bound regime), below the smallest shape the edge's time
is kept (a floor), and the answer says it extrapolated.

Every row but one is a short sample, and a GPU at its power limit lowers its clock after the
first seconds of compute-bound work: the table's sustained GEMM (run back to back for half a
minute) says by how much. Compute-bound work (a GEMM by its share of compute against memory
traffic at the table's own best rates, prefill and training attention) is read at that settled
speed, as it runs in a busy serving or training step; memory-bound work is not slowed (the
memory clock is not lowered). A table without the sustained GEMM reads its rows as measured.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the schema is imported by whoever loads a table
    from probes.ops_table import AttentionRow, OpsTable

Point = tuple[float, ...]


@dataclass(frozen=True)
class Timed:
    """A time and whether any size lay outside the measured shapes (and which)."""

    seconds: float
    beyond: tuple[str, ...] = ()


@dataclass
class LogGrid:
    """A full grid of measured times over named axes (every combination present), with the
    power law each axis follows beyond its largest value."""

    names: tuple[str, ...]
    axes: tuple[tuple[float, ...], ...]
    values: Mapping[Point, float]  # microseconds at each grid point
    slopes: tuple[float, ...]

    @classmethod
    def build(
        cls, names: tuple[str, ...], points: Mapping[Point, float], slopes: tuple[float, ...]
    ) -> LogGrid | None:
        """A full grid inside `points`: while a combination is missing (a shape skipped for
        memory), the incomplete axis value holding the fewest measured points is dropped (its
        row or column). None when nothing is left."""
        axes = [sorted({p[i] for p in points}) for i in range(len(names))]
        while all(axes) and not _full(points, axes):
            # drop the incomplete axis value that holds the fewest measured points
            i, v = min(
                (
                    (i, v)
                    for i, a in enumerate(axes)
                    for v in a
                    if not _complete(points, axes, i, v)
                ),
                key=lambda iv: sum(1 for p in points if p[iv[0]] == iv[1]),
            )
            axes[i].remove(v)
        if any(not a for a in axes):
            return None
        return cls(names, tuple(tuple(a) for a in axes), points, slopes)

    def __call__(self, point: Sequence[float]) -> Timed:
        weights: list[list[tuple[float, float]]] = []  # per axis: (axis value, weight)
        scale, beyond = 1.0, []
        for name, axis, slope, x in zip(self.names, self.axes, self.slopes, point, strict=True):
            if x > axis[-1] * (1 + 1e-9):
                scale *= (x / axis[-1]) ** slope
                beyond.append(f"{name} {x:.6g} > {axis[-1]:g}")
                weights.append([(axis[-1], 1.0)])
            elif x < axis[0] * (1 - 1e-9):
                beyond.append(f"{name} {x:.6g} < {axis[0]:g}")
                weights.append([(axis[0], 1.0)])
            else:
                weights.append(_bracket(axis, x))
        log_t = 0.0
        for corner in _corners(weights):
            value, w = tuple(c[0] for c in corner), math.prod(c[1] for c in corner)
            if w:
                log_t += w * math.log(self.values[value])
        return Timed(math.exp(log_t) * scale * 1e-6, tuple(beyond))


def _full(points: Mapping[Point, float], axes: list[list[float]]) -> bool:
    return all(c in points for c in _product(axes))


def _complete(points: Mapping[Point, float], axes: list[list[float]], i: int, v: float) -> bool:
    others = [a if j != i else [v] for j, a in enumerate(axes)]
    return all(c in points for c in _product(others))


def _product(axes: Sequence[Sequence[float]]) -> list[Point]:
    out: list[Point] = [()]
    for axis in axes:
        out = [(*p, v) for p in out for v in axis]
    return out


def _bracket(axis: Sequence[float], x: float) -> list[tuple[float, float]]:
    """The two grid values around `x` and their weights, linear in log x."""
    j = bisect.bisect_left(axis, x)
    if j < len(axis) and math.isclose(axis[j], x, rel_tol=1e-9):
        return [(axis[j], 1.0)]
    lo, hi = axis[j - 1], axis[j]
    f = (math.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return [(lo, 1 - f), (hi, f)]


def _corners(weights: list[list[tuple[float, float]]]) -> list[tuple[tuple[float, float], ...]]:
    out: list[tuple[tuple[float, float], ...]] = [()]
    for options in weights:
        out = [(*c, o) for c in out for o in options]
    return out


# The shapes of the table's attention rows that the model scales from: per-head work.
@dataclass
class OperatorTable:
    """The model's view of one OpsTable: interpolating grids per operator."""

    table: OpsTable
    gemm: dict[str, LogGrid] = field(default_factory=dict)  # by precision
    prefill: LogGrid | None = None  # (tokens, head_dim) -> time of the table's heads
    prefill_heads: int = 1
    train: LogGrid | None = None  # (tokens, head_dim) -> forward and backward of train_heads
    train_heads: int = 1
    ring: LogGrid | None = None  # (tokens, head_dim) -> one unmasked ring step of train_heads
    decode: LogGrid | None = None  # (batch, context) -> time at decode_token_bytes per token
    decode_token_bytes: float = 1.0  # K and V bytes per cached token of the table's rows
    memory: dict[str, LogGrid] = field(default_factory=dict)  # by operator
    collectives: dict[tuple[str, int], LogGrid] = field(default_factory=dict)  # by (op, ranks)
    # best GEMM FLOP/s, weight bytes/s and bytes a weight per precision: where a GEMM turns
    # compute-bound
    rates: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    settled: float = 1.0  # the sustained GEMM's short-sample time over its settled time
    # figures derived from this table by its readers (train_gemms.shape_factor), kept with it
    memo: dict[object, float] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, table: OpsTable) -> OperatorTable:
        out = cls(
            table,
            gemm=_gemm_grids(table),
            memory=_memory_grids(table),
            collectives=_collective_grids(table),
            rates=_gemm_rates(table),
        )
        out.settled = _settled(table, out.gemm)
        if table.attention_prefill:
            out.prefill_heads = table.attention_prefill[0].heads
            out.prefill = LogGrid.build(
                ("prompt tokens", "head dim"),
                {
                    (float(a.tokens), float(a.head_dim)): a.median_us
                    for a in table.attention_prefill
                    if a.heads == out.prefill_heads
                },
                (2.0, 1.0),
            )
        if table.attention_train:
            out.train_heads = table.attention_train[0].heads
            out.train = _train_grid(table.attention_train, out.train_heads, 1.0)
            # each row times a rank's two unmasked blocks: one ring step is half of it
            out.ring = _train_grid(table.attention_ring, out.train_heads, 0.5)
        decode = [a for a in table.attention_decode if a.head_dim == 128] or list(
            table.attention_decode
        )
        if decode:
            first = decode[0]
            elem = 4 if first.precision == "fp32" else 2
            out.decode_token_bytes = 2.0 * first.kv_heads * first.head_dim * elem
            out.decode = LogGrid.build(
                ("batch", "context"),
                {
                    (float(a.batch), float(a.tokens)): a.median_us
                    for a in decode
                    if (a.kv_heads, a.head_dim) == (first.kv_heads, first.head_dim)
                },
                (1.0, 1.0),
            )
        return out

    @property
    def source(self) -> str:
        t, s = self.table, self.table.stack
        load = (
            f"; compute-bound work at {self.settled:.3g} of its speed, the sustained GEMM's"
            if self.settled < 1.0
            else "; no sustained GEMM: rows as measured"
        )
        if "kv_write" not in self.memory:
            load += "; no KV-cache write rows: not counted"
        return (
            f"operator table of {t.accelerator or s.device_name} measured "
            f"{t.measured_at.date().isoformat()} ({t.mode}; {s.device_name}, torch {s.torch}, "
            f"CUDA {s.cuda or '-'}, driver {s.driver or '-'}{load})"
        )

    def gemm_time(
        self, precision: str, m: float, n: float, k: float, *, loaded: bool = True
    ) -> Timed | None:
        """Y[m, n] = X[m, k] W[n, k]^T under sustained load: the table's time, slowed by the
        settled clock in proportion to the GEMM's compute share (1 where compute-bound, none
        where its time is the weights' read); `loaded=False`: the short sample's time."""
        grid = self.gemm.get(precision)
        if grid is None:
            return None
        t = grid((max(1.0, m), n, k))
        if not loaded:
            return t
        flop_s, byte_s, elem = self.rates[precision]
        compute = 2 * m * n * k / flop_s
        traffic = (elem * n * k + 2 * m * (n + k)) / byte_s
        share = compute / max(compute, traffic)
        return Timed(t.seconds * max(1.0, share / self.settled), t.beyond)

    def prefill_time(self, tokens: float, heads: float, head_dim: float) -> Timed | None:
        """One causal prompt of `tokens` over `heads` heads of `head_dim`, one layer
        (compute-bound: at the settled clock)."""
        if self.prefill is None:
            return None
        t = self.prefill((tokens, head_dim))
        return Timed(t.seconds * heads / self.prefill_heads / self.settled, t.beyond)

    def train_attention_time(self, tokens: float, heads: float, head_dim: float) -> Timed | None:
        """The causal forward and backward of one sequence of `tokens` over `heads` heads of
        `head_dim`, one layer (the table's heads scaled linearly, as prefill_time)."""
        if self.train is None:
            return None
        t = self.train((tokens, head_dim))
        return Timed(t.seconds * heads / self.train_heads / self.settled, t.beyond)

    def ring_step_time(self, tokens: float, heads: float, head_dim: float) -> Timed | None:
        """One unmasked step of ring context parallelism whose blocks are `tokens` long (as much
        work as a causal `tokens`), forward and backward, one layer; None without ring rows."""
        if self.ring is None:
            return None
        t = self.ring((tokens, head_dim))
        return Timed(t.seconds * heads / self.train_heads / self.settled, t.beyond)

    def decode_time(self, batch: float, context: float, token_bytes: float) -> Timed | None:
        """`batch` single-token queries over `context` cached tokens of `token_bytes` K and V
        bytes each (one layer, one GPU). Each sequence is read at its own context: decode
        attention kernels (FlashDecoding, paged attention) give every (sequence, KV head) pair
        its own thread blocks, which stream that sequence's cache, so a model with fewer KV bytes
        per token than the table's rows is the table's row at the same context with
        proportionally fewer sequences (the same bytes, the same per-sequence length). Below one
        of the table's sequences (one FP8 KV head per GPU at batch 1 is an eighth of one) the
        same bytes are one sequence at proportionally shorter context, not a whole sequence
        (8x the bytes): the table's time follows the bytes however they split between sequences
        and context (the shipped H200 rows: 2 x 4,096 tokens 14.75 us, 1 x 8,192 14.97 us;
        8 x 1,024 14.41 us), and at one sequence it is a floor plus the bytes over the bandwidth
        (1 x 4,096 -> 1 x 8,192 tokens adds 16.8 MB in 3.7 us, 4.5 TB/s)."""
        if self.decode is None:
            return None
        sequences = batch * token_bytes / self.decode_token_bytes
        if sequences < 1.0:
            return self.decode((1.0, max(1.0, context * sequences)))
        return self.decode((sequences, max(1.0, context)))

    def memory_time(self, op: str, tokens: float, width: float) -> Timed | None:
        grid = self.memory.get(op)
        return grid((max(1.0, tokens), width)) if grid is not None else None

    def collective_time(self, op: str, ranks: int, nbytes: float) -> Timed | None:
        """One `op` over `ranks` GPUs of the node on a buffer of `nbytes` (nccl-tests' size:
        the whole buffer); None where the table has no such rows (one GPU measured, another
        group size)."""
        grid = self.collectives.get((op, ranks))
        return grid((max(1.0, nbytes),)) if grid is not None else None


def _train_grid(rows: list[AttentionRow], heads: int, share: float) -> LogGrid | None:
    """(sequence tokens, head dim) -> `share` of a row's time a sequence, rows of `heads` heads
    (LogGrid.build: None when no full grid is left)."""
    return LogGrid.build(
        ("sequence tokens", "head dim"),
        {
            (float(a.tokens), float(a.head_dim)): a.median_us / a.batch * share
            for a in rows
            if a.heads == heads
        },
        (2.0, 1.0),
    )


def _gemm_grids(table: OpsTable) -> dict[str, LogGrid]:
    """One (M, N, K) grid per precision, of the plain (not grouped) GEMM rows."""
    grids: dict[str, LogGrid] = {}
    for precision in sorted({g.precision for g in table.gemm}):
        points: dict[Point, float] = {
            (float(g.m), float(g.n), float(g.k)): g.median_us
            for g in table.gemm
            if g.precision == precision and g.groups == 1
        }
        grid = LogGrid.build(("M", "N", "K"), points, (1.0, 1.0, 1.0))
        if grid is not None:
            grids[precision] = grid
    return grids


def _gemm_rates(table: OpsTable) -> dict[str, tuple[float, float, float]]:
    """Per precision, the table's best GEMM FLOP/s and its best weight read at one token
    (bytes/s): the two roofs a GEMM's time lies under; and the bytes of one weight."""
    from probes.ops_table import ELEM_BYTES  # loaded with the table itself

    rates: dict[str, tuple[float, float, float]] = {}
    for precision in {g.precision for g in table.gemm if g.groups == 1}:
        plain = [g for g in table.gemm if g.precision == precision and g.groups == 1]
        flop_s = max(2 * g.m * g.n * g.k / (g.median_us * 1e-6) for g in plain)
        elem = ELEM_BYTES[precision]
        one = [elem * g.n * g.k / (g.median_us * 1e-6) for g in plain if g.m == 1]
        # no one-token rows: no weight-read roof known, every GEMM read as compute-bound
        rates[precision] = (flop_s, max(one, default=math.inf), elem)
    return rates


def _settled(table: OpsTable, grids: Mapping[str, LogGrid]) -> float:
    """The sustained GEMM's time in the table's grid over its settled time (at most 1); 1
    without one."""
    settled = next((r for r in table.sustained if r.phase == "settled"), None)
    grid = grids.get(settled.precision) if settled is not None else None
    if settled is None or grid is None:
        return 1.0
    short = grid((float(settled.m), float(settled.n), float(settled.k))).seconds
    return min(1.0, short / (settled.median_us * 1e-6))


def _memory_grids(table: OpsTable) -> dict[str, LogGrid]:
    """One (tokens, width) grid per memory-bound operator."""
    grids: dict[str, LogGrid] = {}
    for op in sorted({r.op for r in table.memory_ops}):
        points: dict[Point, float] = {
            (float(r.tokens), float(r.width)): r.median_us for r in table.memory_ops if r.op == op
        }
        grid = LogGrid.build(("tokens", "width"), points, (1.0, 1.0))
        if grid is not None:
            grids[op] = grid
    return grids


def _collective_grids(table: OpsTable) -> dict[tuple[str, int], LogGrid]:
    """One bytes axis per collective and group size."""
    grids: dict[tuple[str, int], LogGrid] = {}
    for op, ranks in sorted({(c.op, c.ranks) for c in table.collectives}):
        points: dict[Point, float] = {
            (float(c.bytes),): c.median_us
            for c in table.collectives
            if (c.op, c.ranks) == (op, ranks)
        }
        grid = LogGrid.build(("bytes",), points, (1.0,))
        if grid is not None:
            grids[op, ranks] = grid
    return grids
