"""Workload sizing: memory, compute, time and cost from a model's shape. Pure functions.

Every result is a list of Figures: a name, a value with its unit, and the formula with the numbers
that produced it, so a planner can check each step. Sources:
- ZeRO (Rajbhandari et al. 2019): mixed-precision Adam keeps 16 bytes per parameter (2 weights,
  2 gradients, 12 optimizer: fp32 master weights, momentum, variance); stages 1/2/3 shard the
  optimizer states / + gradients / + parameters over the data-parallel ranks (FSDP = stage 3).
- Korthikanti et al. 2022 (Reducing Activation Recomputation, arXiv:2205.05198) Table 2:
  activations of one transformer layer in 16-bit are s·b·h·(34/t + 5·a·s/(h·t)) bytes with tensor
  and sequence parallelism over t GPUs; with full recomputation only the layer input, 2·s·b·h.
  FlashAttention (Dao et al. 2022, arXiv:2205.14135) never stores the s x s attention scores, so
  the 5·a·s/h term goes (activation_memory); the fp32 logits of the loss are added.
- LoRA (Hu et al. 2021, arXiv:2106.09685) and QLoRA (Dettmers et al. 2023, arXiv:2305.14314):
  frozen base weights (bf16, or 4-bit NF4 with double-quantised constants) + rank-r adapters
  with mixed-precision Adam states (lora_adapter_params, frozen_weights).
- Kaplan et al. 2020: training compute 6·N·D (forward 2·N·D + backward 4·N·D); recomputing the
  forward pass adds 2·N·D (8·N·D). Inference: prefill 2·N FLOPs per token; decode reads every
  weight and the KV cache once per generated token, so it is bound by memory bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass as pydantic_dataclass

from advisor.catalog.models import ModelPreset
from advisor.errors import InputError, field_name
from advisor.units import BILLION, GB

# NVFP4 stores 4-bit E2M1 values with one FP8 (E4M3) scale per 16-value block, 4.5 bits a value
# (NVIDIA Technical Blog, "Introducing NVFP4 for Efficient and Accurate Low-Precision Inference",
# 2025); the tensor-wide FP32 scale is negligible.
NVFP4_BYTES = (4 + 8 / 16) / 8
BYTES_PER_WEIGHT = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "fp4": NVFP4_BYTES,
    "int8": 1.0,
    "int4": 0.5,
}
TRAINING_STATE_BYTES = 16  # 2 weights + 2 gradients + 12 optimizer (ZeRO paper, section 3)
OPTIMIZER_BYTES = 12  # fp32 master weights, Adam's first and second moments (4 + 4 + 4)
# 8-bit Adam (Dettmers et al. 2021, arXiv:2110.02861; bitsandbytes Adam8bit): both moments
# block-wise quantised to 8 bits (one fp32 scale per 2,048 values, 0.2%, left out) beside the
# fp32 master weights: 4 + 1 + 1 bytes of optimizer state per parameter, 10 in all with the
# 16-bit weights and gradients.
ADAM8BIT_OPTIMIZER_BYTES = 6
# training methods, heaviest first: every weight with Adam, every weight with 8-bit Adam,
# LoRA adapters, QLoRA adapters on a 4-bit base
METHODS = ("full", "adam8bit", "lora", "qlora")
EVERY_WEIGHT = ("full", "adam8bit")  # the methods that train every weight


def optimizer_bytes(method: str) -> int:
    """Optimizer state bytes per trained parameter of `method`."""
    return ADAM8BIT_OPTIMIZER_BYTES if method == "adam8bit" else OPTIMIZER_BYTES


DEFAULT_LORA_RANK = 16
# QLoRA (Dettmers et al. 2023, arXiv:2305.14314) section 3: 4-bit NormalFloat weights with one
# fp32 constant per 64-weight block, double-quantised to 8 bits with one fp32 constant per 256
# blocks: 8/64 + 32/(64 x 256) = 0.127 bits of constants per parameter.
NF4_BITS_PER_PARAM = 4 + 8 / 64 + 32 / (64 * 256)
# bitsandbytes quantises the linear layers only: the input embedding (nn.Embedding) stays in 16
# bits, and transformers keeps the output head unquantised (transformers
# integrations/bitsandbytes.py get_keys_to_not_convert): 2 x vocab x hidden, counted as untied.
UNQUANTISED_EMBEDDING_TABLES = 2
# Bytes per element of the logits the cross-entropy loss reads: fp32 (Korthikanti et al. 2022
# section 4.3, 4·s·b·v; Hugging Face causal-LM heads upcast the logits with .float()).
LOGIT_BYTES = 4


@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid", defer_build=True))
class Figure:
    """One step of an estimate: what it is, its value and unit, and the formula with numbers."""

    name: str
    value: float
    unit: str
    formula: str


@dataclass(frozen=True)
class Shape:
    """What sizing needs to know of a model; layers etc. are None for a bare parameter count."""

    name: str
    params: float  # total
    active_params: float  # per token (= params unless mixture of experts)
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    sliding_window: int | None = None  # tokens of K/V each layer keeps (None: all of them)
    mla_kv_dim: int | None = None  # MLA: values cached per layer and token (latent + RoPE key)
    mla_latent: int | None = None  # MLA: the compressed KV latent (kv_lora_rank), part of the above
    vocab: int | None = None
    intermediate: int | None = None  # MLP width (per expert for mixture of experts)
    gated_mlp: bool = True  # SwiGLU: gate, up and down projections (else up and down)
    experts: int | None = None  # routed experts per MoE layer
    experts_per_token: int | None = None
    tied_embeddings: bool = False  # the output head is the input embedding table
    sliding_layers: int | None = None  # layers that keep the window (None: all of them)
    # Dropout masks kept for the backward (1 byte per element: Korthikanti et al. 2022 4.1):
    # GPT-3-era recipes (Megatron-LM's defaults, hidden and attention dropout 0.1) keep them;
    # the 2023+ open models' configs set attention_dropout 0.0 and train without dropout.
    dropout: bool = False
    shared_experts: int = 0  # MoE: experts every token passes through (DeepSeek's shared expert)
    # Node-limited routing: the most nodes a token's experts may sit on (DeepSeek-V3's
    # topk_group, 4 of 8 groups; arXiv:2412.19437 section 2.1.2); None: routed by expert alone.
    route_nodes: int | None = None

    @property
    def lookup_params(self) -> float:
        """Parameters a forward pass only indexes: an untied input embedding table (vocab x
        hidden), read a row per token, never whole, and multiplied by nothing."""
        if self.tied_embeddings or self.vocab is None or self.hidden is None:
            return 0.0
        return float(self.vocab * self.hidden)

    @classmethod
    def of(cls, preset: ModelPreset) -> Shape:
        active = (preset.active_params_b or preset.params_b) * BILLION
        return cls(
            preset.id,
            preset.params_b * BILLION,
            active,
            preset.layers,
            preset.hidden_size,
            preset.attention_heads,
            preset.kv_heads,
            preset.head_size,
            preset.sliding_window,
            (preset.kv_lora_rank or 0) + (preset.qk_rope_head_dim or 0) or None,
            preset.kv_lora_rank,
            vocab=preset.vocab_size,
            intermediate=preset.intermediate_size,
            gated_mlp=preset.gated_mlp,
            experts=preset.experts,
            experts_per_token=preset.experts_per_token,
            tied_embeddings=preset.tied_embeddings,
            sliding_layers=preset.sliding_window_layers,
            dropout=preset.dropout,
            shared_experts=preset.shared_experts,
            route_nodes=preset.route_nodes,
        )

    @classmethod
    def bare(cls, params_b: float) -> Shape:
        return cls(f"{params_b:g}B parameters", params_b * BILLION, params_b * BILLION)

    @classmethod
    def assumed(cls, params_b: float) -> Shape:
        """A dense GPT-style shape for a bare parameter count (assumed_shape), so training can
        lay out tensor and pipeline parallelism without a preset."""
        layers, hidden, heads = assumed_shape(params_b)
        p = params_b * BILLION
        return cls(
            f"{params_b:g}B parameters (assumed shape)",
            p,
            p,
            layers,
            hidden,
            heads,
            heads,
            hidden // heads,
            vocab=GPT3_VOCAB,
            intermediate=4 * hidden,
            gated_mlp=False,
            dropout=True,
        )

    @classmethod
    def assumed_moe(cls, params_b: float, active_b: float) -> Shape:
        """A mixture of experts known by its two sizes (assumed_moe_shape), so training lays
        out expert parallelism and sizes its experts' activations without a preset."""
        layers, hidden, heads, experts, width = assumed_moe_shape(params_b, active_b)
        return cls(
            f"{params_b:g}B parameters, {active_b:g}B active (assumed shape)",
            params_b * BILLION,
            active_b * BILLION,
            layers,
            hidden,
            heads,
            heads,
            hidden // heads,
            vocab=GPT3_VOCAB,
            intermediate=width,
            experts=experts,
            experts_per_token=ASSUMED_TOP_K,
        )

    @property
    def expert_params(self) -> float:
        """Parameters in routed experts (0 for a dense model): total = D + X and active =
        D + X k/E give X = (total - active) / (1 - k/E)."""
        if not self.experts or not self.experts_per_token or self.params == self.active_params:
            return 0.0
        return (self.params - self.active_params) / (1 - self.experts_per_token / self.experts)

    def need_layers(self, what: str) -> tuple[int, int, int, int, int]:
        if None in (self.layers, self.hidden, self.heads, self.kv_heads, self.head_dim):
            raise InputError(
                f"{what} needs the model's shape: give {field_name('model')} (a preset), not "
                f"{field_name('params_b')}",
                field="params_b",
            )
        assert self.layers and self.hidden and self.heads and self.kv_heads and self.head_dim
        return self.layers, self.hidden, self.heads, self.kv_heads, self.head_dim


