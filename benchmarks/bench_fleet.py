"""The fleet summary and intake at fleet scale, on PostgreSQL: a synthetic fleet of NODES nodes
x 8 GPUs x DAYS daily node reports (each GPU's checks of tests/synthetic_fleet.py's probe run,
plus health checks without a ratio: about 300 checks a report) stored through the store's
add_once by THREADS writers (each body parsed as the service parses a post; the reports are made
in another process, so that this process's RSS is the server's), then GET /v1/fleet/summary
timed through the app (in-process, the HTTP stack included) and, with --review, GET /v1/review
once. Targets: summary p99 <= 50 ms, review <= 2 s, intake >= 200 reports/s, RSS <= 300 MB.

    ADVISOR_BENCH_POSTGRES_URL=postgresql://... python benchmarks/bench_fleet.py \
        [--nodes 1000] [--days 30] [--threads 4] [--review] [--out FILE]

The database's tables are dropped first: give it a database of its own.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402

from advisor import load_catalog  # noqa: E402
from advisor.api import create_app  # noqa: E402
from advisor.api.settings import Settings  # noqa: E402
from advisor.store import SqlStore  # noqa: E402
from advisor.store.base import token_id  # noqa: E402
from probes.report import ProbeReport  # noqa: E402
from tests import store_steps  # noqa: E402
from tests import synthetic_fleet as synthetic  # noqa: E402

FIXTURES = (
    ROOT / "benchmarks/results/probe-2026-11-30-nvidia-h200-driver580.159.04-torch2.11.0+cu130"
)
HEALTH = 20  # checks without a ratio per GPU (ECC, throttling, XID ... as a node report has)
TOKEN = "bench-token"


def node_reports(catalog: Any, base: dict[str, Any], nodes: int, day: int) -> Iterator[ProbeReport]:
    """One day's node reports: each node's GPUs' runs as one report (the same nodes every day,
    measured with each day's noise)."""
    runs = synthetic.probe_reports(catalog, base, nodes * 8, nodes, seed=7 + day, host_seed=7)
    by_host: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        by_host[run["inventory"]["hostname"]].append(run)
    when = dt.datetime(2026, 11, 1, tzinfo=dt.UTC) + dt.timedelta(days=day)
    for host_runs in by_host.values():
        first = host_runs[0]
        checks = []
        for run in host_runs:
            gpu = run["device"]
            checks += [{**c, "gpu": gpu} for c in run["checks"]]
            checks += [
                {"name": f"health_{k}", "status": "pass", "gpu": gpu, "detail": "ok"}
                for k in range(HEALTH)
            ]
        worst = "fail" if any(r["verdict"] == "fail" for r in host_runs) else first["verdict"]
        yield ProbeReport.model_validate(
            {**first, "created_at": when.isoformat(), "verdict": worst, "checks": checks}
        )


def day_bodies(nodes: int, day: int) -> list[str]:
    """One day's node reports as the JSON bodies a client would post (in the maker process)."""
    base = json.loads((FIXTURES / "probe-quick.json").read_text())
    base.pop("measurements", None)  # the raw samples: not what the store aggregates
    return [r.model_dump_json() for r in node_reports(load_catalog(), base, nodes, day)]


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--review", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    url = os.environ["ADVISOR_BENCH_POSTGRES_URL"]
    store_steps.drop_all(url)
    store = SqlStore(url)
    tid = token_id(TOKEN)
    stored = 0
    lock = threading.Lock()
    busy = 0.0
    checks = 0

    def put(body: str) -> None:
        nonlocal stored, checks
        report = ProbeReport.model_validate_json(body)  # as the service reads a posted body
        store.add_once(report, None, None, tid)
        with lock:
            stored += 1
            checks = len(report.checks)

    # The reports are made in another process, so that this one's RSS is the server's alone.
    with ProcessPoolExecutor(1) as maker, ThreadPoolExecutor(args.threads) as pool:
        for day in range(args.days):
            bodies = maker.submit(day_bodies, args.nodes, day).result()
            start = time.perf_counter()
            list(pool.map(put, bodies))
            busy += time.perf_counter() - start
            del bodies
            print(f"day {day + 1}: {stored} reports, {stored / busy:.0f}/s", file=sys.stderr)
    rss_after_intake = rss_mb()
    settings = Settings(database_url=url, api_tokens=(TOKEN,))  # type: ignore[arg-type]
    with TestClient(create_app(settings, store=store)) as client:
        times = []
        for _ in range(args.requests):
            start = time.perf_counter()
            r = client.get("/v1/fleet/summary")
            times.append(time.perf_counter() - start)
            assert r.status_code == 200, r.text
        q = statistics.quantiles(times, n=100, method="inclusive")
        review = None
        if args.review:
            start = time.perf_counter()
            r = client.get("/v1/review")
            review = time.perf_counter() - start
            assert r.status_code == 200, r.status_code
    rows = [
        (
            "fleet",
            f"{args.nodes} nodes x 8 GPUs x {args.days} days: {stored} reports of {checks} checks",
        ),
        (
            "intake (add_once, " + f"{args.threads} threads)",
            f"{stored / busy:.0f} reports/s (target >= 200)",
        ),
        ("GET /v1/fleet/summary p50", f"{q[49] * 1000:.1f} ms"),
        ("GET /v1/fleet/summary p99", f"{q[98] * 1000:.1f} ms (target <= 50 ms)"),
        ("GET /v1/review", "not run" if review is None else f"{review:.2f} s (target <= 2 s)"),
        ("RSS after intake (peak)", f"{rss_after_intake:.0f} MB (target <= 300 MB)"),
        ("RSS peak with the summary and review", f"{rss_mb():.0f} MB"),
    ]
    width = max(len(k) for k, _ in rows)
    text = "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
    print(text)
    if args.out:
        command = "ADVISOR_BENCH_POSTGRES_URL=... python " + " ".join(sys.argv)
        args.out.write_text(
            f"# {command}\n# {dt.date.today()}, PostgreSQL {store_steps_version(url)}\n{text}\n"
        )
    store.close()


def store_steps_version(url: str) -> str:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "?"


if __name__ == "__main__":
    main()
