"""The repository speaks for itself: no text in it points at the team's tracker (an issue number)
or at a folder beside the checkout. Sources that are other projects' issues (nccl-tests issue 212)
name their project."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OUR_ISSUE = re.compile(r"(?<![\w/-])(issue[ -]?#?\d+|issue-\d+[ab]?)\b", re.IGNORECASE)
ANOTHER_PROJECTS = re.compile(r"(nccl|nccl-tests|vllm|sglang|pytorch|dstack|opencost)\S*\s+$", re.I)
OUTSIDE = re.compile(r"\.\./shared|/work/shared")


def _tracked_text() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    suffixes = {".py", ".md", ".txt", ".yaml", ".yml", ".toml", ".sh", ".json", ".cfg", ""}
    return [ROOT / p for p in out.splitlines() if Path(p).suffix in suffixes]


def offending_lines(text: str) -> list[str]:
    found = []
    for line in text.splitlines():
        if OUTSIDE.search(line):
            found.append(line)
            continue
        for m in OUR_ISSUE.finditer(line):
            if not ANOTHER_PROJECTS.search(line[: m.start()]):
                found.append(line)
                break
    return found


def test_the_rule_tells_ours_from_another_projects() -> None:
    assert offending_lines("fixed in issue 38") == ["fixed in issue 38"]
    assert offending_lines("see branch issue-40b") == ["see branch issue-40b"]
    assert offending_lines("read ../shared/REFERENCE.md") == ["read ../shared/REFERENCE.md"]
    assert offending_lines("(NVIDIA nccl-tests issue 212, maintainer's answer)") == []
    assert offending_lines("NVIDIA/nccl issue 1439") == []


def test_no_tracked_file_names_an_issue_of_ours_or_a_folder_outside() -> None:
    bad = []
    for path in _tracked_text():
        if not path.is_file():
            continue
        rel = path.relative_to(ROOT).as_posix()
        if rel == "tests/test_repo_text.py":  # its own examples
            continue
        if OUR_ISSUE.search(rel):
            bad.append(rel)
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        bad += [f"{rel}: {line.strip()[:120]}" for line in offending_lines(text)]
    assert bad == []
