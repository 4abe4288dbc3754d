"""Start-up time of the command line, side by side with a bare import of its libraries.

The target: `advisor recommend --workload high_throughput_inference --memory-gb 20 --json`
within 0.5 s wall and within 2x a bare `import pydantic, typer, rich, yaml` (the floor any
typer + pydantic CLI pays), `advisor --help` likewise. The commands are run interleaved (one of
each per round, the order rotated each round) so that a slow stretch of this shared machine
slows every row alike; the median of the rounds is reported, with the fastest beside it.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_startup.py [--rounds 15] [--record NAME]
        [--old TREE]

--record writes the table to benchmarks/results/NAME.txt as well. The catalog cache is warmed
by one unmeasured run first (a first run on a machine validates the YAML: README "Catalog").
--old TREE adds CPU time (user + system of the child, which a loaded machine moves far less than
wall time) of the bare import and of `advisor recommend` in TREE and in this tree, interleaved.
Each tree gets its own catalog cache directory: the cache keeps one catalog, so two trees
sharing it would evict each other and every run would validate the YAML again. Bytecode is
written and read as an installed package's would be (PYTHONDONTWRITEBYTECODE is dropped).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
RECOMMEND = ["recommend", "--workload", "high_throughput_inference", "--memory-gb", "20", "--json"]
COMMANDS: dict[str, list[str]] = {
    "python -c pass": [PY, "-c", "pass"],
    "bare import pydantic, typer, rich, yaml": [PY, "-c", "import pydantic, typer, rich, yaml"],
    "advisor recommend ... --json": [PY, "-m", "advisor", *RECOMMEND],
    "advisor --help": [PY, "-m", "advisor", "--help"],
    "advisor --version": [PY, "-m", "advisor", "--version"],
}
BARE = "bare import pydantic, typer, rich, yaml"
TARGET_S = 0.5
TARGET_RATIO = 2.0


def _with_bytecode() -> dict[str, str]:
    """This environment without PYTHONDONTWRITEBYTECODE: with it, a tree that has no bytecode
    yet compiles every advisor module from source on every run (about 40 ms of recommend)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def once(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def measure(rounds: int) -> dict[str, list[float]]:
    env = {**_with_bytecode(), "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    names = []
    for name, argv in COMMANDS.items():  # warm: the catalog cache, the file cache, bytecode
        try:
            once(argv, env)
            names.append(name)
        except subprocess.CalledProcessError:  # an older tree without the command
            print(f"left out (fails in this tree): {name}", file=sys.stderr)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            times[name].append(once(COMMANDS[name], env))
    return times


def table(times: dict[str, list[float]], rounds: int) -> str:
    bare = statistics.median(times[BARE])
    lines = [
        f"bench_startup.py, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {rounds} interleaved "
        f"rounds, {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs (shared)",
        f"{'command':<40} {'median s':>9} {'min s':>7} {'x bare':>7}  target",
    ]
    for name, values in times.items():
        med = statistics.median(values)
        verdict = ""
        if name.startswith("advisor recommend") or name == "advisor --help":
            met = med <= TARGET_S and med <= TARGET_RATIO * bare
            verdict = (
                f"<= {TARGET_S} s and <= {TARGET_RATIO:g}x bare: {'MET' if met else 'NOT MET'}"
            )
        lines.append(f"{name:<40} {med:>9.3f} {min(values):>7.3f} {med / bare:>7.2f}  {verdict}")
    return "\n".join(lines)


def cpu_once(argv: list[str], env: dict[str, str], tree: Path) -> float:
    """The child's user + system seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        argv, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def cpu_table(old: Path, rounds: int) -> str:
    """Median CPU ms of the bare import and of `advisor recommend` in `old` and this tree."""
    names = (BARE, "advisor recommend ... --json")
    trees = {"old": old.resolve(), "new": REPO}
    base = _with_bytecode()
    times: dict[tuple[str, str], list[float]] = {(t, n): [] for t in trees for n in names}
    with tempfile.TemporaryDirectory() as caches:
        envs = {
            t: {**base, "PYTHONPATH": str(p), "COLUMNS": "80", "ADVISOR_CACHE_DIR": f"{caches}/{t}"}
            for t, p in trees.items()
        }
        for t, p in trees.items():  # warm: bytecode, the catalog cache
            for n in names:
                cpu_once(COMMANDS[n], envs[t], p)
        for _ in range(rounds):
            for t, p in trees.items():
                for n in names:
                    times[(t, n)].append(cpu_once(COMMANDS[n], envs[t], p))
    lines = [
        f"CPU time (user + system), {rounds} interleaved rounds, old = {old}, new = this tree",
        f"{'tree':<5} {'bare ms':>8} {'recommend ms':>13} {'x bare':>7}  target <= {TARGET_RATIO:g}x",
    ]
    for t in trees:
        bare = statistics.median(times[(t, BARE)]) * 1000
        rec = statistics.median(times[(t, names[1])]) * 1000
        met = "MET" if rec <= TARGET_RATIO * bare else "NOT MET"
        lines.append(f"{t:<5} {bare:>8.0f} {rec:>13.0f} {rec / bare:>7.2f}  {met}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--record", metavar="NAME", help="also write benchmarks/results/NAME.txt")
    parser.add_argument("--old", type=Path, help="a tree to compare CPU time with")
    args = parser.parse_args()
    text = table(measure(args.rounds), args.rounds)
    if args.old:
        text += "\n\n" + cpu_table(args.old, args.rounds)
    print(text)
    if args.record:
        out = REPO / "benchmarks" / "results" / f"{args.record}.txt"
        out.write_text(text + "\n")
        print(f"recorded {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