# Brown et al. 2020, "Language Models are Few-Shot Learners" (arXiv:2005.14165) Table 2.1: the
# GPT-3 family, (parameters in billions, layers, d_model, heads).
GPT3_SHAPES = (
    (0.125, 12, 768, 12),
    (0.35, 24, 1024, 16),
    (0.76, 24, 1536, 16),
    (1.3, 24, 2048, 24),
    (2.7, 32, 2560, 32),
    (6.7, 32, 4096, 32),
    (13.0, 40, 5140, 40),
    (175.0, 96, 12288, 96),
)
GPT3_VOCAB = 50257  # the GPT-2/3 byte-pair vocabulary (Radford et al. 2019)
ASSUMED_HEAD_DIM = 128


def assumed_shape(params_b: float) -> tuple[int, int, int]:
    """(layers, hidden, heads) of a dense model of `params_b` billion parameters: the layers of
    the GPT-3 row nearest in size (on a log scale), the hidden size that makes 12 x layers x
    hidden^2 (a GPT block's weights: 4h^2 attention + 8h^2 MLP) the parameter count, in heads of
    128 (a multiple of 8 of them from 8 on). An assumption, stated wherever it is used: a
    preset (--model) gives the real shape."""
    _, layers, _, _ = min(GPT3_SHAPES, key=lambda row: abs(math.log(row[0] / params_b)))
    hidden = math.sqrt(params_b * BILLION / (12 * layers))
    heads = max(1, round(hidden / ASSUMED_HEAD_DIM))
    if heads >= 8:  # a multiple of 8 heads: tensor parallelism up to 8 splits them evenly
        heads = 8 * round(heads / 8)
    return layers, heads * ASSUMED_HEAD_DIM, heads


