"""Report intake of two source trees, interleaved in one run (a loaded machine slows both alike;
the ratio is the figure): each round, in each tree, a fresh PostgreSQL store takes the same
node reports (bench_fleet's synthetic fleet: 296 checks each) through add_once.

    ADVISOR_BENCH_POSTGRES_URL=postgresql://... python benchmarks/intake_trees.py OLD_TREE NEW_TREE \\
        [--nodes 150] [--days 2] [--rounds 3] [--processes 1] [--threads 1]

One writer (the default): client CPU, PostgreSQL's CPU (psutil over its processes: run it on the
database's machine) and wall time per report, the median of the rounds. With --processes P
--threads T, P writer processes (as P service processes sharing one database) of T threads each
take the reports in turn, started together: reports a second over them all, and CPU a report of
the writers together and of PostgreSQL. The reports are parsed before the clock starts.

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
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_fleet import day_bodies  # noqa: E402

from tests import store_steps  # noqa: E402

# argv: database URL, bodies file, this writer's index, writers, threads, start (epoch seconds)
CHILD = r"""
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
from advisor.store import SqlStore
from probes.report import ProbeReport

url, path, index, writers, threads, start = sys.argv[1:7]
with open(path) as f:
    bodies = json.load(f)
mine = [ProbeReport.model_validate_json(b) for b in bodies[int(index)::int(writers)]]
store = SqlStore(url)
store.add_once(mine[0], None)  # the first write migrates and warms the pool
while time.time() < float(start):
    time.sleep(0.001)
cpu, t0 = time.process_time(), time.time()
with ThreadPoolExecutor(int(threads)) as pool:
    list(pool.map(lambda r: store.add_once(r, None), mine[1:]))
print(json.dumps({"n": len(mine) - 1, "cpu_s": time.process_time() - cpu,
                  "t0": t0, "t1": time.time()}), flush=True)
sys.stdin.readline()  # connected until PostgreSQL's CPU is read: a backend's ends with it
"""


def server_cpu() -> float:
    """CPU seconds of every PostgreSQL process on this machine: the backends and the writers."""
    times = (
        p.info["cpu_times"]
        for p in psutil.process_iter(["name", "cpu_times"])
        if (p.info["name"] or "").startswith("postgres") and p.info["cpu_times"]
    )
    return sum(t.user + t.system for t in times)


def one_round(tree: Path, url: str, bodies: str, args: argparse.Namespace) -> dict[str, float]:
    """Every writer of one tree, started together once each has parsed its reports and written
    its first; the figures of all of them."""
    store_steps.drop_all(url)
    env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
    start = time.time() + 5 + 2 * args.processes  # time to parse, migrate and warm
    given = (str(args.processes), str(args.threads), str(start))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, url, bodies, str(i), *given],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(args.processes)
    ]
    while time.time() < start:
        time.sleep(0.001)
    server = server_cpu()
    found = []
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline()
        if not line:
            raise RuntimeError(f"a writer of {tree} failed ({p.wait()})")
        found.append(json.loads(line))
    server = server_cpu() - server
    for p in procs:
        p.communicate("\n")
    n = sum(f["n"] for f in found)
    wall = max(f["t1"] for f in found) - min(f["t0"] for f in found)
    return {
        "per_s": n / wall,
        "cpu_ms": sum(f["cpu_s"] for f in found) / n * 1e3,
        "server_ms": server / n * 1e3,
        "wall_ms": wall / n * 1e3,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--nodes", type=int, default=150)
    ap.add_argument("--days", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    url = os.environ.get("ADVISOR_BENCH_POSTGRES_URL")
    if not url:
        sys.exit("set ADVISOR_BENCH_POSTGRES_URL (a database of its own: its tables are dropped)")
    found: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump([b for day in range(args.days) for b in day_bodies(args.nodes, day)], f)
        f.flush()
        for _ in range(args.rounds):
            for name, tree in (("old", args.old), ("new", args.new)):
                found[name].append(one_round(tree, url, f.name, args))
    writers = args.processes * args.threads
    reports = args.nodes * args.days - args.processes
    print(
        f"{reports} node reports a round, {args.rounds} rounds, {args.processes} writer "
        f"process(es) x {args.threads} thread(s)"
    )
    last = "wall ms/report" if writers == 1 else "reports/s"
    print(f"{'tree':6} {'client CPU ms/report':>22} {'PostgreSQL CPU ms/report':>26} {last:>16}")
    for name, runs in found.items():
        cpu, server, wall, per_s = (
            statistics.median(r[key] for r in runs)
            for key in ("cpu_ms", "server_ms", "wall_ms", "per_s")
        )
        print(f"{name:6} {cpu:22.1f} {server:26.1f} {wall if writers == 1 else per_s:16.1f}")


if __name__ == "__main__":
    main()
