"""Plain torch matmul loop: the reference the probe's matmul figures are compared with.

Run on the GPU machine: python3 benchmarks/matmul_ref.py [n] -> prints "dtype best median" lines.
No probe code involved: `c = a @ b` in a loop, timed with CUDA events, best and median of 20.
"""

from __future__ import annotations

import statistics
import sys

import torch


def rates(dtype: torch.dtype, n: int, samples: int = 20, inner: int = 20) -> list[float]:
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(5):
        a @ b
    torch.cuda.synchronize()
    out = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            a @ b
        end.record()
        end.synchronize()
        out.append(2 * n**3 * inner / (start.elapsed_time(end) / 1e3) / 1e12)
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    torch.backends.cuda.matmul.allow_tf32 = False
    for name, dtype in (("fp32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16)):
        r = rates(dtype, n)
        print(f"{name} {max(r):.1f} {statistics.median(r):.1f}")
    torch.backends.cuda.matmul.allow_tf32 = True
    r = rates(torch.float32, n)
    print(f"tf32 {max(r):.1f} {statistics.median(r):.1f}")


if __name__ == "__main__":
    main()