# Experts a token is routed to in an assumed mixture of experts: DeepSeek-V3 (arXiv:2412.19437
# section 4.2), Qwen3-235B-A22B and Qwen3-30B-A3B (their config.json: num_experts_per_tok 8).
ASSUMED_TOP_K = 8


def assumed_moe_shape(params_b: float, active_b: float) -> tuple[int, int, int, int, int]:
    """(layers, hidden, heads, experts, expert MLP width) of a mixture of experts of `params_b`
    billion parameters, `active_b` per token: top-8 routing over 8 x the power of two above
    params / active experts (so k / E < active / total: DeepSeek-V3 671/37 -> 256,
    Qwen3-235B-A22B 235/22 -> 128, gpt-oss-120b 117/5.1 -> 256, its 128 top-4 in the same
    ratio); the routed experts' parameters X = (total - active) / (1 - k/E) and the rest D =
    total - X as attention, 4 x hidden^2 a layer; the layers of the GPT-3 row nearest the active
    size (assumed_shape), the hidden size from D in heads of 128, and the SwiGLU expert width
    that makes layers x E x 3 x hidden x width = X. An assumption, stated wherever it is used."""
    ratio = params_b / active_b
    experts = ASSUMED_TOP_K * 2 ** (math.floor(math.log2(ratio)) + 1)
    routed = (params_b - active_b) / (1 - ASSUMED_TOP_K / experts) * BILLION
    dense = max(params_b * BILLION - routed, 1.0)
    layers, _, _ = assumed_shape(active_b)
    hidden = math.sqrt(dense / (4 * layers))
    heads = max(1, round(hidden / ASSUMED_HEAD_DIM))
    if heads >= 8:
        heads = 8 * round(heads / 8)
    hidden = heads * ASSUMED_HEAD_DIM
    width = max(1, round(routed / (layers * experts * 3 * hidden)))
    return layers, hidden, heads, experts, width


