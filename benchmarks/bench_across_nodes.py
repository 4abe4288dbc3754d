"""Serving a model no node holds: the answers and their cost in CPU time
(advisor/planning/across_nodes.py through estimate and recommend, the shipped catalog).

    PYTHONPATH=. python benchmarks/bench_across_nodes.py [--record]
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from advisor.catalog.loading import load_catalog
from advisor.engine import recommend
from advisor.planning.estimate import estimate
from advisor.request import EstimateRequest, RecommendRequest

T = TypeVar("T")
ESTIMATES = [
    ("high_throughput_inference", "deepseek-v3", "fp8", 16, None),
    ("high_throughput_inference", "deepseek-v3", "fp8", 72, None),
    ("high_throughput_inference", "deepseek-v3", "bf16", None, None),
    ("low_latency_inference", "deepseek-v3", "fp8", 16, None),
    ("low_latency_inference", "deepseek-v3", "fp8", 16, 20.0),
    ("high_throughput_inference", "llama-3.1-405b", "bf16", 16, None),
]


def _timed(fn: Callable[[], T]) -> tuple[T, float]:
    """The answer and the CPU ms of computing it the first time (repeats hit the models'
    memoised steps and loads)."""
    t = time.process_time()
    got = fn()
    return got, (time.process_time() - t) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    cat = load_catalog()
    lines = [
        f"# bench_across_nodes.py, {datetime.date.today()}, CPU ms of each first call, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
        "# estimate on p5.48xlarge (8 H100, 3,200 Gbit/s): "
        "workload model precision GPUs rate -> layout, GPUs, nodes, TTFT, ITL, $/M tokens",
    ]
    for workload, model, precision, gpus, rate in ESTIMATES:
        req = EstimateRequest(
            workload=workload,
            model=model,
            precision=precision,
            instance_type="p5.48xlarge",
            gpu_count=gpus,
            request_rate=rate,
        )
        e, ms = _timed(lambda r=req: estimate(cat, r))
        layout = next((f.formula for f in e.figures if f.name == "gpus_per_replica"), "one node")
        lines.append(
            f"{workload:26} {model:15} {precision:5} {gpus or '-':>3} {rate or '-':>4} -> "
            f"{layout.split(' (advisor')[0]}; {e.hardware.gpus} GPUs, {e.hardware.nodes} nodes, "
            f"TTFT {e.ttft_ms or 0:,.0f} ms, ITL {e.itl_ms or 0:,.1f} ms, "
            f"${e.cost_per_million_tokens_usd or 0:,.2f}/M; {ms:,.0f} ms"
        )
    for rate in (None, 20.0):
        req = RecommendRequest(
            workload="low_latency_inference",
            model="deepseek-v3",
            precision="fp8",
            gpu_count=16,
            request_rate=rate,
            limit=50,
        )
        result, ms = _timed(lambda r=req: recommend(cat, r))
        spanning = [r for r in result.recommendations if r.sizing and r.sizing.layout]
        lines.append(
            f"recommend -w low_latency_inference -m deepseek-v3 --precision fp8 -g 16"
            f"{f' --request-rate {rate:g}' if rate else ''}: {len(result.recommendations)} "
            f"types, {len(spanning)} with a replica over nodes, first "
            f"{result.recommendations[0].instance_type}; {ms:,.0f} ms"
        )
    text = "\n".join(lines)
    print(text)
    if args.record:
        out = (
            Path(__file__).parent / "results" / f"serving-across-nodes-{datetime.date.today()}.txt"
        )
        out.write_text(text + "\n")
        print(f"recorded {out}")


if __name__ == "__main__":
    main()
