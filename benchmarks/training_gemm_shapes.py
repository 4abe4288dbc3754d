"""A training layer's GEMMs at their own shapes on one GPU, against the operator table's reading.

advisor/perf/train_gemms.py times a layer's forward, input-gradient and weight-gradient GEMMs
(the widths tensor parallelism leaves, the tokens context parallelism leaves) by interpolating
the shipped operator table's grid, and compares them with the table's 8,192-cube rate. This
script times exactly those shapes on the GPU, with the table's own method (probes/ops.py: CUDA
graphs, weights rotated past the L2 cache, the median of short samples), and the cube in the
same run, so that the table's interpolation and the factor it gives can be checked shape by
shape.

    python3 benchmarks/training_gemm_shapes.py --out results.json      # on a GPU machine
    PYTHONPATH=. python benchmarks/training_gemm_shapes.py --compare results.json   # here
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from pathlib import Path
from typing import Any

# (preset, TP, tokens a rank's micro-batch holds): the layouts of the calibration rows and the
# plans they are compared with (benchmarks/training_layouts.py): Llama 3 405B at TP 8 without
# CP (the paper's) and with CP 2 and 4 (the planner's), Llama 3 8B and 70B, Llama 2 7B.
CASES = (
    ("llama-3.1-405b", 8, 8192),
    ("llama-3.1-405b", 8, 4096),
    ("llama-3.1-405b", 8, 2048),
    ("llama-3-70b", 8, 8192),
    ("llama-3-70b", 4, 4096),
    ("llama-3-8b", 1, 8192),
    ("llama-3-8b", 2, 4096),
    ("llama-2-7b", 1, 4096),
)
PRECISIONS = ("bf16", "fp8")
CUBE = 8192
REPEATS, SAMPLE_S = 7, 0.005  # probes/ops.py's full table


def _shapes() -> dict[str, list[tuple[int, int, int]]]:
    from advisor.catalog import load_catalog
    from advisor.perf.sizing import Shape
    from advisor.perf.train_gemms import layer_gemms, training_passes

    catalog = load_catalog()
    out = {}
    for preset, tp, tokens in CASES:
        gemms = layer_gemms(Shape.of(catalog.models[preset]), tp, tokens)
        assert gemms is not None, preset
        passes = training_passes(gemms, True)
        out[f"{preset} tp{tp} m{tokens}"] = [(int(m), int(n), int(k)) for m, n, k in passes]
    return out


def measure() -> dict[str, Any]:
    import torch

    from benchmarks.expert_gemm_shapes import driver_version
    from probes import ops
    from probes.device import TorchDevice

    dev = TorchDevice(torch, 0)
    timer = ops.Timer(dev, REPEATS, SAMPLE_S)
    rows = []
    for precision in PRECISIONS:
        shapes = {(CUBE, CUBE, CUBE)} | {s for v in _shapes().values() for s in v}
        for m, n, k in sorted(shapes):
            with dev.oom_guard(f"gemm {precision} {m}x{n}x{k}"):
                w = ops._weights(dev, precision, n, k)
                t = timer(ops._gemm_fn(dev, precision, m, w, k))
                del w
            dev.release()
            rows.append({"precision": precision, "m": m, "n": n, "k": k, **t})
            print(f"{precision} {m}x{n}x{k}: {t['median_us']} us", file=sys.stderr)
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(0),
        "driver": driver_version(),
        "torch": torch.__version__,
        "method": f"probes/ops.py Timer: CUDA graphs, {REPEATS} samples of {SAMPLE_S} s, "
        "weights rotated past the L2 cache (the table's own)",
        "cases": _shapes(),
        "gemm": rows,
    }


def compare(path: Path) -> str:
    """Each case's factor (its passes' time over the same FLOPs at the cube's rate) measured
    here and read from the shipped table of the same GPU; the table's time for the case's
    GEMMs over the measured time, the figure a plan reads (the cube cancels there: the GEMM
    time is the table's at the shapes over the calibrated 0.51 / 0.73, whatever the cube); and
    each shape's time against the table's interpolation."""
    from advisor.perf.op_model import table_for

    data = json.loads(path.read_text())
    acc = "h200-sxm" if "H200" in data["device"].upper() else "h100-sxm"
    table = table_for(acc)
    assert table is not None, acc
    lines = [
        f"{data['device']} ({acc}), driver {data['driver']}, torch {data['torch']}, "
        f"{data['date']}; table: {table.source}",
        f"{'case':<26} {'prec':<5} {'measured':>9} {'table':>7} {'ratio':>6} {'time':>6}",
    ]
    errors, cubes = [], []
    for precision in PRECISIONS:
        us = {
            (r["m"], r["n"], r["k"]): r["median_us"]
            for r in data["gemm"]
            if r["precision"] == precision
        }
        if not us:
            continue
        cube_us = us[(CUBE, CUBE, CUBE)]
        cube_t = table.gemm_time(precision, CUBE, CUBE, CUBE, loaded=False)
        assert cube_t is not None
        cubes.append(
            f"{precision} 8,192 cube: table {2 * CUBE**3 / cube_t.seconds / 1e12:,.0f} TFLOP/s, "
            f"measured {2 * CUBE**3 / cube_us / 1e6:,.0f}"
        )
        for case, passes in data["cases"].items():
            flops = sum(2 * m * n * k for m, n, k in passes)
            measured_us = sum(us[tuple(p)] for p in passes)
            measured = measured_us / (flops / (2 * CUBE**3 / cube_us))
            read = 0.0
            for m, n, k in passes:
                t = table.gemm_time(precision, m, n, k, loaded=False)
                assert t is not None
                read += t.seconds
                errors.append(t.seconds * 1e6 / us[(m, n, k)])
            factor = read / (flops / (2 * CUBE**3 / cube_t.seconds))
            lines.append(
                f"{case:<26} {precision:<5} {measured:>9.3f} {factor:>7.3f} "
                f"{factor / measured:>6.3f} {read * 1e6 / measured_us:>6.3f}"
            )
    errors.sort()
    lines += cubes
    lines.append(
        f"shapes: {len(errors)}; table time / measured: median {statistics.median(errors):.3f}, "
        f"range {errors[0]:.3f}-{errors[-1]:.3f}"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="measure here (a GPU) and write the JSON")
    parser.add_argument("--compare", type=Path, help="a measured JSON against the table")
    args = parser.parse_args()
    if args.out:
        args.out.write_text(json.dumps(measure(), indent=1) + "\n")
        print(f"written {args.out}", file=sys.stderr)
    if args.compare:
        print(compare(args.compare))


if __name__ == "__main__":
    main()
