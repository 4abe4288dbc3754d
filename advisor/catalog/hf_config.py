"""A Hugging Face `config.json` read into a model preset. Pure: the caller reads the file.

Families read (by `model_type`, or the nested `text_config` of a multimodal checkpoint):
dense decoders (llama, mistral, qwen2, qwen3, gemma-style with `head_dim`), mixtures of experts
with one expert width (mixtral: `num_local_experts`; qwen2_moe / qwen3_moe: `num_experts`,
`moe_intermediate_size`, shared experts, `decoder_sparse_step`, `mlp_only_layers`), gpt_oss
(experts of `intermediate_size`, `layer_types` of sliding and full attention), llama4 (an
expert and a shared expert on every `interleave_moe_layer_step`-th layer, dense layers of
`intermediate_size_mlp`), and deepseek_v3 / kimi_k2 (multi-head latent attention, routed and
shared experts after `first_k_dense_replace` dense layers).

Parameters are counted from the shapes, weight matrices only (norms, biases and rotary tables
are below 0.1% of any of these models): attention (Q, K, V, O; MLA's down- and up-projections),
MLPs (gated: gate, up, down), experts, routers, the input embedding and an untied output head.
Active parameters are those one token's forward pass multiplies by: every attention and dense
MLP, the routed experts it picks and the shared ones, the routers and the output head (the
input embedding is a row lookup, advisor/perf/sizing.py's lookup_params).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from advisor.catalog.models import ModelPreset

MLA_TYPES = {"deepseek_v3", "deepseek_v2", "kimi_k2"}
# A preset field's config.json key, so an inconsistency names what the user can fix.
CONFIG_KEYS = {
    "kv_heads": "num_key_value_heads",
    "attention_heads": "num_attention_heads",
    "experts_per_token": "num_experts_per_tok",
    "experts": "num_experts",
    "sliding_window": "sliding_window",
    "context_length": "max_position_embeddings",
    "layers": "num_hidden_layers",
    "hidden_size": "hidden_size",
    "head_dim": "head_dim",
}


class ConfigError(ValueError):
    """A config that cannot describe a model; `field` names the config key at fault."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class _Layers:
    """How a model's layers split: MoE layers and their expert widths, dense ones and theirs."""

    moe: int
    dense: int
    dense_width: int
    expert_width: int
    experts: int
    per_token: int
    shared_width: int  # the summed width of the shared experts (0: none)


def _get(cfg: Mapping[str, Any], key: str, *alts: str, default: Any = None) -> Any:
    for name in (key, *alts):
        if name in cfg and cfg[name] is not None:
            return cfg[name]
    if default is not None:
        return default
    raise ConfigError(f"config.json lacks {key!r}", field=key)


def _positive_int(cfg: Mapping[str, Any], key: str, *alts: str, default: Any = None) -> int:
    value = _get(cfg, key, *alts, default=default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"config.json {key!r} must be a positive integer, not {value!r}", key)
    return value


