"""Where a live `advisor serve` spends its time, sampled instead of traced.

benchmarks/profile_service.py traces every Python call (cProfile), which slows many small calls
more than a few large ones and the C underneath not at all: its shares lean toward the engine's
Python. This samples the server's stack with py-spy while wrk loads it (the server runs at full
speed) and splits the samples into the same parts, plus the socket writes (the kernel's work on
a response is charged to the writer's send on loopback). Run it in each of two trees to compare.

Run:  .venv/bin/python benchmarks/sample_service.py [--seconds 8] [--endpoint distinct|healthz]
Needs wrk (apt-get install -y wrk) and py-spy (pip install py-spy).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import bench_service as bench

# (label, file suffix, function): the share of samples with that frame on the stack. Indented
# parts nest in the one above.
PARTS = (
    (
        "the ASGI app (all of a request but uvicorn's parsing)",
        "fastapi/applications.py",
        "__call__",
    ),
    ("  the route: body, endpoint", "advisor/api/strict_json.py", "strict"),
    ("    body parsed and validated", "advisor/api/strict_json.py", "_parse_and_check"),
    ("    the endpoint", "advisor/api/routes/recommend.py", "create_recommendation"),
    ("      engine: recommend()", "advisor/engine/evaluation.py", "recommend"),
    ("        every candidate group checked", "advisor/engine/evaluation.py", "_evaluate_cloud"),
    ("        ranking reasons", "advisor/engine/rank.py", "reasons"),
    ("        recommendations built", "advisor/engine/evaluation.py", "_recommendation"),
    ("        nearest alternatives", "advisor/engine/alternatives.py", "nearest_alternatives"),
    ("      result to JSON", "pydantic/main.py", "model_dump_json"),
    ("  response sent (h11 and the socket)", "uvicorn/protocols/http/h11_impl.py", "send"),
    ("    socket writes", "asyncio/selector_events.py", "write"),
    ("uvicorn reading requests (h11)", "uvicorn/protocols/http/h11_impl.py", "handle_events"),
)


def _frames(stack: str) -> list[tuple[str, str]]:
    """(function, file) of each frame of one py-spy raw line's stack, outermost first."""
    out = []
    for frame in stack.split(";"):
        name, _, where = frame.partition(" (")
        out.append((name, where.rpartition(":")[0]))
    return out


def shares(raw: str) -> tuple[int, Counter[str]]:
    """Samples in all and, per part label, the samples with the part's frame on the stack."""
    total, counts = 0, Counter[str]()
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        frames = _frames(stack)
        for label, suffix, function in PARTS:
            if any(name == function and file.endswith(suffix) for name, file in frames):
                counts[label] += int(n)
    return total, counts


def sample(seconds: float, endpoint: bench.Endpoint, spy: str, wrk: str) -> tuple[str, float]:
    """The raw py-spy samples of a server under `endpoint`'s load, and its requests a second."""
    with tempfile.TemporaryDirectory(prefix="sample-service-") as tmp_s:
        tmp = Path(tmp_s)
        with bench.server(tmp / "advisor.db", tmp / "server.log") as (pid, port, _ready):
            bench.run_wrk(wrk, endpoint, port, tmp, 3, 32, 2)  # warm-up: caches, first answers
            out = tmp / "samples.txt"
            cmd = [spy, "record", "-r", "400", "-d", str(round(seconds)), "-f", "raw"]
            cmd += ["-o", str(out), "--pid", str(pid)]
            with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as p:
                result, _ = bench.run_wrk(wrk, endpoint, port, tmp, seconds + 2, 32, 2)
                p.wait()
            return out.read_text(), result.rps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds sampled")
    parser.add_argument("--endpoint", choices=("distinct", "healthz"), default="distinct")
    args = parser.parse_args()
    spy, wrk = shutil.which("py-spy"), shutil.which("wrk")
    if spy is None or wrk is None:
        parser.error("needs py-spy (pip install py-spy) and wrk (apt-get install -y wrk)")
    label = bench.DISTINCT_LABEL if args.endpoint == "distinct" else "GET /healthz"
    endpoint = next(e for e in bench.ENDPOINTS if e.label == label)
    raw, rps = sample(args.seconds, endpoint, spy, wrk)
    total, counts = shares(raw)
    print(f"# sample_service: {label}, {total} samples over {args.seconds:g} s at {rps:.0f} req/s")
    print(f"{'part':60} {'share':>7}")
    for part, _, _ in PARTS:
        print(f"{part:60} {100 * counts[part] / max(1, total):6.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
