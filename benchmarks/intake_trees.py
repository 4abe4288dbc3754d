"""Report intake of two source trees, interleaved in one run (a loaded machine slows both alike;
the ratio is the figure): each round, in each tree, a fresh PostgreSQL store takes the same
node reports (bench_fleet's synthetic fleet: 296 checks each) one at a time through add_once;
client CPU, PostgreSQL's CPU (psutil over its processes: run it on the database's machine) and
wall time per report, the median of the rounds.

    ADVISOR_BENCH_POSTGRES_URL=postgresql://... python benchmarks/intake_trees.py OLD_TREE NEW_TREE \\
        [--nodes 150] [--days 2] [--rounds 3]

The database's tables are dropped before each tree's turn: give it a database of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_fleet import day_bodies  # noqa: E402

from tests import store_steps  # noqa: E402

CHILD = r"""
import json, sys, time
import psutil
from advisor.store import SqlStore
from probes.report import ProbeReport

def server_cpu():  # every PostgreSQL process on this machine: the backends and the writers
    times = (p.info["cpu_times"] for p in psutil.process_iter(["name", "cpu_times"])
             if (p.info["name"] or "").startswith("postgres") and p.info["cpu_times"])
    return sum(t.user + t.system for t in times)

with open(sys.argv[2]) as f:
    reports = [ProbeReport.model_validate_json(b) for b in json.load(f)]
store = SqlStore(sys.argv[1])
store.add_once(reports[0], None)  # the first write migrates and warms the pool
cpu, wall, server = time.process_time(), time.perf_counter(), server_cpu()
for r in reports[1:]:
    store.add_once(r, None)
n = len(reports) - 1
print(json.dumps({"cpu_ms": (time.process_time() - cpu) / n * 1e3,
                  "server_ms": (server_cpu() - server) / n * 1e3,
                  "wall_ms": (time.perf_counter() - wall) / n * 1e3}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--nodes", type=int, default=150)
    ap.add_argument("--days", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    url = os.environ.get("ADVISOR_BENCH_POSTGRES_URL")
    if not url:
        sys.exit("set ADVISOR_BENCH_POSTGRES_URL (a database of its own: its tables are dropped)")
    bodies = [b for day in range(args.days) for b in day_bodies(args.nodes, day)]
    found: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(bodies, f)
        f.flush()
        for _ in range(args.rounds):
            for name, tree in (("old", args.old), ("new", args.new)):
                store_steps.drop_all(url)
                env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
                done = subprocess.run(
                    [sys.executable, "-c", CHILD, url, f.name],
                    cwd=tree,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                found[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{len(bodies) - 1} node reports a round, {args.rounds} rounds, one writer")
    print(
        f"{'tree':6} {'client CPU ms/report':>22} {'PostgreSQL CPU ms/report':>26} {'wall ms/report':>16}"
    )
    for name, runs in found.items():
        cpu, server, wall = (
            statistics.median(r[key] for r in runs) for key in ("cpu_ms", "server_ms", "wall_ms")
        )
        print(f"{name:6} {cpu:22.1f} {server:26.1f} {wall:16.1f}")


if __name__ == "__main__":
    main()
