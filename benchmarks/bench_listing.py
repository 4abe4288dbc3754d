"""GET /v1/probe-reports at fleet sizes: the CPU a page of node reports costs, in-process (the
app through Starlette's test client, the HTTP stack included), on a SQLite store of NODES x DAYS
synthetic node reports (bench_fleet's: 296 checks, about 65 kB each).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_listing.py [--nodes 300] [--days 2]
        [--repeat 5]

With --utilisation N: GET /v1/utilisation-reports over N utilisation reports of about 900 kB
(400 GPUs with their evidence: under the 1 MiB body limit), posted with a write token; the
listing is open to anyone without ADVISOR_READ_TOKENS. --database-url: a PostgreSQL database
to use instead of a SQLite file (its tables are dropped first).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_fleet import day_bodies  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from advisor.api import create_app  # noqa: E402
from advisor.api.settings import Settings  # noqa: E402
from advisor.store import SqlStore  # noqa: E402
from probes.report import ProbeReport  # noqa: E402
from tests.store_steps import drop_all  # noqa: E402

TOKEN = "bench-listing-token"


def utilisation_body(i: int) -> dict[str, Any]:
    gpu = {"samples": 600, "finding": ("idle", "optimized", None)[i % 3]}
    return {
        "created_at": dt.datetime.now(dt.UTC).isoformat(),
        "host": f"node-{i}",
        "instance_type": "p5en.48xlarge",
        "duration_s": 600.0,
        "interval_s": 1.0,
        "gpus": [dict(gpu, index=k, evidence=["x" * 200] * 9) for k in range(400)],
    }


def listing(client: TestClient, path: str, repeat: int) -> None:
    print(f"{'limit':>6} {'answer bytes':>13} {'CPU ms':>8} {'wall ms':>8}")
    for limit in (50, 500):
        client.get(f"{path}?limit={limit}")  # warm
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(repeat):
            r = client.get(f"{path}?limit={limit}")
            assert r.status_code == 200, r.text
        cpu_ms = (time.process_time() - cpu) / repeat * 1000
        wall_ms = (time.perf_counter() - wall) / repeat * 1000
        print(f"{limit:>6} {len(r.content):>13,} {cpu_ms:>8.0f} {wall_ms:>8.0f}")


def utilisation(url: str, count: int, repeat: int) -> None:
    settings = Settings(database_url=url, api_tokens=TOKEN)  # type: ignore[arg-type]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(settings)) as client:
        for i in range(count):
            r = client.post("/v1/utilisation-reports", json=utilisation_body(i), headers=auth)
            assert r.status_code == 201, r.text
        size = len(json.dumps(utilisation_body(0)))
        print(f"{count} utilisation reports of {size:,} bytes stored ({url.partition(':')[0]});")
        print(f"GET /v1/utilisation-reports, {repeat} requests a row")
        listing(client, "/v1/utilisation-reports", repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=300)
    ap.add_argument("--days", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--utilisation", type=int, metavar="N")
    ap.add_argument("--database-url")
    args = ap.parse_args()
    if args.database_url:
        drop_all(args.database_url)
    if args.utilisation:
        with tempfile.TemporaryDirectory() as tmp:
            utilisation(args.database_url or f"sqlite:///{tmp}/u.db", args.utilisation, args.repeat)
        return
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/listing.db"
        store = SqlStore(url)
        for day in range(args.days):
            for body in day_bodies(args.nodes, day):
                store.add_once(ProbeReport.model_validate_json(body), None)
        stored = store.count()
        store.close()
        print(f"{stored} node reports stored; GET /v1/probe-reports, {args.repeat} requests a row")
        with TestClient(create_app(Settings(database_url=url))) as client:  # type: ignore[arg-type]
            listing(client, "/v1/probe-reports", args.repeat)


if __name__ == "__main__":
    main()
