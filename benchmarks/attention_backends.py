"""Causal attention through each of torch's fused SDPA backends on this GPU: the forward alone
(prefill) and the forward and backward (a training step), by sequence length, in TFLOP/s of
the causal matmuls (forward 2 x 2 x s^2 x h x d / 2; the backward 2.5 times the forward, as
FlashAttention counts it). Which backend torch picks by default, and how far the fastest one is
from it: the operator table times the default (probes/ops.py).

    python3 benchmarks/attention_backends.py [--heads 32] [--head-dim 128] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any


def _time_ms(torch: Any, fn: Any, repeats: int = 10) -> float:
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        samples.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    f = torch.nn.functional.scaled_dot_product_attention
    h, d = args.heads, args.head_dim
    backends = {
        "default": None,
        "flash": SDPBackend.FLASH_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
    }
    rows = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, heads {h}, head dim {d}")
    print(
        f"{'tokens':>7} {'backend':>10} {'fwd ms':>9} {'fwd TF/s':>9} {'f+b ms':>9} {'f+b TF/s':>9}"
    )
    for s in (2048, 8192, 32768):
        fwd_flops = 2 * 2 * s * s * h * d / 2
        q, k, v = (
            torch.randn(1, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(3)
        )
        grad = torch.randn_like(q)
        for name, backend in backends.items():

            def fwd(q: Any = q, k: Any = k, v: Any = v) -> Any:
                with torch.no_grad():
                    return f(q, k, v, is_causal=True)

            def step(q: Any = q, k: Any = k, v: Any = v, grad: Any = grad) -> None:
                q.grad = k.grad = v.grad = None
                f(q, k, v, is_causal=True).backward(grad)

            try:
                if backend is None:
                    a, b = _time_ms(torch, fwd), _time_ms(torch, step)
                else:
                    with sdpa_kernel([backend]):
                        a, b = _time_ms(torch, fwd), _time_ms(torch, step)
            except RuntimeError as exc:
                print(f"{s:>7} {name:>10} not available: {str(exc).splitlines()[0][:80]}")
                continue
            row = {"tokens": s, "backend": name, "fwd_ms": a, "fwd_tflops": fwd_flops / a / 1e9,
                   "train_ms": b, "train_tflops": 3.5 * fwd_flops / b / 1e9}  # fmt: skip
            rows.append(row)
            print(
                f"{s:>7} {name:>10} {a:9.3f} {row['fwd_tflops']:9.1f} {b:9.3f} {row['train_tflops']:9.1f}"
            )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    main()
