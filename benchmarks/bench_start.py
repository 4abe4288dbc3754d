"""Seconds from `advisor serve --port 0` spawned to its first /healthz 200 (target: ready in
at most 1 s warm, 2 s cold), cold (an empty catalog cache) and warm (the cache that start
wrote), three of each; medians. The listening line is read first: it comes once start-up is
complete.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/bench_start.py
Exit status 1 when a target is not met.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
TARGET_WARM_S, TARGET_COLD_S = 1.0, 2.0


def ready_s(cache: str, database: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADVISOR_")}
    env.update(ADVISOR_DATABASE_URL=f"sqlite:///{database}", ADVISOR_CACHE_DIR=cache)
    cmd = [sys.executable, "-m", "advisor", "serve", "--port", "0", "--log-level", "warning"]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, cwd=REPO)
    try:
        assert proc.stderr is not None
        seen = b""
        while not (found := re.search(rb"listening on (http://\S+)", seen)):
            line = proc.stderr.readline()
            if not line:
                raise RuntimeError(f"advisor serve ended: {seen.decode(errors='replace')}")
            seen += line
        url = found.group(1).decode() + "/healthz"
        while True:
            try:
                if httpx.get(url, timeout=1).status_code == 200:
                    return time.monotonic() - start
            except httpx.TransportError:
                time.sleep(0.01)
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> int:
    cold, warm = [], []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            cold.append(ready_s(f"{tmp}/cache", f"{tmp}/a.db"))
            warm.append(ready_s(f"{tmp}/cache", f"{tmp}/a.db"))
    c, w = statistics.median(cold), statistics.median(warm)
    met = w <= TARGET_WARM_S and c <= TARGET_COLD_S
    print(
        f"ready: cold median {c:.2f} s ({', '.join(f'{x:.2f}' for x in cold)}), warm median "
        f"{w:.2f} s ({', '.join(f'{x:.2f}' for x in warm)}); target warm <= {TARGET_WARM_S:g} s,"
        f" cold <= {TARGET_COLD_S:g} s: {'MET' if met else 'NOT MET'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
