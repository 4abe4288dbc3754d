"""`advisor probe --ops`: the operator table of one GPU (probes.ops_table), timed as the probe
times everything (probes.device: warm-up, CUDA events read after one final synchronisation,
medians and spread over samples; the host clock on a CPU).

What is measured, over the shapes transformer layers use:
- GEMMs Y = X W^T by (M tokens, N, K) per precision the chip runs (bf16, fp16; fp8 through
  torch._scaled_mm on compute capability 8.9+; fp4 where torch offers it, else noted), and the
  batched GEMMs of MoE experts (`groups` experts of M tokens each);
- attention through scaled_dot_product_attention (FlashAttention on a GPU): causal prefill by
  sequence length and head dim, decode (one query token) by batch x cached context, and
  training's causal forward and backward by sequence length and head dim;
- memory-bound operators (RMSNorm, SiLU x gate, rotary, residual add, sampling over a vocabulary);
- the launch cost of one kernel and of one tiny layer's launches.

Weights and KV caches are rotated over copies that together exceed the GPU's last-level cache
(ROTATE_BYTES): a served model reads each layer's weights once a pass, never from cache, and a
loop over one small matrix would time cache bandwidth instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from probes.device import TorchDevice
from probes.errors import OutOfDeviceMemory
from probes.ops_table import (
    ELEM_BYTES,
    AttentionRow,
    GemmRow,
    LaunchRow,
    MemoryOpRow,
    SustainedRow,
)
from probes.stats import summarize

ROTATE_BYTES = 512 << 20  # well past the 50-60 MB L2 of Hopper and 126 MB of Blackwell
MAX_COPIES = 1024


@dataclass(frozen=True)
class OpsPlan:
    """The shapes of one mode; `sample_s` is how long one timed sample lasts."""

    precisions: tuple[str, ...]
    gemm_m: tuple[int, ...]
    gemm_nk: tuple[int, ...]
    grouped: tuple[tuple[int, int, int, int], ...]  # (groups, m per group, n, k)
    prefill_tokens: tuple[int, ...]
    train_tokens: tuple[int, ...]  # training attention's sequence lengths
    decode_batch: tuple[int, ...]
    decode_context: tuple[int, ...]
    head_dims: tuple[int, ...]
    heads: int
    kv_heads: int
    memory_tokens: tuple[int, ...]
    widths: tuple[int, ...]
    kv_widths: tuple[int, ...]  # K and V elements of one token in one layer on one GPU
    vocabularies: tuple[int, ...]
    sustain: tuple[int, int, int]  # the (M, N, K) run back to back, and for how long:
    sustain_s: float
    repeats: int
    sample_s: float


def _pow2(lo: int, hi: int) -> tuple[int, ...]:
    return tuple(1 << i for i in range(lo, hi + 1))


PLANS: dict[str, OpsPlan] = {
    "quick": OpsPlan(
        precisions=("bf16", "fp8"),
        gemm_m=(1, 8, 64, 512, 4096, 16384),
        gemm_nk=(1024, 4096, 16384),
        grouped=((8, 16, 2048, 7168), (8, 256, 2048, 7168)),
        prefill_tokens=(512, 4096, 32768),
        train_tokens=(2048, 8192),
        decode_batch=(1, 16, 256),
        decode_context=(512, 8192),
        head_dims=(128,),
        heads=32,
        kv_heads=8,
        memory_tokens=(1, 256, 8192),
        widths=(8192,),
        kv_widths=(1024,),
        vocabularies=(128256,),
        sustain=(8192, 8192, 8192),
        sustain_s=10.0,
        repeats=5,
        sample_s=0.002,
    ),
    "full": OpsPlan(
        precisions=("bf16", "fp16", "fp8", "fp4"),
        gemm_m=_pow2(0, 14),
        gemm_nk=(1024, 2048, 4096, 8192, 16384, 32768),
        grouped=tuple(
            (g, m, n, k)
            for g in (8, 32, 128)
            for m in (1, 16, 128, 1024)
            for n, k in ((2048, 7168), (7168, 2048))
        ),
        prefill_tokens=_pow2(7, 15),
        train_tokens=_pow2(10, 15),
        decode_batch=_pow2(0, 8),
        decode_context=_pow2(7, 15),
        head_dims=(64, 128),
        heads=32,
        kv_heads=8,
        memory_tokens=_pow2(0, 14)[::2],
        widths=(4096, 8192, 16384),
        kv_widths=(256, 1024, 4096),
        vocabularies=(32000, 128256, 151936),
        sustain=(8192, 8192, 8192),
        sustain_s=30.0,
        repeats=7,
        sample_s=0.005,
    ),
    # the CPU test's: shapes small enough to time in a second on a laptop
    "tiny": OpsPlan(
        precisions=("fp32", "bf16"),
        gemm_m=(1, 4, 16),
        gemm_nk=(64, 128),
        grouped=((2, 4, 64, 64),),
        prefill_tokens=(32, 64),
        train_tokens=(32, 64),
        decode_batch=(1, 2),
        decode_context=(32, 64),
        head_dims=(16,),
        heads=4,
        kv_heads=2,
        memory_tokens=(1, 8),
        widths=(64,),
        kv_widths=(32,),
        vocabularies=(256,),
        sustain=(64, 64, 64),
        sustain_s=0.05,
        repeats=3,
        sample_s=0.0005,
    ),
}

Progress = Callable[[str], None]


class Timer:
    """Times a callable through TorchDevice: one call calibrates how many make a sample of
    `sample_s`, then warm-up, then `repeats` samples; returns the row's statistics.

    On a GPU the `inner` calls of a sample are captured once in a CUDA graph and the graph is
    replayed (unless `graph` is False): the table then holds what the device spends on each
    operator, as in a serving engine's CUDA-graph decode, not how fast Python can launch it;
    the launch cost itself is measured apart (launch_rows, eager)."""

    def __init__(self, dev: TorchDevice, repeats: int, sample_s: float) -> None:
        self.dev, self.repeats, self.sample_s = dev, repeats, sample_s

    def __call__(self, fn: Callable[[], object], graph: bool = True) -> dict[str, float]:
        fn()  # library set-up (handles, kernel selection) stays out of every timed region
        once = max(self.dev.time_once(fn), 1e-7)
        inner = max(1, min(1000, math.ceil(self.sample_s / once)))
        if graph and self.dev.is_cuda:
            replay = self._captured(fn, inner)
            seconds = [s / inner for s in self.dev.time(replay, inner=1, repeats=self.repeats)]
        else:
            seconds = self.dev.time(fn, inner=inner, repeats=self.repeats)
        m = summarize("op", "us", [s * 1e6 for s in seconds])
        assert m.median is not None and m.iqr is not None and m.cv is not None
        return {"median_us": _sig(max(m.median, 1e-3)), "iqr_us": _sig(m.iqr), "cv": _sig(m.cv)}

    def _captured(self, fn: Callable[[], object], inner: int) -> Callable[[], object]:
        torch = self.dev.torch
        side = torch.cuda.Stream(self.dev.device)
        side.wait_stream(torch.cuda.current_stream(self.dev.device))
        with torch.cuda.stream(side):  # warm-up off the capture (torch's documented recipe)
            for _ in range(2):
                fn()
        torch.cuda.current_stream(self.dev.device).wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(inner):
                fn()
        return g.replay  # type: ignore[no-any-return]


def _sig(x: float) -> float:
    """Four significant digits: the timings' spread is wider than that."""
    return float(f"{x:.4g}")


