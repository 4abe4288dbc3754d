"""What the catalog cache saves a command (the validated catalog cached, keyed by
the files' hashes).

Times `advisor recommend --workload fine_tuning --memory-gb 80 --json` (interpreter start
included) with a warm cache and with ADVISOR_NO_CACHE=1, alternating in one run so that both
see the same machine load, and checks that both print the same answer. In-process, it also
times load_catalog without a cache, a cache hit, and a miss that writes the file.

Run:  .venv/bin/python benchmarks/bench_catalog_cache.py [--runs 15] [--record]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
COMMAND = ["recommend", "--workload", "fine_tuning", "--memory-gb", "80", "--json"]


def wall(env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "advisor", *COMMAND],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    return time.perf_counter() - start, done.stdout


def in_process(fn: Callable[[], object], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--record", action="store_true", help="write benchmarks/results/...")
    args = parser.parse_args()

    from advisor.catalog.loading import load_catalog

    with tempfile.TemporaryDirectory(prefix="advisor-cache-bench-") as tmp:
        cache = Path(tmp) / "cache"
        base = {k: v for k, v in os.environ.items() if k != "ADVISOR_NO_CACHE"}
        cached_env = {**base, "ADVISOR_CACHE_DIR": str(cache)}
        uncached_env = {**cached_env, "ADVISOR_NO_CACHE": "1"}
        _, reference = wall(cached_env)  # a miss: writes the cache file
        files = sorted(cache.glob("catalog-*.pickle"))
        cached: list[float] = []
        uncached: list[float] = []
        for _ in range(args.runs):  # alternating: the same load on the machine for both
            seconds, out = wall(cached_env)
            assert out == reference, "a cache hit changed the answer"
            cached.append(seconds)
            seconds, out = wall(uncached_env)
            assert out == reference, "the answers differ without the cache"
            uncached.append(seconds)

        load_dir = Path(tmp) / "in-process"
        no_cache = in_process(load_catalog, args.runs)
        load_catalog(cache_dir=load_dir)
        hit = in_process(lambda: load_catalog(cache_dir=load_dir), args.runs)
        misses = []
        for _ in range(args.runs):
            for old in load_dir.glob("catalog-*.pickle"):
                old.unlink()
            misses += in_process(lambda: load_catalog(cache_dir=load_dir), 1)
        size_kb = sum(f.stat().st_size for f in files) / 1024

    ms = 1000.0
    lines = [
        f"# bench_catalog_cache {dt.datetime.now().isoformat(timespec='seconds')} "
        f"python {platform.python_version()} on {platform.machine()} ({os.cpu_count()} cores)",
        f"command: advisor {' '.join(COMMAND)}  ({args.runs} runs each, alternating)",
        f"{'measure':44} {'median':>9} {'min':>9} {'max':>9}",
    ]
    rows = [
        ("advisor recommend, warm cache (wall)", cached),
        ("advisor recommend, ADVISOR_NO_CACHE=1 (wall)", uncached),
        ("load_catalog(), no cache (in-process)", no_cache),
        ("load_catalog(cache_dir), hit (in-process)", hit),
        ("load_catalog(cache_dir), miss + write", misses),
    ]
    for name, times in rows:
        lines.append(
            f"{name:44} {statistics.median(times) * ms:7.1f}ms {min(times) * ms:7.1f}ms "
            f"{max(times) * ms:7.1f}ms"
        )
    saved = (statistics.median(uncached) - statistics.median(cached)) * ms
    paired = statistics.median(u - c for u, c in zip(uncached, cached, strict=True)) * ms
    lines.append(
        f"saved per command: {saved:.0f} ms (difference of the medians), {paired:.0f} ms (median "
        f"of the {args.runs} back-to-back pairs); cache file {size_kb:.0f} KiB"
    )
    lines.append("answers: identical with and without the cache (checked on every run)")
    text = "\n".join(lines)
    print(text)
    if args.record:
        stamp = dt.date.today().isoformat()
        (RESULTS / f"catalog-cache-{stamp}.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
