"""Answers of two source trees side by side: every `advisor recommend` and `advisor estimate`
command in the README's code blocks (plus the sized cases below) run with `--json` in each tree,
and each JSON answer compared key by key. Prints one row per command and, for each difference,
its JSON path and both values. Usage:
    python benchmarks/answers_unchanged.py OLD_TREE NEW_TREE [--record NAME]
A refactor should print "same" on every row; where a figure was fixed, the rows say which."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

# Sized cases the README's examples leave out: LoRA and QLoRA training figures, a serving
# deployment at a fixed TP and on a bare accelerator, and a recommendation sized by a model.
EXTRA = [
    "advisor estimate --workload fine_tuning --model llama-3-8b --method lora --tokens 2e9"
    " --instance-type p5.48xlarge",
    "advisor estimate --workload fine_tuning --model llama-3-8b --method qlora --tokens 2e9"
    " --accelerator h100-sxm --gpu-count 8",
    "advisor estimate --workload large_scale_training --model llama-3.1-70b --tokens 1e11"
    " --accelerator h100-sxm --gpu-count 64",
    "advisor estimate --workload high_throughput_inference --model mixtral-8x7b --accelerator h200-sxm"
    " --gpu-count 8 --input-tokens 2000 --output-tokens 500",
    "advisor estimate --workload high_throughput_inference --params-b 70 --instance-type p5.48xlarge",
    "advisor recommend --workload large_scale_training --model llama-3.1-70b --tokens 1e11"
    " --deadline-days 30",
    "advisor recommend --workload fine_tuning --model llama-3-8b --tokens 2e9 --purchase spot",
    # a fine-tune on a serving-only chip: refused by estimate as recommend refuses it
    "advisor estimate --workload fine_tuning --model llama-3-8b --tokens 2e9"
    " --instance-type inf2.48xlarge",
]


def readme_commands(readme: Path) -> list[str]:
    """The README's `advisor recommend|estimate` lines in code blocks, continuations joined."""
    commands: list[str] = []
    in_block = False
    pending = ""
    for line in readme.read_text().splitlines():
        if line.startswith("```"):
            in_block = not in_block
            continue
        if not in_block:
            continue
        text = pending + line.split("#", 1)[0].strip()
        if text.endswith("\\"):
            pending = text[:-1] + " "
            continue
        pending = ""
        found = re.search(r"advisor (recommend|estimate) .*", text)
        if found:
            commands.append(found.group(0).strip())
    return commands


def answer(tree: Path, command: str) -> tuple[int, str, object]:
    argv = shlex.split(command)[1:]
    if "--json" not in argv:
        argv.append("--json")
    env = dict(os.environ, PYTHONPATH=str(tree), ADVISOR_NO_CACHE="1")
    out = subprocess.run(
        [sys.executable, "-m", "advisor", *argv],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        return out.returncode, out.stdout, json.loads(out.stdout)
    except json.JSONDecodeError:
        return out.returncode, out.stdout, {"stdout": out.stdout, "stderr": out.stderr[-400:]}


def differences(old: object, new: object, path: str = "$") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in sorted(set(old) | set(new)):
            if key not in old or key not in new:
                found.append(
                    f"{path}.{key}: {old.get(key, '<absent>')!r} -> {new.get(key, '<absent>')!r}"
                )
            else:
                found += differences(old[key], new[key], f"{path}.{key}")
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            d
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    return [] if old == new else [f"{path}: {old!r} -> {new!r}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--record", help="also write the table to benchmarks/results/NAME.txt")
    args = parser.parse_args()
    commands = readme_commands(args.new / "README.md") + EXTRA
    lines: list[str] = []
    for command in commands:
        old_rc, old_bytes, old = answer(args.old.resolve(), command)
        new_rc, new_bytes, new = answer(args.new.resolve(), command)
        found = differences(old, new)
        if not found and old_bytes != new_bytes:
            found.append("same values, different bytes (key order or formatting)")
        if old_rc != new_rc:
            found.insert(0, f"exit code: {old_rc} -> {new_rc}")
        status = "same" if not found else f"{len(found)} difference(s)"
        lines.append(f"{status:<18} rc={new_rc}  {command}")
        lines += [f"    {d}" for d in found[:40]]
        if len(found) > 40:
            lines.append(f"    ... {len(found) - 40} more")
    same = sum(1 for line in lines if line.startswith("same"))
    lines.append(f"{same} of {len(commands)} answers byte-identical")
    text = "\n".join(lines)
    print(text)
    if args.record:
        Path("benchmarks/results", f"{args.record}.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