# ZeRO (Rajbhandari et al. 2019, section 5): of the 16 bytes per parameter, the bytes each stage
# keeps on every GPU and the bytes it shards over the data-parallel ranks, with the formula.
ZERO_STAGES: dict[int, tuple[float, float, str]] = {
    0: (16, 0, "2 + 2 + 12"),
    1: (4, 12, "2 + 2 + 12/{n}"),
    2: (2, 14, "2 + (2 + 12)/{n}"),
    3: (0, 16, "(2 + 2 + 12)/{n}"),
}


def zero_split_bytes(stage: int, optimizer: int = OPTIMIZER_BYTES) -> tuple[float, float]:
    """(kept on every GPU, sharded over the ranks) bytes per trained parameter at ZeRO `stage`,
    with `optimizer` bytes of optimizer state (12 for Adam, 6 for 8-bit Adam) in place of 12."""
    if stage not in ZERO_STAGES:
        raise InputError(
            f"ZeRO stage {stage} does not exist; valid: 0, 1, 2, 3 (3 = FSDP)", field="zero_stage"
        )
    kept, sharded, _ = ZERO_STAGES[stage]
    less = OPTIMIZER_BYTES - optimizer
    return (kept - less, sharded) if stage == 0 else (kept, sharded - less)


def zero_state_bytes_per_param(
    stage: int, ranks: int, optimizer: int = OPTIMIZER_BYTES
) -> tuple[float, str]:
    """Bytes of weights + gradients + optimizer states per parameter on one GPU."""
    kept, sharded = zero_split_bytes(stage, optimizer)
    expr = ZERO_STAGES[stage][2].format(n=ranks).replace("12", str(optimizer))
    return kept + sharded / ranks, expr


def lora_adapter_params(shape: Shape, rank: int) -> tuple[Figure, float]:
    """Trainable LoRA parameters, and those one token passes through (mixture of experts).

    Which matrices: every linear projection of each transformer block, attention (q, k, v, o)
    and MLP (gate, up, down; up and down without a gated MLP), as QLoRA (arXiv:2305.14314
    section 4: adapters on all linear block layers are needed to match full fine-tuning) and
    PEFT's target_modules="all-linear" do; the LoRA paper's own minimum (Wq, Wv) is lighter.
    A rank-r adapter on a d_in x d_out matrix adds A (d_in x r) and B (r x d_out): r(d_in +
    d_out) parameters (Hu et al. 2021, arXiv:2106.09685 section 4.1). Every expert's MLP is
    adapted; experts_per_token of them run per token."""
    layers, h, heads, kv_heads, head_dim = shape.need_layers("LoRA adapters")
    if shape.intermediate is None or shape.mla_kv_dim:
        raise InputError(
            f"LoRA adapters for {shape.name} are not modelled: its MLP width or attention "
            "projections (multi-head latent attention) are not in the preset",
            field="method",
        )
    r, f = rank, shape.intermediate
    q, kv = heads * head_dim, kv_heads * head_dim
    attention = r * (h + q) + 2 * r * (h + kv) + r * (q + h)  # q, k, v, o
    mlp_matrices = 3 if shape.gated_mlp else 2
    mlp = mlp_matrices * r * (h + f)
    experts, active = shape.experts or 1, shape.experts_per_token or 1
    total = layers * (attention + experts * mlp)
    per_token = layers * (attention + active * mlp)
    expert_words = f" x {experts} experts" if experts > 1 else ""
    formula = (
        f"{layers} layers x (attention r {r} x ((h {h} + {q}) q + 2 x (h + {kv}) k,v + "
        f"({q} + h) o) + {mlp_matrices} MLP x r x (h + {f}){expert_words})"
    )
    return Figure("adapter_params", total, "params", formula), per_token


