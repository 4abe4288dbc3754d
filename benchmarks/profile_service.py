"""Where a live `advisor serve` spends its time on distinct recommendation bodies.

Starts `python -m cProfile -m advisor serve` on a fresh SQLite store, loads it with wrk and the
service benchmark's distinct bodies (benchmarks/bench_service.py DISTINCT_LABEL: every request
runs the engine, none is a response-cache hit), stops it with SIGINT (cProfile writes on a normal
exit) and splits the profiled time of the requests into the engine, the result's JSON, the body
parsed and validated, the socket writes and the rest of the HTTP stack, then lists the engine's
own hottest functions. cProfile slows pure-Python code more than C calls: the shares, not the
throughput under it, are the figures.

Run:  .venv/bin/python benchmarks/profile_service.py [--seconds 8] [--record]
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import pstats
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import bench_service as bench

RESULTS = Path(__file__).parent / "results"

# (label, file suffix, function): each part's cumulative time. Parts nest as indented; the
# constraint checks and placement run in both the group pass and the alternatives' pass.
PARTS = (
    ("requests, end to end (ASGI app)", "fastapi/applications.py", "__call__"),
    ("  the route: body, dependencies, endpoint", "advisor/api/strict_json.py", "strict"),
    ("    body parsed and checked (strict JSON)", "advisor/api/strict_json.py", "_parse_and_check"),
    (
        "    dependencies, body validated (FastAPI)",
        "fastapi/dependencies/utils.py",
        "solve_dependencies",
    ),
    (
        "    the endpoint (cache key, engine, JSON)",
        "advisor/api/routes/recommend.py",
        "create_recommendation",
    ),
    ("      engine: recommend()", "advisor/engine/evaluation.py", "recommend"),
    ("        every candidate group checked", "advisor/engine/evaluation.py", "_evaluate_cloud"),
    (
        "        nearest alternatives (nothing fits)",
        "advisor/engine/alternatives.py",
        "nearest_alternatives",
    ),
    (
        "        constraint checks (with their sentences)",
        "advisor/engine/constraints.py",
        "violations",
    ),
    ("        placement", "advisor/engine/placement.py", "place"),
    ("        ranking reasons", "advisor/engine/rank.py", "reasons"),
    ("        rejected_summary", "advisor/engine/evaluation.py", "rejected_summary"),
    (
        "      result to JSON (listing + model_dump_json)",
        "advisor/api/routes/recommend.py",
        "_answer",
    ),
    ("  response written (socket send)", "uvicorn/protocols/http/h11_impl.py", "send"),
    ("event loop idle (epoll)", "selectors.py", "select"),
)


def cumulative(stats: pstats.Stats, suffix: str, function: str) -> tuple[float, int]:
    total, calls = 0.0, 0
    for (filename, _line, name), (_cc, nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if name == function and filename.endswith(suffix):
            total += ct
            calls += nc
    return total, calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds of profiled load")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument(
        "--record", action="store_true", help="write results/service-profile-<date>.txt"
    )
    args = parser.parse_args()
    wrk = shutil.which("wrk")
    if wrk is None:
        parser.error("wrk is not installed (apt-get install -y wrk)")
    ep = next(e for e in bench.ENDPOINTS if e.label == bench.DISTINCT_LABEL)
    out: list[str] = []

    def say(line: str = "") -> None:
        print(line, flush=True)
        out.append(line)

    with tempfile.TemporaryDirectory(prefix="profile-service-") as tmp_s:
        tmp = Path(tmp_s)
        prof, log = tmp / "server.prof", tmp / "server.log"
        cmd = [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "advisor", "serve"]
        cmd += ["--host", bench.HOST, "--port", "0", "--no-access-log", "--log-level", "warning"]
        with log.open("wb") as f:
            proc = subprocess.Popen(
                cmd, cwd=bench.ROOT, env=bench.server_env(tmp / "a.db"), stdout=f, stderr=f
            )
        try:
            port = None
            deadline = time.monotonic() + 60
            while port is None or not bench.healthz_ok(port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server did not start: {log.read_text()[-2000:]}")
                found = bench.LISTENING.search(log.read_text(errors="replace"))
                port = int(found.group(1)) if found else None
                time.sleep(0.05)
            bench.run_wrk(wrk, ep, port, tmp, 2, args.connections, 2)  # warm-up
            cache0 = bench.cache_counts(port)
            res, _ = bench.run_wrk(wrk, ep, port, tmp, args.seconds, args.connections, 2)
            cache = {k: v - cache0.get(k, 0) for k, v in bench.cache_counts(port).items()}
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
        stats = pstats.Stats(str(prof))

    say(
        f"# profile_service {dt.datetime.now().isoformat(timespec='seconds')}: `advisor serve` under cProfile"
    )
    say(
        f"load: wrk -t2 -c{args.connections}, {ep.label!r}, 2 s warm-up then {args.seconds:g} s:"
        f" {res.requests} requests, {res.rps:.0f} req/s under the profiler, p99 {res.p99_ms:.1f} ms,"
        f" {res.errors} errors; response cache {cache.get('hits', 0)} hits, {cache.get('misses', 0)} misses"
    )
    say("(whole process, start-up and warm-up included; shares of the ASGI time are the figures)")
    say()
    app_s, _ = cumulative(stats, *PARTS[0][1:])
    say(f"{'part':<52} {'seconds':>8} {'calls':>8} {'ms/call':>8} {'of requests':>11}")
    for label, suffix, function in PARTS:
        seconds, calls = cumulative(stats, suffix, function)
        if function == "_answer":  # _answer is the engine plus the JSON: the JSON alone
            seconds -= cumulative(stats, "advisor/engine/evaluation.py", "recommend")[0]
        share = f"{100 * seconds / app_s:10.1f}%" if app_s and not label.startswith("event") else ""
        per = 1000 * seconds / calls if calls else 0.0
        say(f"{label:<52} {seconds:8.2f} {calls:8d} {per:8.3f} {share:>11}")
    say()
    say("the engine's hottest functions (own time, advisor/ only):")
    buf = io.StringIO()
    stats.stream = buf  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(r"advisor/", 20)
    lines = buf.getvalue().splitlines()
    start = next((i for i, x in enumerate(lines) if x.strip().startswith("ncalls")), 0)
    for line in lines[start:]:
        if line.strip():
            say("  " + re.sub(r"\S*/advisor/", "advisor/", line.rstrip()))
    if args.record:
        path = RESULTS / f"service-profile-{dt.date.today().isoformat()}.txt"
        path.write_text("\n".join(out) + "\n")
        print(f"recorded: {path.relative_to(bench.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
