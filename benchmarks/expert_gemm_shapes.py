"""The experts' grouped GEMMs of today's mixtures of experts on one GPU, against the ridge.

advisor/perf/training.py runs an expert's GEMM at min(1, tokens / ridge) of the dense rate,
the ridge being where its FLOPs take as long as reading its weights (expert_ridge_tokens). The
shipped H200 table measures that for DeepSeek-V3's experts only; this script measures the
experts of the other presets (gpt-oss-120b, Qwen3-235B-A22B, Mixtral 8x7B, DeepSeek-V3), both
orientations (up: hidden -> expert width; down: back), 8 and 32 experts batched, at 1 to 2,048
tokens an expert, against a dense 8,192-cube GEMM timed in the same run. bf16, CUDA events,
warm-up, every sample kept; the median is the figure and the spread is kept beside it.

    python benchmarks/expert_gemm_shapes.py --out results.json        # on a GPU machine
    PYTHONPATH=. python benchmarks/expert_gemm_shapes.py --compare results.json   # here

--compare prints measured share against the ridge's for the GPU the file names. --tp N with
--out measures each expert at its width over N, as TP ranks hold it without expert parallelism.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

# (preset, hidden, expert intermediate width), from the shipped presets' configs
# (catalog/models.yaml: hidden_size and the experts' intermediate size).
EXPERTS = (
    ("gpt-oss-120b", 2880, 2880),
    ("qwen3-235b-a22b", 4096, 1536),
    ("mixtral-8x7b", 4096, 14336),
    ("deepseek-v3", 7168, 2048),
)
TOKENS = (1, 4, 16, 64, 128, 256, 512, 1024, 2048)
GROUPS = (8, 32)
DENSE_SIDE = 8192
WARMUP, SAMPLES, CALLS = 5, 15, 10  # each sample times CALLS back-to-back calls
# Weights rotated across calls so that a group's weights are read from memory, not from the
# 50 MB L2 cache of the H100/H200: at least this many bytes of distinct weights in rotation.
ROTATE_BYTES = 512 * 2**20


def _time_ms(torch: Any, fn: Any) -> list[float]:
    for _ in range(WARMUP):
        fn(0)
    torch.cuda.synchronize()
    out = []
    for _ in range(SAMPLES):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(CALLS):
            fn(i)
        stop.record()
        stop.synchronize()
        out.append(start.elapsed_time(stop) / CALLS)
    return out


def _grouped(torch: Any, x: Any, ws: list[Any]) -> Any:
    """One call of the experts' batched GEMM, the i-th on the i-th copy of the weights."""
    return lambda i: torch.bmm(x, ws[i % len(ws)])


