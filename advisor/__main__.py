"""`python -m advisor` and the `advisor` console script (pyproject.toml [project.scripts]).

The command line's modules (typer, click, rich and advisor.cli itself) live as long as the
process: they are imported with the cyclic collector paused and then frozen, as
advisor/collector.py long_lived keeps it off what a command process keeps. Imported with it on,
the collector walked them some 30 times, about 5 ms of `advisor recommend`'s start-up
(benchmarks/bench_startup.py)."""

from __future__ import annotations

from advisor.collector import long_lived


def main() -> None:
    with long_lived():
        from advisor.cli import main as command_line
    command_line()


if __name__ == "__main__":
    main()
