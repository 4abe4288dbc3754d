"""One forward pass timed operator by operator from a measured operator table (op_table), for
an accelerator that has one; advisor/perf/inference.py uses it in place of its roofline.

A pass over T tokens (D decode tokens and P prompt tokens of prompts of I tokens, p = P / I
prompts) on one GPU of a tensor-parallel group of t runs, per layer:
- the GEMMs of a Llama-style layer at M = T: QKV (N = (H + 2 Hkv) d / t, K = hidden), output
  (N = hidden, K = H d / t), the MLP (gate and up: N = 2 F / t, K = hidden; down: N = hidden,
  K = F / t); a mixture of experts' routed experts as one GEMM over the E' distinct experts the
  batch touches (expected_experts), of M = T k / E' tokens each and N (or K) = E' x the
  expert's width: the same bytes and FLOPs as the grouped GEMM it stands for; parameters the
  shape does not place (shared experts, routers, dense layers) as one more GEMM of K = hidden;
- attention: p causal prompts of I tokens (the table's prefill, per head) and D single-token
  queries over the mean context (the table's decode, its context scaled to this model's K and V
  bytes per token and layer on one GPU);
- the memory-bound operators: two RMSNorms and two residual adds over hidden, rotary over the
  query and key heads, SiLU x gate over the MLP width;
then, once a pass, the output head (M = D + p tokens that need logits, N = vocabulary / t) and
the sampling of D + p tokens over the vocabulary, and the tensor-parallel all-reduces (Ring).
Each operator's own launch is inside its measured time (the table is timed from CUDA graphs, as
engines run decode), so no fixed time per layer is added.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.perf.op_table import OperatorTable, Timed
from advisor.perf.sizing import Shape

if TYPE_CHECKING:  # the table's schema is imported with the tables, when a command uses them
    from probes.ops_table import OpsTable

TablesProvider = Callable[[], "Mapping[str, OpsTable]"]


def _shipped_tables() -> Mapping[str, OpsTable]:
    from advisor.catalog.ops import model_tables  # the catalog's loader reads the files once

    return model_tables()


TABLES: list[TablesProvider] = [_shipped_tables]  # tests put their own provider first


_BUILT: dict[int, tuple[OpsTable, OperatorTable]] = {}  # by id of the table object


def table_for(accelerator_id: str) -> OperatorTable | None:
    """The interpolating view of the accelerator's table (built once per table object)."""
    table = TABLES[0]().get(accelerator_id)
    if table is None:
        return None
    held = _BUILT.get(id(table))
    if held is None or held[0] is not table:
        held = _BUILT[id(table)] = (table, OperatorTable.of(table))
    return held[1]


@dataclass(frozen=True, slots=True)
class Geometry:
    """The per-GPU widths of one layer under tensor parallelism `tp`."""

    layers: int
    hidden: int
    qkv: int
    attn_out: int  # H d / t
    heads: float  # query heads on one GPU
    head_dim: int
    rotary: int  # query and key widths on one GPU
    mlp: int  # F / t (one expert's, for MoE)
    gate: int  # 2 for a gated MLP (gate and up), else 1
    moe: tuple[int, int] | None
    extra_n: float  # the extra GEMM's N per layer (parameters the shape does not place)
    vocab_n: int  # output-head width on one GPU (0: no vocabulary known)
    vocab: int

    @classmethod
    def of(cls, shape: Shape, tp: int, moe: tuple[int, int] | None) -> Geometry | str:
        """The geometry, or why the shape cannot be timed operator by operator."""
        needed = (shape.layers, shape.hidden, shape.heads, shape.kv_heads, shape.head_dim)
        if any(v is None for v in needed) or shape.intermediate is None:
            return "the model's layer shape (layers, widths, heads, MLP width) is not known"
        if shape.mla_kv_dim:
            return "multi-head latent attention is not in the operator table"
        layers, hidden, heads, kv_heads, d = (int(v) for v in needed)  # type: ignore[arg-type]
        gate = 2 if shape.gated_mlp else 1
        attn = hidden * (heads + 2 * kv_heads) * d + heads * d * hidden
        k_active = moe[1] if moe else 1
        mlp_active = (gate + 1) * hidden * shape.intermediate * k_active
        head = (shape.vocab or 0) * hidden
        placed = layers * (attn + mlp_active) + head + shape.lookup_params
        extra = max(0.0, shape.active_params - placed)
        per_layer = attn + mlp_active
        extra_n = extra / layers / hidden / tp if extra > 0.01 * layers * per_layer else 0.0
        return cls(
            layers,
            hidden,
            (heads + 2 * kv_heads) * d // tp,
            heads * d // tp,
            heads / tp,
            d,
            (heads + kv_heads) * d // tp,
            shape.intermediate // tp,
            gate,
            moe,
            extra_n,
            (shape.vocab or 0) // tp,
            shape.vocab or 0,
        )