def frozen_weights(shape: Shape, method: str, zero_stage: int, ranks: int) -> Figure:
    """The frozen base weights one GPU holds under LoRA (bf16) or QLoRA (NF4). ZeRO stage 3 /
    FSDP partitions the 16-bit parameters over the ranks (Rajbhandari et al. 2019, P_os+g+p),
    frozen ones included (FSDP-QLoRA, Answer.AI 2024, "You can now train a 70b language model
    at home"); stages 0-2 keep a whole copy on every GPU."""
    shard = ranks if zero_stage == 3 else 1
    where = f" / {shard} GPUs (ZeRO stage 3)" if shard > 1 else ""
    if method == "lora":
        value = shape.params * 2 / shard / GB
        formula = f"{shape.params:.4g} params x 2 bytes (bf16){where}"
        return Figure("frozen_weights_per_gpu_gb", value, "GB", formula)
    embeddings = min(
        shape.params, UNQUANTISED_EMBEDDING_TABLES * (shape.vocab or 0) * (shape.hidden or 0)
    )
    quantised = shape.params - embeddings
    value = (quantised * NF4_BITS_PER_PARAM / 8 + embeddings * 2) / shard / GB
    formula = (
        f"({quantised:.4g} params x {NF4_BITS_PER_PARAM:.3f} bits / 8 (NF4 + double-quantised "
        f"constants) + {embeddings:.4g} embedding and head params x 2 bytes){where}"
    )
    return Figure("frozen_weights_per_gpu_gb", value, "GB", formula)


# Korthikanti et al. 2022 section 4.1, bytes per token and hidden unit of one layer in 16-bit: the
# two layer norms' inputs (2 x 2); the attention block's and MLP's are built below.
LAYER_NORM_ACTIVATION_BYTES = 4


def attention_activation_bytes(shape: Shape) -> tuple[float, str]:
    """Bytes the attention block keeps per token and hidden unit for the backward (Korthikanti
    et al. 2022 section 4.1, 11 for multi-head attention with dropout): its input (2), Q (2 x
    q / h), K and V at the KV heads' width (2 x 2 x kv / h: grouped-query attention keeps
    heads / kv_heads times less of them than the paper's multi-head count), the output
    projection's input (2 x q / h) and, with dropout, its mask (1); q = heads x head dim, kv =
    KV heads x head dim. FlashAttention keeps no s x s scores (activation_memory)."""
    h = shape.hidden or 1
    head_dim = shape.head_dim or h // max(1, shape.heads or 1)
    q = (shape.heads or 1) * head_dim / h
    kv = (shape.kv_heads or shape.heads or 1) * head_dim / h
    value = 2 + 4 * q + 4 * kv + (1 if shape.dropout else 0)
    mask = " + 1 dropout mask" if shape.dropout else ""
    return value, f"attention 2 + 4 x q {q:.4g} + 4 x kv {kv:.4g}{mask} = {value:.4g}"


def activation_bytes_per_hidden(shape: Shape) -> tuple[float, str]:
    """Bytes a layer keeps per token and hidden unit for the backward, and how they are counted:
    the attention block's (attention_activation_bytes), the layer norms' 4 and the MLP's. The
    MLP keeps its input (2h), with dropout its mask (h), and, per MLP width f, what its
    elementwise step and second GEMM need: a plain MLP the GeLU's input and output (4f, the
    paper's 19h at f = 4h with dropout); a gated one (SwiGLU) the gate and up projections'
    outputs, which the SiLU-times-product backward reads, and the down projection's input (6f).
    A token routed to k experts (and its shared experts) keeps k (+ shared) of those."""
    h = shape.hidden or 1
    f = shape.intermediate or 4 * h
    k = (shape.experts_per_token or 1) + shape.shared_experts
    per_width = 6 if shape.gated_mlp else 4
    mlp = 2 + (1 if shape.dropout else 0) + per_width * f * k / h
    attention, attention_how = attention_activation_bytes(shape)
    kind = "gated MLP (SwiGLU)" if shape.gated_mlp else "GeLU MLP"
    experts = f" x {k} experts" if k > 1 else ""
    mask = " + 1 dropout mask" if shape.dropout else ""
    how = (
        f"{attention_how}; norms {LAYER_NORM_ACTIVATION_BYTES}; MLP 2{mask} + {per_width} x f "
        f"{f}{experts} / h {h} = {mlp:.4g}, {kind}"
    )
    return attention + LAYER_NORM_ACTIVATION_BYTES + mlp, how


