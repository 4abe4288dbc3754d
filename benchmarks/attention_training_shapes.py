"""Training attention (forward and backward, causal) of today's models on one GPU, against the
share of the 16-bit peak the training model gives it.

advisor/perf/training.py times attention's matmul FLOPs (sizing.attention_training_flops: 6 x
s^2 x heads x head_dim a layer and sequence, forward 2 and backward 4, causal) at the 16-bit peak
times ATTENTION_EFFICIENCY. This script measures that share: the presets' attention shapes
(Llama 3.1 8B, 70B and 405B, Qwen3-235B-A22B, gpt-oss-120b, Mixtral 8x7B: query heads and head
dimension from catalog/models.yaml), whole and split over 8 tensor-parallel ranks (heads / 8), at
2k to 16k tokens a sequence, through torch's scaled_dot_product_attention with each fused backend
the GPU has (flash: FlashAttention-2; cudnn: cuDNN's fused attention, what Transformer Engine runs
under Megatron). The FLOPs a backend executes do not depend on the key/value heads, so keys and
values carry the query heads (grouped-query sharing saves memory traffic, not matmuls). bf16, CUDA
events, warm-up, every sample kept; the median is the figure and the spread is kept beside it.

    python benchmarks/attention_training_shapes.py --out results.json        # on a GPU machine
    PYTHONPATH=. python benchmarks/attention_training_shapes.py --compare results.json   # here

--compare prints each shape's measured share of the peak, in the model's FLOP count, beside
ATTENTION_EFFICIENCY, for the GPU the file names.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.expert_gemm_shapes import driver_version

# (preset, query heads, head dimension), from catalog/models.yaml
MODELS = (
    ("llama-3.1-8b", 32, 128),
    ("llama-3.1-70b", 64, 128),
    ("llama-3.1-405b", 128, 128),
    ("qwen3-235b-a22b", 64, 128),
    ("gpt-oss-120b", 64, 64),
    ("mixtral-8x7b", 32, 128),
)
TP = (1, 8)
SEQ_LENS = (2048, 4096, 8192, 16384)
TOKENS_PER_CALL = 16384  # sequences a call: this many tokens over the sequence length
BACKENDS = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION"}  # SDPBackend names
WARMUP, SAMPLES = 3, 15


def model_flops(seq_len: int, heads: int, head_dim: int) -> float:
    """Forward and backward matmul FLOPs of one causal sequence and layer, counted as the model
    counts them (the model's own rule; imported here, never on the GPU machine's measuring side)."""
    from advisor.perf.sizing import Shape, attention_training_flops_value

    layer = Shape("one layer", 0.0, 0.0, layers=1, heads=heads, head_dim=head_dim)
    return attention_training_flops_value(layer, seq_len, seq_len)


def time_ms(torch: Any, fn: Any, samples: int) -> list[float]:
    """`samples` times of `fn` in milliseconds between CUDA events, after WARMUP calls."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(samples):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        out.append(start.elapsed_time(stop))
    return out


def _step(torch: Any, q: Any, k: Any, v: Any, grad: Any) -> Any:
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def run() -> None:
        out = sdpa(q, k, v, is_causal=True)
        q.grad = k.grad = v.grad = None
        out.backward(grad)

    return run


def _one(
    torch: Any, backend: Any, shape: tuple[int, int, int, int], samples: int
) -> dict[str, Any]:
    batch, heads, s, d = shape
    from torch.nn.attention import sdpa_kernel

    dev, bf16 = torch.device("cuda"), torch.bfloat16
    q, k, v = (
        torch.randn(batch, heads, s, d, device=dev, dtype=bf16, requires_grad=True)
        for _ in range(3)
    )
    grad = torch.randn(batch, heads, s, d, device=dev, dtype=bf16)
    with sdpa_kernel([backend]):
        forward = time_ms(
            torch,
            lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
            samples,
        )
        both = time_ms(torch, _step(torch, q, k, v, grad), samples)
    return {"forward_ms": forward, "forward_backward_ms": both}


