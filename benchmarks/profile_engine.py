"""Where the engine spends its time on the service's distinct bodies, in-process.

The service benchmark's 4,000 distinct recommendation bodies (benchmarks/bench_service.py
DISTINCT_BODIES), each answered as the service answers it without show_rejected:
recommend(listed=False) and the result's JSON. Prints the CPU time a body (best of --passes),
split by the bodies that something fits and those nothing fits (the nearest alternatives' pass),
then one cProfile pass: the shares of the engine's parts (cumulative, nested parts indented) and
its hottest functions by own time. cProfile slows Python calls more than C ones: the shares, not
the times under it, are the figures. Run it in each of two trees to compare them.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/profile_engine.py [--passes 5] [--top 25]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from advisor.catalog import load_catalog
from advisor.engine import recommend
from advisor.request import RecommendRequest
from benchmarks.bench_service import DISTINCT_BODIES

# (label, file suffix, function or functions "a|b"): each part's cumulative time; the indented
# ones nest. Placement: place() in older trees, place_by_key or KeyPlacer.place ("place") since.
PARTS = (
    ("recommend() and the JSON", "profile_engine.py", "answer"),
    ("  recommend()", "advisor/engine/evaluation.py", "recommend"),
    ("    every candidate group checked", "advisor/engine/evaluation.py", "_evaluate_cloud"),
    ("      placement", "advisor/engine/placement.py", "place|place_by_key"),
    ("      a group's offerings", "advisor/engine/evaluation.py", "_evaluate_group"),
    ("    ranking reasons", "advisor/engine/rank.py", "reasons"),
    ("    recommendations built", "advisor/engine/evaluation.py", "_recommendation"),
    (
        "    nearest alternatives (nothing fits)",
        "advisor/engine/alternatives.py",
        "nearest_alternatives",
    ),
    ("      the static violations they read", "advisor/engine/alternatives.py", "_static"),
    ("    rejected_summary", "advisor/engine/evaluation.py", "rejected_summary"),
    ("  model_dump_json", "pydantic/main.py", "model_dump_json"),
)


def answer(catalog: object, w: RecommendRequest) -> bytes:
    return recommend(catalog, w, None, 5, False).model_dump_json().encode()  # type: ignore[arg-type]


def cumulative(stats: pstats.Stats, suffix: str, function: str) -> float:
    return sum(
        ct
        for (filename, _line, name), (_cc, _nc, _tt, ct, _callers) in stats.stats.items()  # type: ignore[attr-defined]
        if name in function.split("|") and filename.endswith(suffix)
    )


def best_ms(catalog: object, requests: list[RecommendRequest], passes: int) -> float:
    best = float("inf")
    for _ in range(passes):
        t0 = time.process_time()
        for w in requests:
            answer(catalog, w)
        best = min(best, time.process_time() - t0)
    return 1000 * best / max(1, len(requests))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passes", type=int, default=5, help="timed passes (the best counts)")
    parser.add_argument("--top", type=int, default=25, help="functions listed by own time")
    args = parser.parse_args()
    catalog = load_catalog()
    requests = [RecommendRequest.model_validate_json(b) for b in DISTINCT_BODIES]
    none_fit = {i for i, w in enumerate(requests) if not recommend(catalog, w, listed=False).ok}
    fits = [w for i, w in enumerate(requests) if i not in none_fit]
    unfit = [w for i, w in enumerate(requests) if i in none_fit]
    print(f"# profile_engine {time.strftime('%Y-%m-%d %H:%M')} UTC, tree {Path.cwd()}")
    print(
        f"CPU a body, best of {args.passes}: all {len(requests)} "
        f"{best_ms(catalog, requests, args.passes):.3f} ms; something fits ({len(fits)}) "
        f"{best_ms(catalog, fits, args.passes):.3f} ms; nothing fits ({len(unfit)}) "
        f"{best_ms(catalog, unfit, args.passes):.3f} ms"
    )
    profile = cProfile.Profile()
    profile.enable()
    for w in requests:
        answer(catalog, w)
    profile.disable()
    stats = pstats.Stats(profile)
    whole = cumulative(stats, *PARTS[0][1:])
    print(f"cProfile, one pass ({whole:.2f} s under the profiler): share of the whole")
    for label, suffix, function in PARTS:
        print(f"  {label:<48} {100 * cumulative(stats, suffix, function) / whole:5.1f}%")
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(args.top)
    lines = text.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
    print("hottest by own time:")
    for line in lines[start:]:
        if line.strip():
            print("  " + line.replace(str(Path.cwd()) + "/", ""))


if __name__ == "__main__":
    main()