def rotating(make: Callable[[], Any], nbytes: float) -> Callable[[], Any]:
    """Copies of what `make` builds (`nbytes` each) enough to exceed ROTATE_BYTES; each call
    of the returned function gives the next one."""
    copies = [make() for _ in range(max(1, min(MAX_COPIES, math.ceil(ROTATE_BYTES / nbytes))))]
    state = {"i": 0}

    def next_copy() -> Any:
        state["i"] = (state["i"] + 1) % len(copies)
        return copies[state["i"]]

    return next_copy


def torch_dtype(torch: Any, precision: str) -> Any:
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def attention_precision(dev: TorchDevice) -> str:
    """What attention runs in: 16-bit on a GPU (bf16), fp32 on a CPU (its bf16 is emulated)."""
    return "bf16" if dev.is_cuda else "fp32"


def supported(dev: TorchDevice, precision: str) -> str | None:
    """None when `precision` GEMMs can be timed here, else why not."""
    torch = dev.torch
    cc = torch.cuda.get_device_capability(dev.device) if dev.is_cuda else (0, 0)
    if precision == "fp8" and cc < (8, 9):
        return "fp8 GEMMs need compute capability 8.9 or newer (torch._scaled_mm)"
    if precision == "fp4" and (cc < (10, 0) or not hasattr(torch, "float4_e2m1fn_x2")):
        return "fp4 GEMMs need compute capability 10.0 (Blackwell) and torch's float4_e2m1fn_x2"
    if precision == "fp32" and dev.is_cuda:
        return "fp32 GEMMs are not a serving precision on a GPU"
    return None


