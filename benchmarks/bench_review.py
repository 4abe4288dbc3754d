"""Speed of the fleet review (target: <= 5 s over 10,000 stored probe reports).

Generates a synthetic-but-plausible fleet grown from our real H200 probe report (hosts,
accelerators, ratios, sick hosts and driver versions varied; see tests/synthetic_fleet.py),
loads it into a SQLite store (advisor.store.open_store) and times the review built from the store
(what GET /v1/review does), GET /v1/review itself in-process, and the review built from a
--reports directory of the same reports (what `advisor review --reports DIR` does).

Run:  .venv/bin/python benchmarks/bench_review.py [--reports 10000] [--record]
      .venv/bin/python benchmarks/bench_review.py --page review.html [--screenshot docs/review.png]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the synthetic fleet lives in tests/

from advisor import load_catalog
from advisor.catalog import Catalog
from advisor.review import build_review, from_dir, from_store, render_html
from advisor.review.data import ReviewData
from advisor.store import open_store
from probes.report import ProbeReport, UtilisationReport
from tests import synthetic_fleet as synthetic

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
FIXTURES = RESULTS / "probe-2026-11-30-nvidia-h200-driver580.159.04-torch2.11.0+cu130"
TARGET_S = 5.0


def base_report() -> dict[str, Any]:
    report: dict[str, Any] = json.loads((FIXTURES / "probe-quick.json").read_text())
    return report


def fleet(
    catalog: Catalog, reports: int, hosts: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    probes = synthetic.probe_reports(catalog, base_report(), reports, hosts)
    usage = synthetic.utilisation_reports(catalog, hosts)
    return probes, usage


def scratch_dir() -> Path:
    """tmpfs when there is one: the benchmark times reading, not the disk's fsync."""
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="bench-review-", dir=shm if shm.is_dir() else None))


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def review_from(catalog: Catalog, gather: Callable[[], ReviewData]) -> dict[str, float]:
    cpu = time.process_time()
    t_gather, data = timed(gather)
    t_build, review = timed(lambda: build_review(data, catalog))
    t_render, page = timed(lambda: render_html(review))
    assert "<svg" in page and len(data.probes) > 0
    return {
        "gather": t_gather,
        "analyse": t_build,
        "render": t_render,
        "total": t_gather + t_build + t_render,
        "cpu": time.process_time() - cpu,
    }


def repeat(n: int, fn: Callable[[], dict[str, float]]) -> dict[str, float]:
    runs = [fn() for _ in range(n)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def bench(args: argparse.Namespace) -> list[str]:
    catalog = load_catalog()
    t_gen, (probes, usage) = timed(lambda: fleet(catalog, args.reports, args.hosts))
    work = scratch_dir()
    lines = []
    try:
        db = work / "review.db"
        store = open_store(f"sqlite:///{db}")
        t0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)

        def load() -> None:
            for i, report in enumerate(probes):
                store.add(ProbeReport.model_validate(report), t0 + dt.timedelta(seconds=i))
            for report in usage:
                store.add_utilisation(UtilisationReport.model_validate(report))

        t_load, _ = timed(load)
        store_t = repeat(args.repeat, lambda: review_from(catalog, lambda: from_store(store)))
        api_t = _api(db, args.repeat)
        store.close()
        server_t = _server(catalog, db) if args.server else None

        reports_dir = work / "reports"
        reports_dir.mkdir()
        for i, report in enumerate(probes):
            (reports_dir / f"probe-{i:05d}.json").write_text(json.dumps(report))
        for i, report in enumerate(usage):
            (reports_dir / f"utilisation-{i:04d}.json").write_text(json.dumps(report))
        dir_t = repeat(args.repeat, lambda: review_from(catalog, lambda: from_dir(reports_dir)))
        cli_s = _cli(reports_dir, work / "review.html")
        size_mb = sum(p.stat().st_size for p in reports_dir.iterdir()) / 1e6
    finally:
        shutil.rmtree(work, ignore_errors=True)

    cores = os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines.append(
        f"# bench_review {dt.datetime.now().isoformat(timespec='seconds')} python "
        f"{platform.python_version()} on {platform.machine()} ({cores} cores, load average "
        f"{load:.1f} at the end: other work shared the machine when above {cores})"
    )
    lines.append(
        f"fleet: {len(probes):,} probe reports ({size_mb:,.0f} MB of JSON), {args.hosts} hosts, "
        f"{len(usage)} utilisation reports; generated in {t_gen:.1f} s, loaded into SQLite "
        f"(tmpfs) in {t_load:.1f} s; median of {args.repeat} runs"
    )
    lines.append(
        f"{'source':34} {'gather':>8} {'analyse':>8} {'render':>8} {'total':>8} {'CPU':>8}  "
        "target (wall)"
    )
    for name, t in (
        ("store (from_store, SQLite)", store_t),
        (f"--reports DIR ({len(probes):,} files)", dir_t),
    ):
        ok = "MET" if t["total"] <= TARGET_S else "MISSED"
        lines.append(
            f"{name:34} {t['gather']:7.2f}s {t['analyse']:7.2f}s {t['render']:7.2f}s "
            f"{t['total']:7.2f}s {t['cpu']:7.2f}s  <= {TARGET_S:g} s {ok}"
        )
    ok = "MET" if api_t <= TARGET_S else "MISSED"
    lines.append(
        f"{'GET /v1/review (in-process)':34} {'':>8} {'':>8} {'':>8} {api_t:7.2f}s {'':>8}  "
        f"<= {TARGET_S:g} s {ok}"
    )
    if server_t is not None:
        t = server_t
        lines.append(
            f"{'--server (HTTP, 8 connections)':34} {t['gather']:7.2f}s {t['analyse']:7.2f}s "
            f"{t['render']:7.2f}s {t['total']:7.2f}s {t['cpu']:7.2f}s  (one run; the server's "
            "CPU not counted)"
        )
    lines.append(
        f"{'advisor review --reports (wall)':34} {'':>8} {'':>8} {'':>8} {cli_s:7.2f}s {'':>8}  "
        "(interpreter start and catalog load included)"
    )
    return lines