def split_experts(tp: int) -> tuple[tuple[str, int, int], ...]:
    """The presets' experts as TP ranks hold them without expert parallelism: each expert's
    width over `tp` (Megatron-Core's expert tensor parallelism); the presets' own at TP 1."""
    if tp == 1:
        return EXPERTS
    return tuple((f"{name}/tp{tp}", hidden, width // tp) for name, hidden, width in EXPERTS)


def measure(tp: int = 1) -> dict[str, Any]:
    import torch

    dev, bf16 = torch.device("cuda"), torch.bfloat16
    a = torch.randn(DENSE_SIDE, DENSE_SIDE, device=dev, dtype=bf16)
    b = torch.randn(DENSE_SIDE, DENSE_SIDE, device=dev, dtype=bf16)
    dense = _time_ms(torch, lambda i: a @ b)
    rows = []
    for name, hidden, width in split_experts(tp):
        for k, n in ((hidden, width), (width, hidden)):  # up, then down
            for groups in GROUPS:
                copies = max(1, -(-ROTATE_BYTES // (groups * k * n * 2)))
                ws = [torch.randn(groups, k, n, device=dev, dtype=bf16) for _ in range(copies)]
                for m in TOKENS:
                    x = torch.randn(groups, m, k, device=dev, dtype=bf16)
                    samples = _time_ms(torch, _grouped(torch, x, ws))
                    rows.append(
                        {"model": name, "groups": groups, "m": m, "n": n, "k": k, "ms": samples}
                    )
                ws.clear()
                torch.cuda.empty_cache()
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(0),
        "driver": driver_version(),
        "torch": torch.__version__,
        "method": f"bf16 torch.bmm, CUDA events, {WARMUP} warm-up, {SAMPLES} samples of "
        f"{CALLS} calls, weights rotated over >= {ROTATE_BYTES >> 20} MiB",
        "dense": {"side": DENSE_SIDE, "ms": dense},
        "grouped": rows,
    }


def driver_version() -> str:
    """The NVIDIA driver nvidia-smi reports ("unknown" without one): a GPU record's stack."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def shares(data: dict[str, Any]) -> list[tuple[dict[str, Any], float, float]]:
    """Each grouped row with its median FLOP rate over the dense GEMM's, and that rate's
    spread (the samples' max over min)."""
    side = data["dense"]["side"]
    dense_rate = 2 * side**3 / statistics.median(data["dense"]["ms"])
    out = []
    for r in data["grouped"]:
        flops = 2 * r["groups"] * r["m"] * r["n"] * r["k"]
        out.append(
            (r, flops / statistics.median(r["ms"]) / dense_rate, max(r["ms"]) / min(r["ms"]))
        )
    return out


def compare(path: Path) -> str:
    from advisor.catalog import load_catalog
    from advisor.perf.training import expert_ridge_tokens, grouped_gemm_share

    data = json.loads(path.read_text())
    catalog = load_catalog()
    acc = next(
        a
        for a in catalog.accelerators.values()
        if a.id.split("-")[0].upper() in data["device"].upper()
    )
    ridge = expert_ridge_tokens(acc)
    lines = [
        f"{data['device']} ({acc.id}), driver {data['driver']}, torch {data['torch']}, "
        f"{data['date']}; ridge {ridge:.0f} tokens",
        f"{'model':<20} {'orient':<5} {'groups':>6} {'tokens':>6} {'measured':>9} "
        f"{'ridge':>6} {'ratio':>6} {'roof':>6} {'ratio':>6} {'spread':>6}",
    ]
    weights, roofline = [], []
    for r, share, spread in shares(data):
        predicted = grouped_gemm_share(r["m"], ridge)
        roof = grouped_gemm_share(r["m"], ridge, r["n"], r["k"])  # what training.py reads
        measured = min(share, 1.0)
        weights.append(predicted / measured)
        roofline.append(roof / measured)
        orient = _orientation(r)
        lines.append(
            f"{r['model']:<20} {orient:<5} {r['groups']:>6} {r['m']:>6} {measured:>9.3f} "
            f"{predicted:>6.3f} {predicted / measured:>6.2f} {roof:>6.3f} {roof / measured:>6.2f} "
            f"{spread:>6.2f}"
        )
    for name, ratios in (("weights alone", weights), ("the roofline", roofline)):
        within = sum(1 / 1.25 <= x <= 1.25 for x in ratios)
        lines.append(
            f"{name}: predicted / measured median {statistics.median(ratios):.3f}, "
            f"{within} of {len(ratios)} within x1.25"
        )
    return "\n".join(lines)


def _orientation(row: dict[str, Any]) -> str:
    """up (hidden -> expert width) or down; '-' for square experts (gpt-oss: both 2,880)."""
    tp = int(row["model"].rpartition("/tp")[2] or 1) if "/tp" in row["model"] else 1
    hidden, width = next((h, w) for name, h, w in split_experts(tp) if name == row["model"])
    if hidden == width:
        return "-"
    return "up" if (row["k"], row["n"]) == (hidden, width) else "down"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="measure here (a GPU) and write the JSON")
    parser.add_argument("--compare", type=Path, help="a measured JSON against the ridge")
    parser.add_argument(
        "--tp", type=int, default=1, help="each expert's width over this many TP ranks"
    )
    args = parser.parse_args()
    if args.out:
        args.out.write_text(json.dumps(measure(args.tp), indent=1) + "\n")
        print(f"written {args.out}", file=sys.stderr)
    if args.compare:
        print(compare(args.compare))


if __name__ == "__main__":
    main()