def activation_memory(
    shape: Shape,
    seq_len: int,
    micro_batch: int = 1,
    recompute: float = True,
    tensor_parallel: int = 1,
) -> list[Figure]:
    """Activations one GPU keeps for the backward pass of one micro-batch, and the logits.

    Korthikanti et al. 2022 (arXiv:2205.05198) Table 2, 16-bit, per layer: with tensor and
    sequence parallelism over t GPUs s·b·h·(34/t + 5·a·s/(h·t)); 34·s·b·h is the 11 (attention
    block) + 19 (GeLU MLP of width 4h) + 4 (two layer norms) of its section 4.1, for multi-head
    attention with dropout (activation_bytes_per_hidden for GQA, other widths, SwiGLU, no
    dropout), and 5·a·s²·b the attention scores, softmax and dropout. FlashAttention (Dao et al.
    2022, arXiv:2205.14135) recomputes the scores in the backward pass from O and the per-row
    softmax statistics (4·a·s·b bytes, under 0.1% of the rest, left out), so the 5·a·s/h term is
    dropped: the paper's selective recomputation (attention's core only) is what FlashAttention
    already does. Full recomputation keeps only each layer's input: 2·s·b·h per layer (Table
    2); `recompute` between 0 and 1 is the share of the layers recomputed whole (Megatron-LM's
    --recompute-method block --recompute-num-layers), the rest keep everything. The loss reads
    fp32 logits, 4·s·b·v bytes, split over t with a vocabulary-parallel head (section 4.3)."""
    layers, hidden, _, _, _ = shape.need_layers("activation memory")
    s, b, h, t, r = seq_len, micro_batch, hidden, tensor_parallel, float(recompute)
    per_token, mlp = activation_bytes_per_hidden(shape)
    kept = per_token * s * b * h * layers / t / GB
    if r >= 1:
        act = 2 * s * b * h * layers / GB
        formula = f"2 x s {s} x b {b} x h {h} x {layers} layers (full recomputation)"
    elif r > 0:
        act = r * 2 * s * b * h * layers / GB + (1 - r) * kept
        formula = (
            f"{r:.3g} of {layers} layers recomputed x 2 x s {s} x b {b} x h {h} + {1 - r:.3g} "
            f"x {per_token:.4g} x s x b x h x {layers} layers / t {t} ({mlp}; FlashAttention: "
            "no s x s scores)"
        )
    else:
        act = kept
        formula = (
            f"{per_token:.4g} x s {s} x b {b} x h {h} x {layers} layers / t {t} "
            f"({mlp}; FlashAttention: no s x s scores)"
        )
    out = [Figure("activations_per_gpu_gb", act, "GB", formula)]
    if shape.vocab:
        logits = LOGIT_BYTES * s * b * shape.vocab / t / GB
        out.append(
            Figure(
                "logits_per_gpu_gb",
                logits,
                "GB",
                f"{LOGIT_BYTES} bytes (fp32) x s {s} x b {b} x vocab {shape.vocab} / t {t}",
            )
        )
    return out


def training_memory(
    shape: Shape,
    *,
    zero_stage: int,
    ranks: int,
    seq_len: int | None = None,
    micro_batch: int = 1,
    recompute: float = True,
    method: str = "full",
    lora_rank: int = DEFAULT_LORA_RANK,
) -> list[Figure]:
    """Memory per GPU for mixed-precision Adam training, data parallel over `ranks` GPUs: every
    weight trained (full), or frozen base weights + LoRA/QLoRA adapters (the ZeRO stage shards
    the trainable states; stage 3 the frozen weights too)."""
    per_param, expr = zero_state_bytes_per_param(zero_stage, ranks, optimizer_bytes(method))
    where = f"(ZeRO stage {zero_stage}, {ranks} GPUs)"
    if method in EVERY_WEIGHT:
        where += " with 8-bit Adam states" if method == "adam8bit" else ""
        out = [
            Figure(
                "model_states_per_gpu_gb",
                shape.params * per_param / GB,
                "GB",
                f"{shape.params:.4g} params x ({expr}) bytes {where}",
            )
        ]
    elif method in ("lora", "qlora"):
        adapters, _ = lora_adapter_params(shape, lora_rank)
        out = [
            frozen_weights(shape, method, zero_stage, ranks),
            adapters,
            Figure(
                "adapter_states_per_gpu_gb",
                adapters.value * per_param / GB,
                "GB",
                f"{adapters.value:.4g} adapter params x ({expr}) bytes {where}",
            ),
        ]
    else:
        raise InputError(f"unknown method {method!r}; valid: {', '.join(METHODS)}", field="method")
    if seq_len:
        out.extend(activation_memory(shape, seq_len, micro_batch, recompute))
    total = sum(f.value for f in out if f.unit == "GB")
    parts = " + ".join(f.name for f in out if f.unit == "GB")
    out.append(Figure("memory_per_gpu_gb", total, "GB", parts))
    return out