def _server(catalog: Catalog, db: Path) -> dict[str, float]:
    """`advisor review --server`: list pages, then every body over HTTP, 8 at a time. The server
    binds port 0 and prints the port it got (no port picked beforehand, so no race)."""
    import re
    import urllib.request

    from advisor.review import from_server

    env = {**os.environ, "ADVISOR_DATABASE_URL": f"sqlite:///{db}", "ADVISOR_API_TOKENS": "x"}
    cmd = [sys.executable, "-m", "advisor", "serve", "--port", "0", "--no-access-log"]
    proc = subprocess.Popen(
        [*cmd, "--log-level", "warning"], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        url = None
        for line in proc.stderr:  # the line comes once the socket is bound
            found = re.search(r"advisor serve: listening on (http://\S+)", line)
            if found:
                url = found.group(1)
                break
        if url is None:
            raise SystemExit("advisor serve exited before listening")
        for _ in range(300):  # bound is not yet accepting: wait for uvicorn to answer
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        return review_from(catalog, lambda: from_server(url))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _api(db: Path, n: int) -> float:
    from fastapi.testclient import TestClient

    from advisor.api import create_app
    from advisor.api.settings import Settings

    app = create_app(Settings(database_url=f"sqlite:///{db}"))
    times = []
    with TestClient(app) as client:
        for _ in range(n):
            t, response = timed(lambda: client.get("/v1/review"))
            assert response.status_code == 200, response.text[:300]
            times.append(t)
    return statistics.median(times)


def _cli(reports_dir: Path, output: Path) -> float:
    cmd = [sys.executable, "-m", "advisor", "review", "--reports", str(reports_dir)]
    t, proc = timed(
        lambda: subprocess.run([*cmd, "--output", str(output)], check=False, capture_output=True)
    )
    if proc.returncode != 0:
        raise SystemExit(f"advisor review failed: {proc.stderr.decode()}")
    return t


def demo_page(path: Path, reports: int, hosts: int) -> None:
    """A realistic review: our real H200 reports plus a synthetic fleet and its utilisation."""
    catalog = load_catalog()
    probes, usage = fleet(catalog, reports, hosts)
    work = scratch_dir()
    try:
        for i, report in enumerate(probes):
            (work / f"probe-{i:05d}.json").write_text(json.dumps(report))
        for i, report in enumerate(usage):
            (work / f"utilisation-{i:04d}.json").write_text(json.dumps(report))
        for fixture in FIXTURES.glob("probe-*.json"):
            shutil.copy(fixture, work / f"real-{fixture.name}")
        data = from_dir(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    data.source = f"{len(data.probes):,} probe reports (4 real H200 runs, the rest synthetic)"
    path.write_text(render_html(build_review(data, catalog)), encoding="utf-8")
    print(f"wrote {path}")


def screenshot(page: Path, png: Path, height: int) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no chromium: run scripts/install-chromium.sh")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--screenshot={png.resolve()}",
                f"--window-size=1280,{height}",
                page.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    print(f"wrote {png}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--hosts", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--record", action="store_true", help="write results/review-DATE.txt")
    parser.add_argument(
        "--server", action="store_true", help="also time --server against `advisor serve`"
    )
    parser.add_argument("--page", type=Path, help="write a demo review page here and stop")
    parser.add_argument("--screenshot", type=Path, help="with --page: a 1280 px PNG of it")
    parser.add_argument("--height", type=int, default=2400, help="screenshot height in px")
    args = parser.parse_args()
    if args.page:
        demo_page(args.page, min(args.reports, 1500), min(args.hosts, 120))
        if args.screenshot:
            screenshot(args.page, args.screenshot, args.height)
        return
    lines = bench(args)
    print("\n".join(lines))
    if args.record:
        out = RESULTS / f"review-{dt.date.today().isoformat()}.txt"
        out.write_text("\n".join(lines) + "\n")
        print(f"recorded in {out}")


if __name__ == "__main__":
    main()
