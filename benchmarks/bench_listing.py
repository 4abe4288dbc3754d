"""GET /v1/probe-reports at fleet sizes: the CPU a page of node reports costs, in-process (the
app through Starlette's test client, the HTTP stack included), on a SQLite store of NODES x DAYS
synthetic node reports (bench_fleet's: 296 checks, about 65 kB each).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_listing.py [--nodes 300] [--days 2]
        [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_fleet import day_bodies  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from advisor.api import create_app  # noqa: E402
from advisor.api.settings import Settings  # noqa: E402
from advisor.store import SqlStore  # noqa: E402
from probes.report import ProbeReport  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=300)
    ap.add_argument("--days", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/listing.db"
        store = SqlStore(url)
        for day in range(args.days):
            for body in day_bodies(args.nodes, day):
                store.add_once(ProbeReport.model_validate_json(body), None)
        stored = store.count()
        store.close()
        print(f"{stored} node reports stored; GET /v1/probe-reports, {args.repeat} requests a row")
        print(f"{'limit':>6} {'answer bytes':>13} {'CPU ms':>8} {'wall ms':>8}")
        with TestClient(create_app(Settings(database_url=url))) as client:  # type: ignore[arg-type]
            for limit in (50, 500):
                client.get(f"/v1/probe-reports?limit={limit}")  # warm
                cpu, wall = time.process_time(), time.perf_counter()
                for _ in range(args.repeat):
                    r = client.get(f"/v1/probe-reports?limit={limit}")
                    assert r.status_code == 200, r.text
                cpu_ms = (time.process_time() - cpu) / args.repeat * 1000
                wall_ms = (time.perf_counter() - wall) / args.repeat * 1000
                print(f"{limit:>6} {len(r.content):>13,} {cpu_ms:>8.0f} {wall_ms:>8.0f}")


if __name__ == "__main__":
    main()