@dataclass(frozen=True, slots=True)
class TableIteration:
    """One pass timed from the table: its parts (seconds), and what lay beyond the table."""

    layers: int
    gemm_s: float  # per layer
    attention_s: float  # per layer
    memory_s: float  # per layer
    head_s: float  # output head + sampling, once
    ring_s: float
    ring_formula: str
    beyond: tuple[str, ...]
    source: str
    unexplained_s: float = 0.0  # per layer: the engine's time outside the kernels (estimated)
    scale: float = 1.0  # a stored correction's factor (advisor/perf/correction.py)

    @property
    def seconds(self) -> float:
        per_layer = self.gemm_s + self.attention_s + self.memory_s + self.unexplained_s
        return (self.layers * per_layer + self.head_s + self.ring_s) * self.scale

    def formula(self) -> str:
        where = f"[speeds: {self.source}"
        if self.beyond:
            shown = sorted(set(self.beyond))
            where += "; beyond the measured shapes (scaled by each operator's power law): "
            where += ", ".join(shown[:4]) + (
                f" and {len(shown) - 4} more" if len(shown) > 4 else ""
            )
        text = (
            f"{self.layers} layers x ({self.gemm_s:.6g} s GEMMs + {self.attention_s:.6g} s "
            f"attention + {self.memory_s:.6g} s memory-bound operators + "
            f"{self.unexplained_s:.3g} s unexplained) + {self.head_s:.6g} s "
            "output head and sampling + "
            f"{self.ring_formula}"
        )
        if self.scale != 1.0:  # a stored correction's factor (advisor/perf/inference.py)
            text = f"({text}) x {self.scale:.6g} stored correction"
        return f"{text} {where}]"


class OpModel:
    """Times passes of one model on one accelerator's table at `precision` (weights)."""

    def __init__(self, ops: OperatorTable, geo: Geometry, precision: str) -> None:
        self.ops, self.geo, self.precision = ops, geo, precision

    @classmethod
    def build(
        cls, accelerator_id: str, shape: Shape, tp: int, precision: str, moe: tuple[int, int] | None
    ) -> OpModel | str | None:
        """None: no table for the accelerator; a string: why its table cannot be used."""
        ops = table_for(accelerator_id)
        if ops is None:
            return None
        if precision not in ops.gemm:
            return f"the operator table has no {precision} GEMMs"
        if ops.prefill is None or ops.decode is None or not ops.memory:
            return "the operator table lacks attention or memory-bound operators"
        geo = Geometry.of(shape, tp, moe)
        return geo if isinstance(geo, str) else cls(ops, geo, precision)

    def _kv_write(self, tokens: float, kv_token_bytes: float, beyond: list[str]) -> float:
        """Storing the pass's new keys and values in the cache, the table's kv_write rows at
        the same bytes (16-bit elements); nothing in a table measured before them (its source
        says so)."""
        t = self.ops.memory_time("kv_write", tokens, max(1.0, kv_token_bytes / 2))
        if t is None:
            return 0.0
        beyond.extend(t.beyond)
        return t.seconds

    def iteration(
        self,
        decode: int,
        prompt_tokens: float,
        prompt_len: int,
        context: float,
        kv_token_bytes: float,
        ring: tuple[float, str],
        experts_touched: Callable[[int], float],
        unexplained_layer_s: float = 0.0,
        scale: float = 1.0,
    ) -> TableIteration:
        """`kv_token_bytes`: K and V bytes per cached token of one layer on one GPU; `ring`:
        the all-reduces' seconds and formula; `experts_touched(T)`: distinct experts read;
        `unexplained_layer_s`: the engine's time per layer outside the GPU's kernels."""
        g, ops = self.geo, self.ops
        tokens = decode + prompt_tokens
        beyond: list[str] = []

        def take(t: Timed | None) -> float:
            assert t is not None  # build() checked that every section is there
            beyond.extend(t.beyond)
            return t.seconds

        def gemm(m: float, n: float, k: float) -> float:
            return take(ops.gemm_time(self.precision, m, n, k)) if m > 0 and n >= 1 else 0.0

        layer_gemm = gemm(tokens, g.qkv, g.hidden) + gemm(tokens, g.hidden, g.attn_out)
        layer_gemm += gemm(tokens, g.extra_n, g.hidden)
        act_tokens = tokens
        if g.moe:
            k = g.moe[1]
            touched = max(1.0, experts_touched(max(1, round(tokens))))
            per_expert = tokens * k / touched
            layer_gemm += gemm(per_expert, touched * g.gate * g.mlp, g.hidden)
            layer_gemm += gemm(per_expert, g.hidden, touched * g.mlp)
            act_tokens = tokens * k
        else:
            layer_gemm += gemm(tokens, g.gate * g.mlp, g.hidden) + gemm(tokens, g.hidden, g.mlp)
        prompts = prompt_tokens / prompt_len if prompt_tokens else 0.0
        attention = 0.0
        if prompts:
            attention += prompts * take(ops.prefill_time(prompt_len, g.heads, g.head_dim))
        if decode:
            attention += take(ops.decode_time(decode, context, kv_token_bytes))
        memory = 0.0
        if tokens:
            memory += 2 * take(ops.memory_time("rms_norm", tokens, g.hidden))
            memory += 2 * take(ops.memory_time("residual_add", tokens, g.hidden))
            memory += take(ops.memory_time("rotary", tokens, g.rotary))
            memory += take(ops.memory_time("silu_mul", act_tokens, g.mlp))
            memory += self._kv_write(tokens, kv_token_bytes, beyond)
        logits = decode + prompts
        head = 0.0
        if logits and g.vocab:
            head = gemm(logits, g.vocab_n, g.hidden) + take(
                ops.memory_time("sampling", logits, g.vocab)
            )
        return TableIteration(
            g.layers,
            layer_gemm,
            attention,
            memory,
            head,
            ring[0],
            ring[1],
            tuple(beyond),
            ops.source,
            unexplained_layer_s,
            scale,
        )
