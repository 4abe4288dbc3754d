"""A training layer's GEMMs at their own shapes, against the large square GEMM the calibrated
efficiency stands for, from a measured operator table (op_table). Pure.

The training model (advisor/perf/training.py) runs a step's GEMM FLOPs at one calibrated share of
the peak, set where the kernels run near their plateau and, on a GPU with a table, scaled by the
table's 8,192-cube GEMM (efficiency.table_efficiency). A layout changes the shapes the kernels
see: tensor parallelism narrows N or K by the TP degree and context parallelism cuts M, the
tokens of one micro-batch on a rank, by the CP degree. This module reads the table at the
layer's shapes and says how much longer (or shorter) they take than the same FLOPs at the
cube's rate: the factor the step's GEMM time is multiplied by.

A layer of the Llama family as op_model.Geometry places it (the same widths serving reads), on
M = seq_len x micro-batch / CP tokens (sequence parallelism gathers a micro-batch's tokens before
each GEMM): QKV (N = (H + 2 Hkv) d / t, K = hidden), the output projection (N = hidden, K = H d /
t) and, for a dense model, the MLP (gate and up: N = 2 F / t, K = hidden; down: N = hidden, K = F
/ t); a mixture of experts' experts are the grouped GEMMs training.expert_gemm_factor times. Each
forward Y[M, N] = X[M, K] W[N, K]^T has a backward of an input gradient (M, K, N: reducing over
N) and, where the weight trains, a weight gradient (N, K, M: reducing over the tokens). Short
samples on both sides: the calibrated efficiency already holds the clock a long run settles at.
"""

from __future__ import annotations

from advisor.perf.efficiency import TABLE_GEMM_SIDE as CUBE_SIDE
from advisor.perf.op_model import Geometry
from advisor.perf.op_table import OperatorTable
from advisor.perf.sizing import Shape

Gemm = tuple[float, float, float]  # (M, N, K) of Y[M, N] = X[M, K] W[N, K]^T


def layer_gemms(shape: Shape, tp: int, tokens: float) -> tuple[Gemm, ...] | None:
    """The forward GEMMs of one layer on one GPU of a TP group of `tp`, at `tokens` rows; None
    where the layer's shape is not known or not of this kind (multi-head latent attention)."""
    geo = Geometry.of(shape, tp, None)
    if isinstance(geo, str):
        return None
    out: list[Gemm] = [(tokens, geo.qkv, geo.hidden), (tokens, geo.hidden, geo.attn_out)]
    if not shape.experts:
        out += [(tokens, geo.gate * geo.mlp, geo.hidden), (tokens, geo.hidden, geo.mlp)]
    return tuple(g for g in out if min(g) >= 1)


def training_passes(gemms: tuple[Gemm, ...], weight_grads: bool) -> tuple[Gemm, ...]:
    """Each forward GEMM, its input gradient and (`weight_grads`) its weight gradient."""
    out: list[Gemm] = []
    for m, n, k in gemms:
        out += [(m, n, k), (m, k, n)]
        if weight_grads:
            out.append((n, k, m))
    return tuple(out)


MEMO_MAX = 8192  # shape factors kept on one table (a planner's layouts ask for a few hundred)


def shape_factor(
    table: OperatorTable,
    precision: str,
    shape: Shape,
    tp: int,
    tokens: float,
    weight_grads: bool = True,
) -> float:
    """Seconds of the layer's training GEMMs at their shapes over the same FLOPs at the table's
    cube rate; 1 where the table has no GEMMs in `precision` or the shape is not known. Kept on
    the table: the layout search asks for the same few shapes many times."""
    key = ("train_gemms", precision, shape, tp, tokens, weight_grads)
    kept = table.memo.get(key)
    if kept is None:
        if len(table.memo) >= MEMO_MAX:
            table.memo.clear()
        kept = table.memo[key] = _shape_factor(table, precision, shape, tp, tokens, weight_grads)
    return kept


def _shape_factor(
    table: OperatorTable, precision: str, shape: Shape, tp: int, tokens: float, weight_grads: bool
) -> float:
    gemms = layer_gemms(shape, tp, tokens)
    cube = table.gemm_time(precision, CUBE_SIDE, CUBE_SIDE, CUBE_SIDE, loaded=False)
    if not gemms or cube is None or cube.seconds <= 0:
        return 1.0
    rate = 2 * CUBE_SIDE**3 / cube.seconds
    seconds = flops = 0.0
    for m, n, k in training_passes(gemms, weight_grads):
        timed = table.gemm_time(precision, m, n, k, loaded=False)
        if timed is None:
            return 1.0
        seconds += timed.seconds
        flops += 2 * m * n * k
    return seconds / (flops / rate)