def measure(
    models: tuple[str, ...] = (),
    seq_lens: tuple[int, ...] = SEQ_LENS,
    backends: tuple[str, ...] = (),
    samples: int = SAMPLES,
) -> dict[str, Any]:
    """Every preset of MODELS (or those named) at each of `seq_lens`, on each backend (or
    those named)."""
    import torch
    from torch.nn.attention import SDPBackend

    rows = []
    for name, heads, d in MODELS:
        if models and name not in models:
            continue
        for tp in TP:
            for s in seq_lens:
                batch = max(1, TOKENS_PER_CALL // s)
                for backend, kernel in BACKENDS.items():
                    if backends and backend not in backends:
                        continue
                    row = {
                        "model": name,
                        "tp": tp,
                        "heads": heads // tp,
                        "head_dim": d,
                        "seq_len": s,
                        "batch": batch,
                        "backend": backend,
                    }
                    try:
                        shape = (batch, heads // tp, s, d)
                        row |= _one(torch, getattr(SDPBackend, kernel), shape, samples)
                    except RuntimeError as exc:  # a backend this GPU or build lacks
                        row["error"] = str(exc).splitlines()[0][:200]
                    rows.append(row)
                    torch.cuda.empty_cache()
    return {
        "date": dt.date.today().isoformat(),
        "device": torch.cuda.get_device_name(0),
        "driver": driver_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "method": (
            f"causal scaled_dot_product_attention, bf16, {TOKENS_PER_CALL} tokens a call, "
            f"{WARMUP} warm-up and {samples} timed calls between CUDA events; forward alone, "
            "then forward and backward (gradients of queries, keys and values)"
        ),
        "rows": rows,
    }


def shares(record: dict[str, Any], peak_tflops: float) -> list[dict[str, Any]]:
    """Each measured row's share of `peak_tflops` over forward and backward, in the model's FLOP
    count, with its spread (interquartile range over the median of the timed calls)."""
    out = []
    for row in record["rows"]:
        if "error" in row:
            continue
        times = sorted(row["forward_backward_ms"])
        median = statistics.median(times)
        q = statistics.quantiles(times, n=4, method="inclusive")
        flops = row["batch"] * model_flops(row["seq_len"], row["heads"], row["head_dim"])
        out.append(
            {
                **{k: row[k] for k in ("model", "tp", "heads", "head_dim", "seq_len", "backend")},
                "median_ms": median,
                "iqr_over_median": (q[2] - q[0]) / median,
                "share": flops / (median / 1e3) / (peak_tflops * 1e12),
            }
        )
    return out


def best_backend(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per shape, the faster backend's row: what a training stack that picks its kernel runs."""
    best: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in found:
        key = (r["model"], r["tp"], r["seq_len"])
        if key not in best or r["share"] > best[key]["share"]:
            best[key] = r
    return list(best.values())


def compare(path: Path) -> str:
    from advisor.catalog import load_catalog
    from advisor.fleet.verification import match_by_name
    from advisor.perf.training import ATTENTION_EFFICIENCY, peak16_tflops

    record = json.loads(path.read_text())
    catalog = load_catalog()
    acc = match_by_name(catalog, record["device"])  # the probe's own match of the GPU's name
    if acc is None:
        raise SystemExit(f"no catalog accelerator matches {record['device']!r}")
    peak = peak16_tflops(acc) or 0.0
    found = shares(record, peak)
    lines = [
        f"{record['device']} (catalog {acc.id}: 16-bit peak {peak:g} TFLOP/s), driver "
        f"{record['driver']}, torch {record['torch']}, {record['date']}",
        f"model: ATTENTION_EFFICIENCY {ATTENTION_EFFICIENCY:g} of the peak, forward and backward",
        f"{'model':16} {'tp':>2} {'heads':>5} {'d':>4} {'seq':>6} {'backend':>7} "
        f"{'ms':>8} {'iqr':>6} {'share':>6}",
    ]
    for r in found:
        lines.append(
            f"{r['model']:16} {r['tp']:>2} {r['heads']:>5} {r['head_dim']:>4} {r['seq_len']:>6} "
            f"{r['backend']:>7} {r['median_ms']:>8.3f} {r['iqr_over_median']:>6.1%} "
            f"{r['share']:>6.3f}"
        )
    best = best_backend(found)
    values = sorted(r["share"] for r in best)
    lines.append(
        f"faster backend per shape ({len(best)} shapes): share median "
        f"{statistics.median(values):.3f}, range {values[0]:.3f}-{values[-1]:.3f}; "
        f"over ATTENTION_EFFICIENCY median {statistics.median(values) / ATTENTION_EFFICIENCY:.2f}"
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="measure on this machine's GPU, write JSON here")
    ap.add_argument("--compare", type=Path, help="a recorded JSON: print it against the model")
    ap.add_argument("--models", nargs="*", default=(), help="presets of MODELS (default: all)")
    ap.add_argument("--seq-lens", nargs="*", type=int, default=SEQ_LENS)
    ap.add_argument("--backends", nargs="*", default=(), choices=tuple(BACKENDS))
    ap.add_argument("--samples", type=int, default=SAMPLES, help="timed calls a shape")
    args = ap.parse_args()
    if args.out:
        record = measure(
            tuple(args.models), tuple(args.seq_lens), tuple(args.backends), args.samples
        )
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"{len(record['rows'])} rows -> {args.out}")
    if args.compare:
        print(compare(args.compare))
    if not (args.out or args.compare):
        ap.error("give --out (measure) or --compare (a recorded file)")


if __name__ == "__main__":
    main()
