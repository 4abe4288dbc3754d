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


def test_sampled_shares_count_a_part_once_a_stack_where_its_frame_is() -> None:
    """benchmarks/sample_service.py splits py-spy's raw samples ("frame;frame;... count") by the
    parts' frames: a part counts a stack's samples once however often its frame appears, and a
    frame of the same name in another file is not the part's."""
    from benchmarks.sample_service import shares

    app = "__call__ (/v/site-packages/fastapi/applications.py:1)"
    engine = "recommend (/r/advisor/engine/evaluation.py:104)"
    other = "recommend (/r/advisor/other.py:3)"
    write = "write (/p/lib/python3.11/asyncio/selector_events.py:1057)"
    raw = "\n".join(
        [
            f"{app};{engine};{engine} 3",
            f"{app};{other} 2",
            f"{write} 5",
            "garbage line",
        ]
    )
    total, counts = shares(raw)
    assert total == 10
    assert counts["the ASGI app (all of a request but uvicorn's parsing)"] == 5
    assert counts["      engine: recommend()"] == 3
    assert counts["    socket writes"] == 5