def kv_cache_bytes_per_token(
    shape: Shape, kv_precision: str = "bf16", context_tokens: int | None = None
) -> Figure:
    """KV-cache bytes per token of context. Grouped-query attention caches K and V of every KV
    head in every layer; multi-head latent attention (DeepSeek-V2 arXiv:2405.04434 section 2.1,
    V3 arXiv:2412.19437 section 2.1.1) caches one latent of kv_lora_rank plus the decoupled RoPE
    key per layer. With a sliding window (Mistral 7B, arXiv:2310.06825 section 2: a rolling
    buffer of W tokens) a sequence of `context_tokens` > W keeps only W tokens, so the bytes per
    token of context are the cached bytes x W / context."""
    layers, _, _, kv_heads, head_dim = shape.need_layers("the KV cache")
    per_elem = BYTES_PER_WEIGHT[kv_precision]
    if shape.mla_kv_dim:
        value = layers * shape.mla_kv_dim * per_elem
        formula = (
            f"{layers} layers x {shape.mla_kv_dim} MLA latent + RoPE-key values x "
            f"{per_elem:g} bytes ({kv_precision})"
        )
    else:
        value = 2 * layers * kv_heads * head_dim * per_elem
        formula = (
            f"2 (K and V) x {layers} layers x {kv_heads} KV heads x {head_dim} head dim x "
            f"{per_elem:g} bytes ({kv_precision})"
        )
    window = shape.sliding_window
    if window and context_tokens and context_tokens > window:
        windowed = layers if shape.sliding_layers is None else shape.sliding_layers
        share = (layers - windowed + windowed * window / context_tokens) / layers
        value *= share
        if windowed == layers:
            formula += f" x sliding window {window} / {context_tokens} context tokens"
        else:
            formula += (
                f" x ({layers - windowed} full layers + {windowed} layers x sliding window "
                f"{window} / {context_tokens} context tokens) / {layers} layers"
            )
    return Figure("kv_cache_bytes_per_token", value, "bytes", formula)


