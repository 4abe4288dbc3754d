"""The service's throughput target judged in alternating slices, so that a shared machine's
drift moves both sides of the ratio alike (benchmarks/bench_service.py measures each endpoint
once, one after another: runs of the same code gave distinct/healthz 12-20% on one afternoon).

One server (`python -m advisor serve`, a fresh SQLite store); then, `--rounds` times: a slice of
GET /healthz and a slice of distinct recommendation bodies (bench_service.DISTINCT_BODIES, taken
on from where the last slice stopped, so none repeats within 4,000), each with wrk for
`--seconds`. Per round: both throughputs, their ratio and the server's CPU per request; the
median of each over the rounds, judged against the 0.4x target.

Run:  .venv/bin/python benchmarks/service_ratio.py [--rounds 8] [--seconds 3] [--record NAME]
Needs wrk (apt-get install -y wrk). Exit status 1 when the median ratio misses the target.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_service import (
    DISTINCT_LABEL,
    ENDPOINTS,
    RESULTS,
    TARGET_RATIO_28,
    Endpoint,
    Result,
    cpu_seconds,
    run_wrk,
    server,
)

HEALTH, DISTINCT = (
    next(e for e in ENDPOINTS if e.label == label) for label in ("GET /healthz", DISTINCT_LABEL)
)


def measured(
    wrk: str, pid: int, port: int, tmp: Path, args: argparse.Namespace, ep: Endpoint
) -> Result:
    """One slice of one endpoint, with the server's CPU per request."""
    c0 = cpu_seconds(pid)
    res, _ = run_wrk(wrk, ep, port, tmp, args.seconds, args.connections, 2)
    res.server_cpu_ms = 1000 * (cpu_seconds(pid) - c0) / max(1, res.requests)
    if res.errors:
        raise RuntimeError(f"{res.endpoint.label}: {res.errors} errors {res.error_detail}")
    return res


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0, help="wrk seconds per slice")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--record", metavar="NAME", help="also write benchmarks/results/NAME")
    args = parser.parse_args()
    wrk = shutil.which("wrk")
    if wrk is None:
        parser.error("wrk is not installed (apt-get install -y wrk)")
    lines = [
        f"# service_ratio {time.strftime('%Y-%m-%d %H:%M')} UTC: {args.rounds} rounds of "
        f"{args.seconds:g} s slices, {args.connections} connections, wrk -t2",
        f"{'round':>5} {'healthz/s':>10} {'distinct/s':>11} {'ratio':>6} "
        f"{'healthz ms/req':>15} {'distinct ms/req':>16} {'distinct p99 ms':>16}",
    ]
    print(lines[0], lines[1], sep="\n", flush=True)
    rows: list[tuple[Result, Result]] = []
    with tempfile.TemporaryDirectory(prefix="service-ratio-") as tmp_s:
        tmp = Path(tmp_s)
        with server(tmp / "advisor.db", tmp / "server.log") as (pid, port, _ready):
            measured(wrk, pid, port, tmp, args, DISTINCT)  # warm-up: first answers, caches
            measured(wrk, pid, port, tmp, args, HEALTH)
            for i in range(args.rounds):
                health = measured(wrk, pid, port, tmp, args, HEALTH)
                distinct = measured(wrk, pid, port, tmp, args, DISTINCT)
                rows.append((health, distinct))
                line = (
                    f"{i + 1:>5} {health.rps:>10.0f} {distinct.rps:>11.0f} "
                    f"{distinct.rps / health.rps:>6.3f} {health.server_cpu_ms:>15.3f} "
                    f"{distinct.server_cpu_ms:>16.3f} {distinct.p99_ms:>16.1f}"
                )
                print(line, flush=True)
                lines.append(line)
    ratio = statistics.median(d.rps / h.rps for h, d in rows)
    summary = [
        f"median ratio {ratio:.3f} (target >= {TARGET_RATIO_28}: "
        f"{'MET' if ratio >= TARGET_RATIO_28 else 'NOT MET'}); server CPU a request: /healthz "
        f"{statistics.median(h.server_cpu_ms for h, _ in rows):.3f} ms, a distinct body "
        f"{statistics.median(d.server_cpu_ms for _, d in rows):.3f} ms; distinct p99 "
        f"{statistics.median(d.p99_ms for _, d in rows):.1f} ms (median of the rounds)",
    ]
    print(summary[0])
    if args.record:
        (RESULTS / args.record).write_text("\n".join([*lines, *summary]) + "\n")
    return 0 if ratio >= TARGET_RATIO_28 else 1


if __name__ == "__main__":
    sys.exit(main())