def _gemm_fn(dev: TorchDevice, precision: str, m: int, w: Callable[[], Any], k: int) -> Any:
    torch = dev.torch
    if precision == "fp8":
        # torch._scaled_mm wants M and K in multiples of 16; serving engines pad the same way
        mp = max(16, -(-m // 16) * 16)
        x = torch.randn(mp, k, device=dev.device).to(torch.float8_e4m3fn)
        one = torch.tensor(1.0, device=dev.device)
        return lambda: torch._scaled_mm(
            x, w().t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
        )
    x = torch.randn(m, k, device=dev.device, dtype=torch_dtype(torch, precision))
    return lambda: torch.nn.functional.linear(x, w())


def _weights(dev: TorchDevice, precision: str, n: int, k: int) -> Callable[[], Any]:
    torch = dev.torch

    def make() -> Any:
        if precision == "fp8":
            return torch.randn(n, k, device=dev.device).to(torch.float8_e4m3fn)
        return torch.randn(n, k, device=dev.device, dtype=torch_dtype(torch, precision))

    return rotating(make, n * k * ELEM_BYTES[precision])


def gemm_rows(
    dev: TorchDevice, precision: str, plan: OpsPlan, timer: Timer, say: Progress
) -> list[GemmRow]:
    """Every (N, K, M) of the plan in `precision`: one weight set per (N, K), all M over it."""
    rows = []
    for n in plan.gemm_nk:
        for k in plan.gemm_nk:
            say(f"gemm {precision} n={n} k={k}")
            with dev.oom_guard(f"gemm {precision} {n}x{k}"):
                w = _weights(dev, precision, n, k)
                for m in plan.gemm_m:
                    t = timer(_gemm_fn(dev, precision, m, w, k))
                    rows.append(GemmRow(precision=precision, m=m, n=n, k=k, **t))
                del w
            dev.release()
    return rows


def grouped_rows(dev: TorchDevice, plan: OpsPlan, timer: Timer, say: Progress) -> list[GemmRow]:
    """MoE experts: `groups` GEMMs of M tokens, each its own weights, in one batched matmul
    (bf16; what an expert layer does when tokens are grouped by expert)."""
    torch = dev.torch
    dtype = torch.bfloat16
    rows = []
    for groups, m, n, k in plan.grouped:
        say(f"grouped gemm {groups} x ({m}, {n}, {k})")
        with dev.oom_guard(f"grouped gemm {groups}x{m}x{n}x{k}"):
            w = rotating(
                partial(torch.randn, groups, k, n, device=dev.device, dtype=dtype),
                groups * n * k * 2,
            )
            x = torch.randn(groups, m, k, device=dev.device, dtype=dtype)
            t = timer(partial(_bmm, torch, x, w))
        rows.append(GemmRow(precision="bf16", m=m, n=n, k=k, groups=groups, **t))
        dev.release()
    return rows


def _bmm(torch: Any, x: Any, w: Callable[[], Any]) -> Any:
    return torch.bmm(x, w())


def _fits(dev: TorchDevice, nbytes: float) -> bool:
    return nbytes * 2 < dev.free_bytes() * 0.5


def attention_rows(
    dev: TorchDevice, plan: OpsPlan, timer: Timer, say: Progress, notes: list[str]
) -> tuple[list[AttentionRow], list[AttentionRow]]:
    """Causal prefill of one sequence by length (`heads` heads, FlashAttention's path through
    SDPA on a GPU); decode of `batch` single-token queries over a cached context, 16-bit."""
    torch = dev.torch
    sdpa = torch.nn.functional.scaled_dot_product_attention
    precision = attention_precision(dev)
    dtype = torch_dtype(torch, precision)
    h = plan.heads
    prefill: list[AttentionRow] = []
    decode: list[AttentionRow] = []
    for d in plan.head_dims:
        for s in plan.prefill_tokens:
            say(f"attention prefill tokens={s} head_dim={d}")
            with dev.oom_guard(f"prefill attention of {s} tokens"):
                q = torch.randn(1, h, s, d, device=dev.device, dtype=dtype)
                t = timer(partial(sdpa, q, q, q, is_causal=True))
            prefill.append(
                AttentionRow(
                    precision=precision, batch=1, tokens=s, heads=h, kv_heads=h, head_dim=d, **t
                )
            )
            dev.release()
        for b in plan.decode_batch:
            for c in plan.decode_context:
                decode += _decode_row(dev, plan, timer, say, notes, (b, c, d))
    return prefill, decode


def training_attention_rows(
    dev: TorchDevice, plan: OpsPlan, timer: Timer, say: Progress
) -> tuple[list[AttentionRow], list[AttentionRow]]:
    """(causal, ring) rows by sequence length, `heads` heads, 16-bit on a GPU (the fused kernel
    torch picks, as a training step runs it): the causal forward and backward of one sequence,
    and the two unmasked blocks of a ring context-parallel rank (OpsTable.attention_ring: `s`
    queries over s / 2 keys, s / 2 queries over `s` keys), which run below the causal kernel's
    time for the same work (no masked diagonal). Eager, not replayed from a graph: a training
    step's attention is not captured."""
    causal: list[AttentionRow] = []
    ring: list[AttentionRow] = []
    for d in plan.head_dims:
        for s in plan.train_tokens:
            say(f"attention training tokens={s} head_dim={d}")
            with dev.oom_guard(f"training attention of {s} tokens"):
                t = timer(_attention_step(dev, plan.heads, d, ((s, s),), True), graph=False)
            causal.append(_train_row(dev, plan.heads, d, s, t))
            dev.release()
            with dev.oom_guard(f"ring attention blocks of {s} tokens"):
                blocks = ((s, s // 2), (s // 2, s))
                t = timer(_attention_step(dev, plan.heads, d, blocks, False), graph=False)
            ring.append(_train_row(dev, plan.heads, d, s, t))
            dev.release()
    return causal, ring


def _attention_step(
    dev: TorchDevice, heads: int, head_dim: int, blocks: tuple[tuple[int, int], ...], causal: bool
) -> Callable[[], None]:
    """One forward and backward of each (queries, keys) block, `heads` heads of `head_dim`."""
    torch = dev.torch
    sdpa = torch.nn.functional.scaled_dot_product_attention
    dtype = torch_dtype(torch, attention_precision(dev))

    def tensor(n: int, grad: bool = True) -> Any:
        return torch.randn(
            1, heads, n, head_dim, device=dev.device, dtype=dtype, requires_grad=grad
        )

    made = [(tensor(q), tensor(k), tensor(k), tensor(q, grad=False)) for q, k in blocks]

    def step() -> None:
        for q, k, v, grad in made:
            q.grad = k.grad = v.grad = None
            sdpa(q, k, v, is_causal=causal).backward(grad)

    return step


def _train_row(dev: TorchDevice, heads: int, head_dim: int, tokens: int, t: Any) -> AttentionRow:
    return AttentionRow(
        precision=attention_precision(dev),
        batch=1,
        tokens=tokens,
        heads=heads,
        kv_heads=heads,
        head_dim=head_dim,
        **t,
    )


def _decode_row(
    dev: TorchDevice,
    plan: OpsPlan,
    timer: Timer,
    say: Progress,
    notes: list[str],
    shape: tuple[int, int, int],
) -> list[AttentionRow]:
    """One query token per sequence over `kv_heads` cached heads (one query head per KV head:
    what a GQA kernel reads is the KV cache, whatever the query heads sharing it)."""
    torch = dev.torch
    sdpa = torch.nn.functional.scaled_dot_product_attention
    precision = attention_precision(dev)
    dtype = torch_dtype(torch, precision)
    b, c, d = shape
    kvh = plan.kv_heads
    cache_bytes = 2 * b * kvh * c * d * (4 if not dev.is_cuda else 2)
    if not _fits(dev, cache_bytes):
        notes.append(f"decode attention batch {b} x {c} tokens skipped: memory")
        return []
    say(f"attention decode batch={b} context={c} head_dim={d}")
    with dev.oom_guard(f"decode attention {b} x {c}"):
        q = torch.randn(b, kvh, 1, d, device=dev.device, dtype=dtype)
        kv = rotating(
            lambda: torch.randn(2, b, kvh, c, d, device=dev.device, dtype=dtype), cache_bytes
        )

        def step() -> Any:
            k, v = kv()
            return sdpa(q, k, v)

        t = timer(step)
    dev.release()
    return [
        AttentionRow(
            precision=precision, batch=b, tokens=c, heads=kvh, kv_heads=kvh, head_dim=d, **t
        )
    ]


def memory_rows(dev: TorchDevice, plan: OpsPlan, timer: Timer, say: Progress) -> list[MemoryOpRow]:
    torch = dev.torch
    f = torch.nn.functional
    dtype = torch.bfloat16 if dev.is_cuda else torch.float32
    rows: list[MemoryOpRow] = []
    for tokens in plan.memory_tokens:
        for width in plan.widths:
            say(f"memory-bound operators tokens={tokens} width={width}")
            x = torch.randn(tokens, width, device=dev.device, dtype=dtype)
            g = torch.randn(tokens, 2 * width, device=dev.device, dtype=dtype)
            wn = torch.ones(width, device=dev.device, dtype=dtype)
            cos = torch.randn(tokens, width // 2, device=dev.device, dtype=dtype)
            sin = torch.randn(tokens, width // 2, device=dev.device, dtype=dtype)

            def rotary(x: Any = x, cos: Any = cos, sin: Any = sin) -> Any:
                a, b = x[:, 0::2], x[:, 1::2]
                return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)

            def silu_mul(g: Any = g, width: int = width) -> Any:
                return f.silu(g[:, :width]) * g[:, width:]

            ops: dict[str, Callable[[], object]] = {
                "rms_norm": partial(f.rms_norm, x, (width,), wn, 1e-6),
                "silu_mul": silu_mul,
                "rotary": rotary,
                "residual_add": partial(x.add_, x),
            }
            for op, fn in ops.items():
                rows.append(MemoryOpRow(op=op, tokens=tokens, width=width, **timer(fn)))
        for vocab in plan.vocabularies:
            say(f"sampling tokens={tokens} vocabulary={vocab}")
            logits = torch.randn(tokens, vocab, device=dev.device, dtype=dtype)

            def sample(logits: Any = logits) -> Any:
                probs = torch.softmax(logits.float() / 0.7, dim=-1)
                return torch.argmax(probs, dim=-1)

            rows.append(MemoryOpRow(op="sampling", tokens=tokens, width=vocab, **timer(sample)))
        dev.release()
    return rows


def kv_write_rows(
    dev: TorchDevice, plan: OpsPlan, timer: Timer, say: Progress
) -> list[MemoryOpRow]:
    """Each new token's keys and values stored at scattered slots of one cache (16-bit), as a
    paged-cache engine writes them every pass: one row of `width` elements per token."""
    torch = dev.torch
    dtype = torch.bfloat16 if dev.is_cuda else torch.float32
    most = max(plan.memory_tokens)
    rows: list[MemoryOpRow] = []
    for width in plan.kv_widths:
        say(f"KV-cache writes width={width}")
        # a cache past the last-level cache on a GPU, so that the writes reach memory
        slots = max(4 * most, ROTATE_BYTES // (2 * width) if dev.is_cuda else 0)
        with dev.oom_guard(f"kv_write {slots}x{width}"):
            cache = torch.zeros(slots, width, device=dev.device, dtype=dtype)
            for tokens in plan.memory_tokens:
                where = torch.randperm(slots, device=dev.device)[:tokens]
                kv = torch.randn(tokens, width, device=dev.device, dtype=dtype)
                t = timer(partial(cache.index_copy_, 0, where, kv))
                rows.append(MemoryOpRow(op="kv_write", tokens=tokens, width=width, **t))
            del cache
        dev.release()
    return rows


def sustained_rows(
    dev: TorchDevice, plan: OpsPlan, timer: Timer, say: Progress
) -> list[SustainedRow]:
    """The plan's `sustain` GEMM in its first precision, back to back for `sustain_s`: samples
    of about 50 ms queued without a host synchronisation, the first second's and the last
    half's summarised apart (probes.measure reads a power-capped matmul the same way)."""
    precision = plan.precisions[0]
    m, n, k = plan.sustain
    say(f"sustained gemm {precision} {m}x{n}x{k} for {plan.sustain_s:g} s")
    with dev.oom_guard(f"sustained gemm {m}x{n}x{k}"):
        fn = _gemm_fn(dev, precision, m, _weights(dev, precision, n, k), k)
        fn()
        once = max(dev.time_once(fn), 1e-7)
        inner = max(1, math.ceil(0.05 / once))
        per_sample = inner * once
        samples = max(4, math.ceil(plan.sustain_s / per_sample))
        run = timer._captured(fn, inner) if dev.is_cuda else fn
        seconds = dev.time(run, inner=1 if dev.is_cuda else inner, repeats=samples)
    if dev.is_cuda:
        seconds = [s / inner for s in seconds]
    first = seconds[: max(2, math.ceil(1.0 / per_sample))]
    phases = {"first": first, "settled": seconds[len(seconds) // 2 :]}
    rows = []
    for phase, values in phases.items():
        stats = summarize("op", "us", [s * 1e6 for s in values])
        assert stats.median is not None and stats.iqr is not None and stats.cv is not None
        rows.append(
            SustainedRow(
                precision=precision,
                m=m,
                n=n,
                k=k,
                seconds=plan.sustain_s,
                phase=phase,
                median_us=_sig(max(stats.median, 1e-3)),
                iqr_us=_sig(stats.iqr),
                cv=_sig(stats.cv),
            )
        )
    dev.release()
    return rows


def launch_rows(dev: TorchDevice, timer: Timer, say: Progress) -> list[LaunchRow]:
    """One tiny kernel, and one layer of width 64 (norm, QKV, rotary, attention, output,
    residual, norm, gate-up, SiLU x gate, down, residual): launch costs with no work behind,
    eager (what Python's launches cost) and on a GPU replayed from a CUDA graph."""
    torch = dev.torch
    f = torch.nn.functional
    say("launch costs")
    dtype = torch.bfloat16 if dev.is_cuda else torch.float32
    one = torch.zeros(1, device=dev.device, dtype=dtype)
    width = 64
    x = torch.randn(1, width, device=dev.device, dtype=dtype)
    w = {
        name: torch.randn(n, width, device=dev.device, dtype=dtype)
        for name, n in (("qkv", 3 * width), ("o", width), ("up", 2 * width))
    }
    down = torch.randn(width, width, device=dev.device, dtype=dtype)
    wn = torch.ones(width, device=dev.device, dtype=dtype)

    def layer() -> Any:
        h = f.rms_norm(x, (width,), wn)
        q, k, v = f.linear(h, w["qkv"]).view(1, 3, 4, 1, width // 4).unbind(1)
        q = q * 1.0 + k  # stands for the rotary kernel
        a = f.scaled_dot_product_attention(q, k, v).reshape(1, width)
        y = x + f.linear(a, w["o"])
        h = f.rms_norm(y, (width,), wn)
        gu = f.linear(h, w["up"])
        return y + f.linear(f.silu(gu[:, :width]) * gu[:, width:], down)

    layer_kernels = 13  # the calls above that launch a kernel each (view/unbind/slices do not)
    rows = [
        LaunchRow(name="kernel", kernels=1, graph=False, **timer(lambda: one.add_(1), False)),
        LaunchRow(name="layer", kernels=layer_kernels, graph=False, **timer(layer, False)),
    ]
    if dev.is_cuda:  # the same replayed from a CUDA graph: the device's own per-kernel cost
        rows += [
            LaunchRow(name="kernel", kernels=1, graph=True, **timer(lambda: one.add_(1))),
            LaunchRow(name="layer", kernels=layer_kernels, graph=True, **timer(layer)),
        ]
    return rows


def safe(what: str, notes: list[str], fn: Callable[[], Any], default: Any) -> Any:
    """One section that cannot run (no kernel for a precision, out of memory) is noted, and the
    others still run."""
    try:
        return fn()
    except (OutOfDeviceMemory, RuntimeError, NotImplementedError, TypeError) as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        notes.append(f"{what}: {text[:300]}")
        return default