def text_config(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's part of a config (multimodal checkpoints nest it)."""
    inner = cfg.get("text_config")
    return inner if isinstance(inner, Mapping) else cfg


def _layers(cfg: Mapping[str, Any], kind: str, n: int, inter: int) -> _Layers:
    if kind in MLA_TYPES and "n_routed_experts" in cfg:
        dense = int(cfg.get("first_k_dense_replace", 0))
        moe_w = _positive_int(cfg, "moe_intermediate_size")
        shared = int(cfg.get("n_shared_experts") or 0) * moe_w
        experts = _positive_int(cfg, "n_routed_experts")
        return _Layers(n - dense, dense, inter, moe_w, experts, _per_token(cfg, experts), shared)
    if kind.startswith("llama4") and "num_local_experts" in cfg:
        step = int(cfg.get("interleave_moe_layer_step", 1))
        moe = n // step if step > 0 else 0
        dense_w = int(cfg.get("intermediate_size_mlp", inter))
        experts = _positive_int(cfg, "num_local_experts")
        per = _per_token(cfg, experts)
        return _Layers(moe, n - moe, dense_w, inter, experts, per, inter)
    if not any(cfg.get(k) for k in ("num_experts", "num_local_experts", "n_routed_experts")):
        return _Layers(0, n, inter, 0, 0, 0, 0)
    experts = _positive_int(cfg, "num_experts", "num_local_experts", "n_routed_experts")
    moe_w = int(cfg.get("moe_intermediate_size") or inter)
    shared = int(cfg.get("shared_expert_intermediate_size") or 0)
    step = int(cfg.get("decoder_sparse_step") or 1)
    dense_only = set(cfg.get("mlp_only_layers") or [])
    moe = sum(1 for i in range(n) if i not in dense_only and (i + 1) % step == 0)
    return _Layers(moe, n - moe, inter, moe_w, experts, _per_token(cfg, experts), shared)


def _per_token(cfg: Mapping[str, Any], experts: int) -> int:
    k = _positive_int(cfg, "num_experts_per_tok", "moe_topk", "num_experts_per_token")
    if k > experts:
        raise ConfigError(
            f"num_experts_per_tok {k} exceeds the {experts} experts", "num_experts_per_tok"
        )
    return k


def _attention_params(cfg: Mapping[str, Any], kind: str, hidden: int, heads: int) -> float:
    if kind in MLA_TYPES and "kv_lora_rank" in cfg:
        q_rank = cfg.get("q_lora_rank")
        nope, rope = _positive_int(cfg, "qk_nope_head_dim"), _positive_int(cfg, "qk_rope_head_dim")
        v = _positive_int(cfg, "v_head_dim")
        kv_rank = _positive_int(cfg, "kv_lora_rank")
        q = (
            hidden * q_rank + q_rank * heads * (nope + rope)
            if q_rank
            else hidden * heads * (nope + rope)
        )
        kv = hidden * (kv_rank + rope) + kv_rank * heads * (nope + v)
        return float(q + kv + heads * v * hidden)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    kv_heads = _positive_int(cfg, "num_key_value_heads", default=heads)
    return float(2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim)


def preset_from_config(
    raw: Mapping[str, Any], model_id: str, name: str | None = None, source: str | None = None
) -> ModelPreset:
    """A ModelPreset from a config.json's mapping. ConfigError names the key at fault."""
    cfg = text_config(raw)
    kind = str(cfg.get("model_type") or raw.get("model_type") or "")
    hidden = _positive_int(cfg, "hidden_size", "d_model")
    n = _positive_int(cfg, "num_hidden_layers", "n_layers")
    heads = _positive_int(cfg, "num_attention_heads", "n_heads")
    vocab = _positive_int(cfg, "vocab_size")
    inter = _positive_int(cfg, "intermediate_size")
    gated = str(cfg.get("hidden_act", "silu")) not in {"gelu", "gelu_new", "relu"}
    mlp_mats = 3 if gated else 2
    layers = _layers(cfg, kind, n, inter)
    attention = _attention_params(cfg, kind, hidden, heads) * n
    dense = layers.dense * mlp_mats * hidden * layers.dense_width
    expert = mlp_mats * hidden * layers.expert_width
    shared = layers.moe * mlp_mats * hidden * layers.shared_width
    routers = layers.moe * hidden * layers.experts
    tied = bool(raw.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False)))
    embed = vocab * hidden * (1 if tied else 2)
    total = attention + dense + shared + routers + layers.moe * layers.experts * expert + embed
    active = (
        attention
        + dense
        + shared
        + routers
        + layers.moe * layers.per_token * expert
        + vocab * hidden  # the output head (tied or not, it multiplies every token)
    )
    context = _positive_int(cfg, "max_position_embeddings", "seq_length", default=4096)
    fields: dict[str, Any] = {
        "id": model_id,
        "name": name or model_id,
        "params_b": round(total / 1e9, 2),
        "layers": n,
        "hidden_size": hidden,
        "attention_heads": heads,
        "kv_heads": _positive_int(cfg, "num_key_value_heads", default=heads),
        "vocab_size": vocab,
        "context_length": context,
        "intermediate_size": layers.expert_width if layers.moe else inter,
        "gated_mlp": gated,
        "tied_embeddings": tied,
        "source": source or "a Hugging Face config.json given with --model-config",
    }
    if cfg.get("head_dim"):
        fields["head_dim"] = int(cfg["head_dim"])
    if layers.moe:
        fields.update(
            active_params_b=round(active / 1e9, 2),
            experts=layers.experts,
            experts_per_token=layers.per_token,
            shared_experts=-(-layers.shared_width // layers.expert_width),
        )
        if isinstance(cfg.get("topk_group"), int) and cfg["topk_group"] > 0:
            fields["route_nodes"] = cfg["topk_group"]  # DeepSeek's node-limited routing
    if kind in MLA_TYPES and "kv_lora_rank" in cfg:
        fields.update(
            attention="mla",
            kv_heads=heads,
            head_dim=_positive_int(cfg, "v_head_dim"),
            kv_lora_rank=_positive_int(cfg, "kv_lora_rank"),
            qk_rope_head_dim=_positive_int(cfg, "qk_rope_head_dim"),
        )
    fields.update(_window(cfg, n))
    try:
        return ModelPreset(**fields)
    except ValidationError as e:
        first = e.errors()[0]
        msg = str(first["msg"])
        named = [str(first["loc"][0])] if first["loc"] else [f for f in CONFIG_KEYS if f in msg]
        key = CONFIG_KEYS.get(named[0], named[0]) if named else "config"
        raise ConfigError(f"config.json gives an inconsistent model: {msg}", key) from e


def _window(cfg: Mapping[str, Any], n: int) -> dict[str, Any]:
    """Sliding-window attention where the config turns it on: on every layer (Mistral 7B), or on
    the layers `layer_types` names sliding (gpt-oss alternates sliding and full)."""
    window = cfg.get("sliding_window")
    if not isinstance(window, int) or window <= 0 or cfg.get("use_sliding_window") is False:
        return {}
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list) and kinds:
        sliding = sum(1 for k in kinds if "sliding" in str(k))
        return {"sliding_window": window, "sliding_window_layers": sliding} if sliding else {}
    return {"sliding_window": window, "sliding_window_layers": n}
