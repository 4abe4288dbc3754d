"""The engine's CPU time a body on the service benchmark's distinct bodies, by kind: those that
something fits, those that nothing fits (the nearest alternatives' pass) and all of them, for two
source trees measured interleaved in one run (a loaded machine slows both alike). Usage:
    python benchmarks/nothing_fits.py OLD_TREE NEW_TREE [--rounds 5] [--passes 3]
Each round runs each tree once, in a fresh process of its own: the 4,000 bodies of
benchmarks/bench_service.py DISTINCT_BODIES answered as the service answers them without
show_rejected (recommend(listed=False) and the result's JSON), each kind timed as the best of
--passes passes (time.process_time); the figure is each tree's best round."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

KINDS = ("something fits", "nothing fits", "all")

MEASURE = """
import json, sys, time
sys.path.insert(0, "benchmarks")
from bench_service import DISTINCT_BODIES
from advisor.catalog import load_catalog
from advisor.engine import recommend
from advisor.request import RecommendRequest
catalog = load_catalog()
bodies = [RecommendRequest.model_validate_json(b) for b in DISTINCT_BODIES]
unfit = {i for i, w in enumerate(bodies) if not recommend(catalog, w, listed=False).recommendations}
kinds = {
    "something fits": [w for i, w in enumerate(bodies) if i not in unfit],
    "nothing fits": [w for i, w in enumerate(bodies) if i in unfit],
    "all": bodies,
}
out = {}
for kind, requests in kinds.items():
    best = float("inf")
    for _ in range(PASSES):
        t0 = time.process_time()
        for w in requests:
            recommend(catalog, w, listed=False).model_dump_json()
        best = min(best, time.process_time() - t0)
    out[kind] = (len(requests), 1000 * best / len(requests))
print(json.dumps(out))
"""


def measure(tree: Path, passes: int) -> dict[str, tuple[int, float]]:
    code = MEASURE.replace("PASSES", str(passes))
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    return {k: (n, ms) for k, (n, ms) in json.loads(run.stdout).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    best: dict[str, dict[str, tuple[int, float]]] = {}
    for r in range(args.rounds):
        for name, tree in trees.items():
            found = measure(tree, args.passes)
            kept = best.setdefault(name, found)
            for kind, (n, ms) in found.items():
                if ms < kept[kind][1]:
                    kept[kind] = (n, ms)
            line = "; ".join(f"{kind} {found[kind][1]:.3f}" for kind in KINDS)
            print(f"round {r + 1} {name}: {line} ms a body", flush=True)
    print(f"# nothing_fits {time.strftime('%Y-%m-%d %H:%M')} UTC, best of {args.rounds} rounds")
    for name, tree in trees.items():
        print(f"{name}: {tree}")
    print(f"{'kind':<16} {'bodies':>6} {'old ms':>8} {'new ms':>8} {'new/old':>8}")
    for kind in KINDS:
        n, old = best["old"][kind]
        new = best["new"][kind][1]
        print(f"{kind:<16} {n:>6} {old:>8.3f} {new:>8.3f} {new / old:>8.2f}")


if __name__ == "__main__":
    main()
