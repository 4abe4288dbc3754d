"""The examples in README.md and docs/*.md, run and compared with the output they show.

An example is a ```console block: lines starting with `$ ` are commands (an `advisor ...`
command runs as `python -m advisor ...`, after any leading VAR=value assignments; paths are
relative to the repository root), the lines after each are what it prints (stdout and
stderr, as a terminal 100 columns wide shows them when piped). Blocks fenced as ```sh are
commands that need what a test machine lacks (a GPU, a running service, a cluster) and are not
run.

    python scripts/docs_examples.py            # check: exit 1 listing each example that differs
    python scripts/docs_examples.py --update   # write each block's real output into the file
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```console\n(.*?)^```$", re.MULTILINE | re.DOTALL)
COLUMNS = "100"


@dataclass(frozen=True)
class Example:
    path: Path
    command: str
    shown: str  # the output the page shows


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def examples(path: Path) -> list[Example]:
    found = []
    for block in BLOCK.finditer(path.read_text()):
        for command, shown in _split(block.group(1)):
            found.append(Example(path, command, shown))
    return found


def _split(body: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        elif pairs:
            pairs[-1][1].append(line)
    return [(command, "\n".join(lines)) for command, lines in pairs]


def run(command: str, home: Path) -> str:
    """What `command` prints, with a user of no config file and no cache of their own."""
    words = shlex.split(command)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADVISOR_")}
    env |= {
        "COLUMNS": COLUMNS,
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "PYTHONPATH": str(REPO),
    }
    while words and "=" in words[0] and not words[0].startswith("-"):  # VAR=value command
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if words[0] == "advisor":
        words = [sys.executable, "-m", "advisor", *words[1:]]
    p = subprocess.run(
        words, capture_output=True, text=True, env=env, cwd=REPO, timeout=120, check=False
    )
    return _tidy(p.stdout + p.stderr)


def _tidy(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip("\n").splitlines())


def check(home: Path) -> list[str]:
    problems = []
    for path in pages():
        for ex in examples(path):
            got = run(ex.command, home)
            if got != _tidy(ex.shown):
                where = path.relative_to(REPO)
                problems.append(
                    f"{where}: `{ex.command}` prints:\n{got}\n--- the page shows:\n{ex.shown}"
                )
    return problems


def update(home: Path) -> None:
    for path in pages():
        text = path.read_text()

        def fill(block: re.Match[str]) -> str:
            parts = []
            for command, _ in _split(block.group(1)):
                parts.append(f"$ {command}\n{run(command, home)}\n")
            return "```console\n" + "".join(parts) + "```"

        new = BLOCK.sub(fill, text)
        if new != text:
            path.write_text(new)
            print(f"updated {path.relative_to(REPO)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="write the real output in")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.update:
            update(Path(tmp))
            return 0
        problems = check(Path(tmp))
    count = sum(len(examples(p)) for p in pages())
    for problem in problems:
        print(problem, end="\n\n")
    print(f"{count - len(problems)} of {count} examples print what the docs show")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