def kv_copies(shape: Shape, tensor_parallel: int) -> int:
    """Copies of each token's KV cache a tensor-parallel group holds. Attention heads are split
    over the ranks and each rank caches the K/V its heads read: grouped-query attention shards the
    KV heads, and ranks beyond the KV-head count replicate them (Qwen2.5-7B's 4 KV heads at TP 8:
    2 copies; vLLM and TensorRT-LLM both replicate KV heads when TP exceeds them). MLA's latent is
    one per token and layer, read by every head (DeepSeek-V2 arXiv:2405.04434 section 2.1): every
    rank holds all of it, TP copies."""
    if tensor_parallel <= 1:
        return 1
    if shape.mla_kv_dim:
        return tensor_parallel
    _, _, _, kv_heads, _ = shape.need_layers("the KV cache")
    return max(1, tensor_parallel // kv_heads)


def inference_memory(
    shape: Shape,
    *,
    precision: str,
    context_tokens: int = 0,
    batch: int = 1,
    kv_precision: str = "bf16",
    tensor_parallel: int = 1,
) -> list[Figure]:
    """Total memory to serve: weights + KV cache for `batch` sequences of `context_tokens`, the
    KV cache counted once per copy the `tensor_parallel` ranks hold (kv_copies). The CUDA
    context, activations and allocator slack come out of each GPU's memory once, by the one
    headroom rule (perf/headroom.py usable_memory_gb), not as a share of this total as well."""
    if precision not in BYTES_PER_WEIGHT:
        raise InputError(
            f"unknown precision {precision!r}; valid: {', '.join(BYTES_PER_WEIGHT)}",
            field="precision",
        )
    wb = BYTES_PER_WEIGHT[precision]
    weights = shape.params * wb / GB
    out = [
        Figure(
            "weights_gb", weights, "GB", f"{shape.params:.4g} params x {wb:g} bytes ({precision})"
        )
    ]
    if context_tokens:
        per_token = kv_cache_bytes_per_token(shape, kv_precision, context_tokens)
        out.append(per_token)
        copies = kv_copies(shape, tensor_parallel)
        kv = per_token.value * context_tokens * batch * copies / GB
        replicated = (
            f" x {copies} copies (TP {tensor_parallel} ranks replicate "
            f"{'the MLA latent' if shape.mla_kv_dim else 'the KV heads'})"
            if copies > 1
            else ""
        )
        out.append(
            Figure(
                "kv_cache_gb",
                kv,
                "GB",
                f"{per_token.value:,.0f} bytes x {context_tokens} tokens x batch {batch}"
                + replicated,
            )
        )
    else:
        kv = 0.0
    out.append(Figure("memory_total_gb", weights + kv, "GB", "weights + KV cache"))
    return out


def training_flops(
    shape: Shape,
    tokens: float,
    recompute: float = False,
    method: str = "full",
    lora_rank: int = DEFAULT_LORA_RANK,
) -> Figure:
    """Model FLOPs of training on `tokens` (Kaplan et al. 2020): 6·N·D, or 8·N·D recomputing the
    forward pass. LoRA/QLoRA: frozen weights need no weight gradients, so the backward pass is
    only the input gradients, 2·N·D: 4·N·D (+2·N·D recomputing), plus 6·A·D (+2·A·D) for the A
    adapter parameters one token passes through (lora_adapter_params). QLoRA's NF4 weights are
    dequantised to bf16 before each matmul: the same FLOPs."""
    r = float(recompute)  # the share of the layers whose forward runs twice
    flops = training_flops_value(shape, tokens, recompute, method, lora_rank)
    if method in EVERY_WEIGHT:
        k = 6 + 2 * r
        why = _recompute_words(r)
        formula = f"{k:g} x N {shape.active_params:.4g} x D {tokens:.4g} tokens ({why})"
        return Figure("training_flops", flops, "FLOP", formula)
    _, adapters = lora_adapter_params(shape, lora_rank)
    k_frozen, k_adapter = 4 + 2 * r, 6 + 2 * r
    why = "recomputed forward included" if recompute else "no weight gradients for frozen weights"
    formula = (
        f"({k_frozen:g} x N {shape.active_params:.4g} frozen + {k_adapter:g} x {adapters:.4g} "
        f"adapter params) x D {tokens:.4g} tokens ({method}: {why})"
    )
    return Figure("training_flops", flops, "FLOP", formula)


def training_flops_value(
    shape: Shape,
    tokens: float,
    recompute: float = False,
    method: str = "full",
    lora_rank: int = DEFAULT_LORA_RANK,
) -> float:
    """training_flops's value without its words: the planners time tens of thousands of
    layouts and read only the number."""
    r = float(recompute)
    if method in EVERY_WEIGHT:
        return (6 + 2 * r) * shape.active_params * tokens
    _, adapters = lora_adapter_params(shape, lora_rank)
    return ((4 + 2 * r) * shape.active_params + (6 + 2 * r) * adapters) * tokens


def _recompute_words(share: float) -> str:
    if share >= 1:
        return "forward + backward + recomputed forward"
    if share > 0:
        return f"forward 2ND + backward 4ND + {share:.3g} of the forward recomputed"
    return "forward 2ND + backward 4ND"


def attention_training_flops(
    shape: Shape, tokens: float, seq_len: int, recompute: float = False
) -> Figure:
    """Attention's matmul FLOPs of training on `tokens` tokens in sequences of `seq_len`, which
    6·N·D leaves out (N counts weights; the score and value products have none): per layer and
    token the forward computes Q·K^T and the weighted sum of V over the preceding tokens, 2 x 2
    x s x heads x head_dim FLOPs halved by the causal mask (FlashAttention skips the masked
    blocks, Dao 2023 arXiv:2307.08691 section 3.1), so 2·L·s·d forward, 4·L·s·d backward, and
    2 more recomputing (Korthikanti et al. 2022 section 5; PaLM, Chowdhery et al. 2022, appendix
    B counts the same term unmasked). Zero without a model shape (a bare parameter count)."""
    if shape.layers is None or shape.heads is None or shape.head_dim is None:
        return Figure("attention_flops", 0.0, "FLOP", "no model shape: attention not counted")
    k = 6 + 2 * float(recompute)
    width = shape.heads * shape.head_dim
    flops = attention_training_flops_value(shape, tokens, seq_len, recompute)
    why = "causal attention, recomputed forward included" if recompute else "causal attention"
    formula = (
        f"{k:g} x {shape.layers} layers x {seq_len} tokens x {width} (heads x head dim) x D "
        f"{tokens:.4g} tokens ({why})"
    )
    return Figure("attention_flops", flops, "FLOP", formula)


def attention_training_flops_value(
    shape: Shape, tokens: float, seq_len: int, recompute: float = False
) -> float:
    """attention_training_flops's value without its words (training_flops_value says why)."""
    if shape.layers is None or shape.heads is None or shape.head_dim is None:
        return 0.0
    k = 6 + 2 * float(recompute)
    return k * shape.layers * seq_len * shape.heads * shape.head_dim * tokens
