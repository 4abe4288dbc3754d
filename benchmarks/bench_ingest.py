"""What storing one probe report costs the service as the fleet grows (bounded work).

For each fleet size, a fresh SQLite store (WAL, synchronous=FULL, as served) is filled with that
many reports of one accelerator; then, in one process and one run:

- "store + calibrate": the service's ingestion path after parsing (AppState.add_probe_report:
  the insert and the fleet calibration's update), per report, for `--reports` new reports;
- "whole read": what each report cost before the calibration was kept in memory, a re-read of
  the accelerator's every stored calibration check and its fleet summary
  (calibrations(store.fleet(accelerator, CALIBRATION_CHECK))), timed as many times.

Target: the cost per report does not grow with the fleet (at the largest size at most 1.5x the
cost at the smallest). Medians of the per-report times, with p90.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/bench_ingest.py [--record] [--sizes 100 1000 6400]
Exit status 1 when the target is not met.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import sys
import tempfile
import time
from pathlib import Path

from advisor.api.metrics import Metrics
from advisor.api.settings import Settings
from advisor.api.state import AppState, CatalogHolder, FleetCalibration, ReviewCache
from advisor.perf.calibration import CALIBRATION_CHECK, calibrations
from advisor.store import Store, open_store
from probes.report import ProbeReport
from probes.stats import quantile

RESULTS = Path(__file__).parent / "results"
ACCELERATOR = "h200-sxm"
TARGET_GROWTH = 1.5


def report(i: int) -> ProbeReport:
    """A probe report as `advisor probe` sends it, reduced to what the store indexes."""
    ratio = 0.70 + (i % 37) / 100
    return ProbeReport.model_validate(
        {
            "schema_version": 1,
            "created_at": "2026-12-01T12:00:00Z",
            "mode": "quick",
            "device": 0,
            "verdict": "pass",
            "accelerator": ACCELERATOR,
            "inventory": {"hostname": f"node-{i:05d}", "python": "3.11"},
            "checks": [
                {
                    "name": CALIBRATION_CHECK,
                    "status": "pass",
                    "measured": 989 * ratio,
                    "expected": 989.0,
                    "unit": "TFLOP/s",
                    "detail": "bench",
                },
                {
                    "name": "matmul_fp32",
                    "status": "pass",
                    "measured": 50.0,
                    "expected": 67.0,
                    "unit": "TFLOP/s",
                    "detail": "bench",
                },
                {"name": "ecc", "status": "pass", "detail": "ECC is on"},
            ],
            "duration_s": 10.0,
        }
    )


def state_on(store: Store, settings: Settings) -> AppState:
    calibration = FleetCalibration(store)
    calibration.refresh_if_changed()  # as at start-up
    holder = CatalogHolder.load(settings)
    return AppState(settings, holder, store, Metrics(), calibration, ReviewCache(60.0))


def per_call_ms(call: object, count: int, first: int) -> list[float]:
    times = []
    for i in range(first, first + count):
        t0 = time.perf_counter()
        call(i)  # type: ignore[operator]
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)


def measure(size: int, count: int, tmp: Path) -> dict[str, float]:
    url = f"sqlite:///{tmp}/fleet-{size}.db"
    store = open_store(url)
    for i in range(size):
        store.add(report(i))
    state = state_on(store, Settings(database_url=url))  # type: ignore[call-arg]
    reads_before = state.calibration.recomputed
    add = lambda i: state.add_probe_report(report(i), f"k{i}")  # noqa: E731
    per_call_ms(add, 20, size)  # warm-up: the first inserts of a process are slower
    stored = per_call_ms(add, count, size + 20)
    assert state.calibration.recomputed == reads_before, "ingestion read the store whole"
    assert state.calibration.value == calibrations(
        [vars(s) for s in store.fleet(check=CALIBRATION_CHECK)]
    ), "the calibration kept in memory differs from a whole read"
    whole = per_call_ms(
        lambda _: calibrations([vars(s) for s in store.fleet(ACCELERATOR, CALIBRATION_CHECK)]),
        count,
        0,
    )
    store.close()
    return {
        "stored": quantile(stored, 0.5) or 0.0,
        "stored_p90": quantile(stored, 0.9) or 0.0,
        "whole": quantile(whole, 0.5) or 0.0,
        "whole_p90": quantile(whole, 0.9) or 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 6400])
    parser.add_argument("--reports", type=int, default=400, help="new reports per fleet size")
    parser.add_argument("--record", action="store_true", help="write results/ingest-<date>.txt")
    args = parser.parse_args()
    lines = [
        f"# bench_ingest {dt.datetime.now().isoformat(timespec='seconds')} python "
        f"{platform.python_version()} on {platform.machine()}",
        f"store: SQLite (WAL, synchronous=FULL) in a temp dir; {args.reports} new reports per "
        "fleet size; ms per report, median (p90)",
        "",
        f"{'stored reports':>14}  {'store + calibrate':>18}  {'whole read (before)':>20}",
    ]
    print("\n".join(lines), flush=True)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            m = rows[size] = measure(size, args.reports, Path(tmp))
            line = (
                f"{size:>14,}  {m['stored']:>8.2f} ({m['stored_p90']:>5.2f})    "
                f"  {m['whole']:>9.2f} ({m['whole_p90']:>6.2f})"
            )
            lines.append(line)
            print(line, flush=True)
    small, large = rows[min(rows)], rows[max(rows)]
    growth = large["stored"] / small["stored"]
    met = growth <= TARGET_GROWTH
    verdict = (
        f"target: {'MET' if met else 'NOT MET'}  store + calibrate at {max(rows):,} stored / at "
        f"{min(rows):,}: {growth:.2f}x (<= {TARGET_GROWTH}x)"
    )
    lines += ["", verdict]
    print("\n" + verdict)
    if args.record:
        out = RESULTS / f"ingest-{dt.date.today().isoformat()}.txt"
        out.write_text("\n".join(lines) + "\n")
        print(f"recorded in {out}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
