"""Hugging Face configs read into presets: parameter counts against the published totals of each
model card (an independent source), the shipped presets held to their config copies, hybrid
sliding-window KV by hand, and bad configs refused naming the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from advisor import load_catalog
from advisor.catalog.hf_config import ConfigError, preset_from_config
from advisor.perf.sizing import Shape, kv_cache_bytes_per_token

CONFIGS = Path(__file__).resolve().parent.parent / "catalog" / "model_configs"
SOURCES = json.loads((CONFIGS / "sources.json").read_text())["configs"]


def _config(model_id: str) -> dict[str, object]:
    return dict(json.loads((CONFIGS / f"{model_id}.json").read_text()))


@pytest.mark.parametrize("entry", SOURCES, ids=[e["id"] for e in SOURCES])
def test_counts_match_the_published_totals(entry: dict[str, object]) -> None:
    preset = preset_from_config(_config(str(entry["id"])), str(entry["id"]))
    # Kimi K2's "1T" is a round figure (1.026T counted); the rest are stated to 3 figures
    assert preset.params_b == pytest.approx(entry["published_params_b"], rel=0.03)
    published_active = entry["published_active_params_b"]
    if published_active is None:
        assert preset.active_params_b is None and preset.experts is None
    else:
        # model cards differ on counting the input embedding (Qwen3 30B-A3B does: 3.3B)
        assert preset.active_params_b == pytest.approx(published_active, rel=0.1)


def test_deepseek_v3_by_hand() -> None:
    """MLA per layer: q 7168 x 1536 + 1536 x 128 x 192, kv 7168 x 576 + 512 x 128 x 256,
    o 128 x 128 x 7168 = 187,105,280; 3 dense MLPs of 3 x 7168 x 18432; 58 MoE layers of 257
    experts (256 routed + 1 shared) x 3 x 7168 x 2048 and a router of 7168 x 256; embedding and
    head 2 x 129280 x 7168."""
    attention = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168
    expert = 3 * 7168 * 2048
    total = (
        61 * attention + 3 * 3 * 7168 * 18432 + 58 * (257 * expert + 7168 * 256) + 2 * 129280 * 7168
    )
    active = 61 * attention + 3 * 3 * 7168 * 18432 + 58 * (9 * expert + 7168 * 256) + 129280 * 7168
    preset = preset_from_config(_config("deepseek-v3.1"), "x")
    assert preset.params_b == round(total / 1e9, 2)
    assert preset.active_params_b == round(active / 1e9, 2)
    assert (preset.attention, preset.kv_lora_rank, preset.qk_rope_head_dim) == ("mla", 512, 64)
    assert preset.intermediate_size == 2048  # the expert width


def test_the_shipped_presets_are_the_configs() -> None:
    shipped = yaml.safe_load((CONFIGS.parent / "models-from-configs.yaml").read_text())["models"]
    catalog = load_catalog()
    for entry, written in zip(SOURCES, shipped, strict=True):
        preset = preset_from_config(
            _config(entry["id"]), entry["id"], entry["name"], entry["source"]
        )
        assert catalog.models[entry["id"]] == preset.model_copy(update={"notes": entry["notes"]})
        assert written["id"] == entry["id"]


def test_hybrid_sliding_window_kv_by_hand() -> None:
    """gpt-oss-120b at 8,192 tokens of context: 18 full layers keep every token, 18 keep 128;
    per token of context 2 x 8 KV heads x 64 x 2 bytes x (18 + 18 x 128 / 8192)."""
    preset = preset_from_config(_config("gpt-oss-120b"), "x")
    assert (preset.sliding_window, preset.sliding_window_layers) == (128, 18)
    got = kv_cache_bytes_per_token(Shape.of(preset), "bf16", 8192)
    assert got.value == pytest.approx(2 * 8 * 64 * 2 * (18 + 18 * 128 / 8192))
    assert "18 full layers" in got.formula


def test_a_dense_config_without_window_keeps_every_token() -> None:
    preset = preset_from_config(_config("qwen3-32b"), "x")  # sliding_window null, off
    assert preset.sliding_window is None and preset.experts is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"hidden_size": None}, "hidden_size"),
        ({"num_hidden_layers": "94"}, "num_hidden_layers"),
        ({"num_experts_per_tok": 300}, "num_experts_per_tok"),
        ({"num_attention_heads": 0}, "num_attention_heads"),
        ({"num_key_value_heads": 5}, "num_key_value_heads"),  # 64 heads: not a multiple of 5
    ],
)
def test_a_bad_config_names_the_key(change: dict[str, object], field: str) -> None:
    cfg = {**_config("qwen3-235b-a22b"), **change}
    cfg = {k: v for k, v in cfg.items() if v is not None}
    with pytest.raises(ConfigError) as e:
        preset_from_config(cfg, "x")
    assert e.value.field == field
