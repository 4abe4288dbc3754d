"""The README's `advisor recommend` and `advisor estimate` examples (the lines
benchmarks/answers_unchanged.py finds), plus `catalog gpus H100`, run as a reader would see them
in a pipe at 80 columns; written to docs/examples-80.txt so that a change to a table shows up
in review. Usage:
    PYTHONPATH=. .venv/bin/python benchmarks/readme_examples.py [--out docs/examples-80.txt]
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from answers_unchanged import readme_commands  # a script beside this one

REPO = Path(__file__).resolve().parents[1]
MORE = ["advisor catalog gpus H100"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "examples-80.txt")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    parts = []
    for command in [*readme_commands(REPO / "README.md"), *MORE]:
        p = subprocess.run(
            [sys.executable, "-m", "advisor", *shlex.split(command)[1:]],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        parts.append(f"$ {command}\n{p.stdout}{p.stderr}(exit {p.returncode})\n")
    args.out.write_text("\n".join(parts))
    print(f"wrote {args.out} ({len(parts)} commands)")


if __name__ == "__main__":
    main()
