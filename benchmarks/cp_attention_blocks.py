"""The blocks of ring context parallelism against the model's stand-in for them, on this GPU.

Megatron-Core's ring (through Transformer Engine) cuts a sequence of s tokens into 2 cp chunks of
c = s / (2 cp); a rank holds two (one from each end) and, per ring step, attends its queries to
one rank's keys and values: the first step causally over its own 2c tokens, each of the other
cp - 1 steps without a mask, either its 2c queries against the first c keys of an earlier rank
or its last c queries against all 2c keys of a later one. The training model
(advisor/perf/training.py _table_attention) times every step as the operator table's causal row
of 2c tokens (as much work as each step). This times, through torch's default fused attention
(forward and backward, bf16, one sequence), the causal 2c row, the two unmasked blocks, and the
rank's whole ring (the causal step plus cp - 1 unmasked ones, half of each kind), against the
model's cp x causal(2c); and a whole sequence of s tokens where it fits.

    python3 benchmarks/cp_attention_blocks.py [--heads 32] [--head-dim 128] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.attention_training_shapes import time_ms

# (tokens a sequence, CP degree): blocks of 2c = 16,384 down to 1,024 tokens
CASES = ((8192, 2), (8192, 4), (32768, 2), (32768, 8), (32768, 32), (131072, 16), (131072, 64))
WHOLE_MAX_TOKENS = 32768  # a whole sequence timed up to this length (memory and time)


def _fwd_bwd(torch: Any, heads: int, head_dim: int, q_len: int, kv_len: int, causal: bool) -> Any:
    """A callable running one forward and backward of attention of q_len queries over kv_len
    keys (causal: the two are the same tokens)."""

    def make(n: int) -> Any:
        return torch.randn(
            1, heads, n, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True
        )

    q, k, v = make(q_len), make(kv_len), make(kv_len)
    grad = torch.randn_like(q)
    f = torch.nn.functional.scaled_dot_product_attention

    def run() -> None:
        out = f(q, k, v, is_causal=causal)
        out.backward(grad)

    return run


def measure(heads: int, head_dim: int, repeats: int) -> dict[str, Any]:
    import torch

    rows = []
    for s, cp in CASES:
        c = s // (2 * cp)
        timed = {
            "causal_2c": time_ms(
                torch, _fwd_bwd(torch, heads, head_dim, 2 * c, 2 * c, True), repeats
            ),
            "q2c_kvc": time_ms(torch, _fwd_bwd(torch, heads, head_dim, 2 * c, c, False), repeats),
            "qc_kv2c": time_ms(torch, _fwd_bwd(torch, heads, head_dim, c, 2 * c, False), repeats),
        }
        if s <= WHOLE_MAX_TOKENS:
            timed["whole_s"] = time_ms(torch, _fwd_bwd(torch, heads, head_dim, s, s, True), repeats)
        median = {k: statistics.median(v) for k, v in timed.items()}
        unmasked = (median["q2c_kvc"] + median["qc_kv2c"]) / 2
        ring = median["causal_2c"] + (cp - 1) * unmasked
        model = cp * median["causal_2c"]
        rows.append(
            {
                "tokens": s,
                "cp": cp,
                "block_tokens": 2 * c,
                "samples_ms": timed,
                "median_ms": median,
                "rank_ring_ms": ring,
                "model_ms": model,
                "model_over_ring": model / ring,
                "whole_over_cp": median.get("whole_s", float("nan")) / cp,
            }
        )
        torch.cuda.empty_cache()
    return {
        "measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "heads": heads,
        "head_dim": head_dim,
        "repeats": repeats,
        "rows": rows,
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"{result['device']}, torch {result['torch']}, CUDA {result['cuda']}, "
        f"{result['heads']} heads of {result['head_dim']}, bf16, forward and backward, "
        f"median of {result['repeats']}, {result['measured_at']}",
        f"{'tokens':>7} {'cp':>3} {'2c':>6} {'causal 2c':>10} {'2c x c':>8} {'c x 2c':>8} "
        f"{'ring ms':>9} {'model ms':>9} {'model/ring':>10} {'whole/cp':>9}",
    ]
    for r in result["rows"]:
        m = r["median_ms"]
        lines.append(
            f"{r['tokens']:>7} {r['cp']:>3} {r['block_tokens']:>6} {m['causal_2c']:>10.3f} "
            f"{m['q2c_kvc']:>8.3f} {m['qc_kv2c']:>8.3f} {r['rank_ring_ms']:>9.3f} "
            f"{r['model_ms']:>9.3f} {r['model_over_ring']:>10.3f} {r['whole_over_cp']:>9.3f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    result = measure(args.heads, args.head_dim, args.repeats)
    text = table(result)
    print(text)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({**result, "table": text}, out, indent=1)


if __name__ == "__main__":
    main()
