"""CPU time of two source trees, interleaved: `advisor recommend --workload fine_tuning --json`
(the child's user + system time, start-up included) and the engine at 10,000 synthetic
offerings (process time per query, median; bench_recommend.QUERIES). On a loaded machine the
wall times of compare_trees.py scatter by 3x between rounds; CPU time hardly moves. Usage:
    python benchmarks/compare_trees_cpu.py OLD_TREE NEW_TREE [--rounds 7] [--record NAME]"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

CLI = ["-m", "advisor", "recommend", "--workload", "fine_tuning", "--json"]
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
        t0 = time.process_time(); recommend(cat, q); s.append((time.process_time() - t0) * 1000)
print(statistics.median(s))
"""
LABELS = {
    "cli_cpu_ms": "advisor recommend -w fine_tuning --json, CPU ms",
    "engine_cpu_ms": "engine, 10,000 offerings, CPU ms per query",
}


def _run(tree: Path, args: list[str]) -> tuple[float, str]:
    """The child's CPU seconds and its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, *args],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return used, out.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--record", help="file name under benchmarks/results/")
    args = parser.parse_args()
    samples: dict[str, dict[str, list[float]]] = {
        t: {key: [] for key in LABELS} for t in ("old", "new")
    }
    for _ in range(args.rounds):
        for name, tree in (("old", args.old), ("new", args.new)):
            samples[name]["cli_cpu_ms"].append(_run(tree, CLI)[0] * 1000)
            engine = _run(tree, ["-c", ENGINE])[1].strip().splitlines()[-1]
            samples[name]["engine_cpu_ms"].append(float(engine))
    lines = [
        f"# compare_trees_cpu: old={args.old} new={args.new}, {args.rounds} interleaved rounds, "
        f"load average {os.getloadavg()[0]:.2f} at the end",
        f"{'measure':<48} {'old':>9} {'new':>9} {'new/old':>8}",
    ]
    for key, label in LABELS.items():
        old = statistics.median(samples["old"][key])
        new = statistics.median(samples["new"][key])
        lines.append(f"{label:<48} {old:>9.2f} {new:>9.2f} {new / old:>8.2f}")
    text = "\n".join(lines)
    print(text)
    if args.record:
        out = Path(__file__).parent / "results" / args.record
        out.write_text(text + "\n" + repr(samples) + "\n")


if __name__ == "__main__":
    main()
