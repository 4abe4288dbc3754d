"""Engine and CLI speed of two source trees, measured interleaved in one run (a loaded machine
slows both alike; the ratio is the figure). Usage:
    python benchmarks/compare_trees.py OLD_TREE NEW_TREE [--rounds 5] [--record NAME]
Each round, in each tree: the engine at 10,000 synthetic offerings (bench_recommend.QUERIES,
median per query set); the engine and its JSON for the service benchmark's distinct bodies
(bench_service.DISTINCT_BODIES, the first 800, shipped catalog: CPU time per body, the best of
5 passes); the same for all 4,000 of them as the service answers them (rejections summarised;
the best of 2 passes), which include the requests nothing satisfies (the nearest alternatives'
pass); and `advisor recommend --workload fine_tuning --json` wall time."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ENGINE = """
import statistics, sys, time
sys.path.insert(0, "benchmarks")
from bench_recommend import synthetic, QUERIES
from advisor.catalog import load_catalog
from advisor.engine import recommend
cat = synthetic(load_catalog(), 10_000)
for q in QUERIES: recommend(cat, q)
s = []
for _ in range(10):
    for q in QUERIES:
        t0 = time.perf_counter(); recommend(cat, q); s.append((time.perf_counter() - t0) * 1000)
print(statistics.median(s))
"""
DISTINCT = """
import sys, time
sys.path.insert(0, "benchmarks")
from bench_service import DISTINCT_BODIES
from advisor.catalog import load_catalog
from advisor.engine import recommend
from advisor.request import RecommendRequest
cat = load_catalog()
reqs = [RecommendRequest.model_validate_json(b) for b in DISTINCT_BODIES[:800]]
for r in reqs[:200]: recommend(cat, r).model_dump_json()
passes = []
for _ in range(5):
    t0 = time.process_time()
    for r in reqs: recommend(cat, r).model_dump_json()
    passes.append((time.process_time() - t0) / len(reqs) * 1000)
print(min(passes))
"""
ALL_DISTINCT = """
import sys, time
sys.path.insert(0, "benchmarks")
from bench_service import DISTINCT_BODIES
from advisor.catalog import load_catalog
from advisor.engine import recommend
from advisor.request import RecommendRequest
import inspect
cat = load_catalog()
reqs = [RecommendRequest.model_validate_json(b) for b in DISTINCT_BODIES]
for r in reqs[:200]: recommend(cat, r).model_dump_json()
# as the service answers: trees before recommend(listed=...) dropped the list afterwards
if "listed" in inspect.signature(recommend).parameters:
    answer = lambda r: recommend(cat, r, listed=r.show_rejected)
else:
    answer = lambda r: recommend(cat, r).listing(r.show_rejected)
passes = []
for _ in range(2):
    t0 = time.process_time()
    for r in reqs: answer(r).model_dump_json()
    passes.append((time.process_time() - t0) / len(reqs) * 1000)
print(min(passes))
"""
CLI = ["-m", "advisor", "recommend", "--workload", "fine_tuning", "--json"]


def engine_ms(tree: Path, code: str = ENGINE) -> float:
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tree,
        env=_env(tree),
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def cli_s(tree: Path) -> float:
    subprocess.run(
        [sys.executable, *CLI], cwd=tree, env=_env(tree), capture_output=True, check=True
    )
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, *CLI], cwd=tree, env=_env(tree), capture_output=True, check=True
    )
    return time.perf_counter() - t0


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--record", help="file name under benchmarks/results/")
    args = parser.parse_args()
    samples: dict[str, dict[str, list[float]]] = {
        t: {"engine_ms": [], "distinct_ms": [], "all_distinct_ms": [], "cli_s": []}
        for t in ("old", "new")
    }
    for _ in range(args.rounds):
        for name, tree in (("old", args.old), ("new", args.new)):
            samples[name]["engine_ms"].append(engine_ms(tree))
            samples[name]["distinct_ms"].append(engine_ms(tree, DISTINCT))
            samples[name]["all_distinct_ms"].append(engine_ms(tree, ALL_DISTINCT))
            samples[name]["cli_s"].append(cli_s(tree))
    lines = [
        f"# compare_trees: old={args.old} new={args.new}, {args.rounds} interleaved rounds, "
        f"load average {os.getloadavg()[0]:.2f} at the end",
        f"{'measure':<44} {'old':>10} {'new':>10} {'new/old':>8}",
    ]
    labels = {
        "engine_ms": "engine, 10,000 offerings (median)",
        "distinct_ms": "engine + JSON, service's distinct bodies",
        "all_distinct_ms": "the same, all 4,000, as served",
        "cli_s": "advisor recommend wall",
    }
    for key, unit, scale in (
        ("engine_ms", "ms", 1.0),
        ("distinct_ms", "ms", 1.0),
        ("all_distinct_ms", "ms", 1.0),
        ("cli_s", "ms", 1000.0),
    ):
        old = statistics.median(samples["old"][key]) * scale
        new = statistics.median(samples["new"][key]) * scale
        label = labels[key]
        lines.append(f"{label:<44} {old:>8.2f}{unit} {new:>8.2f}{unit} {new / old:>8.2f}")
    text = "\n".join(lines)
    print(text)
    if args.record:
        out = Path(__file__).parent / "results" / args.record
        out.write_text(text + "\n" + json.dumps(samples, indent=1) + "\n")


if __name__ == "__main__":
    main()
