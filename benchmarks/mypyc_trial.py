"""How much compiling the engine with mypyc would buy: the committed tree
against the same tree with the engine's hot modules compiled, measured interleaved by
compare_trees.py. Usage:
    python benchmarks/mypyc_trial.py [--rounds 5] [--record NAME]
Needs mypy (the dev extra), setuptools and a C compiler. Nothing in the checkout changes: both
trees are `git archive HEAD` copies in a temporary directory.

The one edit the compiled copy needs: mypyc cannot build a generic frozen dataclass
(`Constraint(Generic[Case])` fails at import with "attribute '__dict__' of 'type' objects is not
writable"), so there it is made non-generic; the checks and their results are unchanged."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The modules the distinct-body profile spends its time in (cProfile, tottime).
COMPILED = (
    "advisor/engine/__init__.py",
    "advisor/engine/candidates.py",
    "advisor/engine/checks.py",
    "advisor/engine/constraints.py",
    "advisor/engine/placement.py",
    "advisor/engine/rank.py",
    "advisor/perf/sizing.py",
)
# The same answers from both trees, or the timing means nothing.
ANSWERS = """
import hashlib, sys
sys.path.insert(0, "benchmarks")
from bench_service import DISTINCT_BODIES
from advisor.catalog import load_catalog
from advisor.engine import recommend
from advisor.request import RecommendRequest
cat = load_catalog()
digest = hashlib.sha256()
for body in DISTINCT_BODIES:
    digest.update(recommend(cat, RecommendRequest.model_validate_json(body)).model_dump_json().encode())
print(digest.hexdigest())
"""
SETUP = f"""
from setuptools import setup
from mypyc.build import mypycify
setup(name="advisor-mypyc-trial", packages=[], ext_modules=mypycify({list(COMPILED)!r}))
"""


def copy_head(into: Path) -> Path:
    into.mkdir()
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def make_non_generic(tree: Path) -> None:
    constraints = tree / "advisor/engine/constraints.py"
    text = constraints.read_text()
    text = text.replace("class Constraint(Generic[Case]):", "class Constraint:")
    text = text.replace(
        "check: Callable[[Case], Finding | None]", "check: Callable[[Any], Finding | None]"
    )
    text = text.replace("from typing import ", "from typing import Any, ", 1)
    constraints.write_text(text)
    for path in (tree / "advisor/engine").glob("*.py"):
        source = path.read_text()
        path.write_text(re.sub(r"Constraint\[\w+\]", "Constraint", source))


def build(tree: Path) -> str:
    (tree / "setup_mypyc.py").write_text(SETUP)
    done = subprocess.run(
        [sys.executable, "setup_mypyc.py", "build_ext", "--inplace"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,  # the compiler's output is shown instead of a bare CalledProcessError
    )
    if done.returncode != 0:
        sys.exit(f"mypyc build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    built = sorted(str(p.relative_to(tree)).split(".")[0] for p in tree.glob("advisor/**/*.so"))
    return f"compiled with mypyc: {', '.join(built)}"


def _answers(tree: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", ANSWERS],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--record", help="file name under benchmarks/results/")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain = copy_head(Path(tmp) / "plain")
        compiled = copy_head(Path(tmp) / "compiled")
        make_non_generic(compiled)
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        header = [f"# mypyc_trial at {head}: old = the plain tree, new = compiled", build(compiled)]
        digests = {_answers(tree) for tree in (plain, compiled)}
        if len(digests) != 1:
            sys.exit(f"the compiled engine answers differently: {digests}")
        header.append(f"same answers to all 4,000 distinct bodies: sha256 {digests.pop()}")
        print("\n".join(header), flush=True)
        command = [sys.executable, str(ROOT / "benchmarks/compare_trees.py"), str(plain)]
        command += [str(compiled), "--rounds", str(args.rounds)]
        if args.record:
            command += ["--record", args.record]
        subprocess.run(command, check=True)
    if args.record:
        record = ROOT / "benchmarks/results" / args.record
        record.write_text("\n".join(header) + "\n" + record.read_text())


if __name__ == "__main__":
    main()
