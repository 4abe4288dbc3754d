"""Serving under load: the simulated replica's latency against the load, and the speed of a
recommendation over the whole shipped catalog with a request rate.

1. A sweep of Llama 3.1 8B on one H100 SXM at 467 in / 256 out (the TensorRT-LLM serving rows'
   shape) from 10% to 99% of the rate the replica completes at its capacity point: TTFT and the
   mean token gap (TPOT) at p50 / p99, the mean decode batch, whether the queue kept growing.
2. `recommend` (the engine, in process, each round on a fresh simulation memo) for a
   low-latency Llama 3.1 8B at 50 requests/s over the shipped catalog: wall and CPU seconds,
   median of the rounds (target: within 2 s on a 2-core machine). The machine's load average
   is printed beside: the wall figure means little on a busy machine, the CPU one less so.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/bench_load.py [--rounds 5] [--record]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import time
from pathlib import Path

from advisor import Workload, load_catalog, recommend
from advisor.perf import inference
from advisor.perf.inference import Deployment, InferenceModel
from advisor.perf.sizing import Shape

RESULTS = Path(__file__).parent / "results"


def sweep(lines: list[str]) -> None:
    catalog = load_catalog()
    acc = catalog.accelerators["h100-sxm"]
    shape = Shape.of(catalog.models["llama-3.1-8b"])
    model = InferenceModel(shape, Deployment(acc, 1, 1, "bf16", acc.interconnect_gb_s), 467, 256)
    most, at = model.max_request_rate()
    lines.append(
        f"Llama 3.1 8B, 1 x H100 SXM, bf16, 467 in / 256 out: completes at most {most:.2f} "
        f"requests/s ({at} sequences); idle prefill {model.prefill_s(467) * 1e3:.1f} ms"
    )
    lines.append(
        f"{'load':>6} {'req/s':>7} {'TTFT p50':>9} {'TTFT p99':>9} {'TPOT p50':>9} "
        f"{'TPOT p99':>9} {'batch':>7} {'growing':>8}"
    )
    for rho in (0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99):
        load = model.under_load(most * rho)
        lines.append(
            f"{rho:>6.2f} {most * rho:>7.2f} {load.ttft.p50_s * 1e3:>8.1f}ms "
            f"{load.ttft.p99_s * 1e3:>8.1f}ms {load.tpot.p50_s * 1e3:>8.2f}ms "
            f"{load.tpot.p99_s * 1e3:>8.2f}ms {load.mean_batch:>7.1f} {load.saturated!s:>8}"
        )


def speed(lines: list[str], rounds: int) -> None:
    catalog = load_catalog()
    ask = Workload(workload="low_latency_inference", model="llama-3.1-8b", request_rate=50)
    walls, cpus = [], []
    for _ in range(rounds):
        inference._LOADS.clear()
        w0, c0 = time.perf_counter(), time.process_time()
        result = recommend(catalog, ask)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    best = result.recommendations[0]
    lines.append(
        f"recommend -w low_latency_inference -m llama-3.1-8b --request-rate 50 over the shipped "
        f"catalog ({rounds} rounds): wall median {statistics.median(walls):.2f} s "
        f"(min {min(walls):.2f}), CPU median {statistics.median(cpus):.2f} s "
        f"(min {min(cpus):.2f}); first: {best.instance_type}; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    lines = [f"bench_load {dt.date.today()} {platform.node()} python {platform.python_version()}"]
    sweep(lines)
    speed(lines, args.rounds)
    text = "\n".join(lines)
    print(text)
    if args.record:
        out = RESULTS / f"load-{dt.date.today()}.txt"
        out.write_text(text + "\n")
        print(f"recorded: {out}")


if __name__ == "__main__":
    main()
