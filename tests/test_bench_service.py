"""benchmarks/bench_service.py's distinct row is distinct: no request of it, in any run or wrk
thread, is answered from the service's response cache. Before, both wrk threads walked the same
bodies side by side and every run restarted at the first body (the warm-up's), and more than
half the row was cache hits."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks import bench_service as bench

DISTINCT = next(e for e in bench.ENDPOINTS if e.label == bench.DISTINCT_LABEL)


@pytest.mark.parametrize("loadgen", ["wrk", "python"])
def test_distinct_row_never_hits_the_cache(loadgen: str, tmp_path: Path) -> None:
    wrk = shutil.which("wrk")
    if loadgen == "wrk" and wrk is None:
        pytest.skip("wrk is not installed")
    bench.NEXT_BODY.clear()
    with bench.server(tmp_path / "advisor.db", tmp_path / "server.log") as (_pid, port, _ready):
        before = bench.cache_counts(port)
        sent = 0
        for _ in range(2):  # a warm-up and a measured run, as the benchmark does
            if wrk is not None and loadgen == "wrk":
                res, _ = bench.run_wrk(wrk, DISTINCT, port, tmp_path, 1, 8, 2)
            else:
                res, _ = bench.run_python(DISTINCT, port, 1, 8)
            assert res.errors == 0, res.error_detail
            sent += res.requests
        after = bench.cache_counts(port)
    assert sent > 0
    assert after["hits"] - before["hits"] == 0
    # every request ran the engine (wrk may leave a few in flight uncounted at its stop)
    assert after["misses"] - before["misses"] >= sent
