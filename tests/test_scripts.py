"""The test command shows progress while it works and says what it leaves running."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def bash(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **env},
        timeout=60,
    )


def test_a_long_step_says_it_is_still_running() -> None:
    p = bash(
        "source scripts/progress.sh; with_progress nap sleep 2.5; "
        "with_progress broken false || echo failed=$?; steps_summary",
        ADVISOR_PROGRESS_EVERY="1",
    )
    lines = p.stdout.splitlines()
    assert lines[0] == "== nap"
    assert 1 <= sum("... nap: still running" in line for line in lines) <= 2  # ~1 s and ~2 s
    assert "failed=1" in lines  # a failing step's status comes through
    assert "== time per step" in lines
    # bash's SECONDS counts whole seconds: 2.5 s reads 2 or 3
    assert any(line.split()[:2] in (["nap", "2"], ["nap", "3"]) for line in lines)


def test_stop_postgres_with_nothing_running_is_no_error(tmp_path: Path) -> None:
    p = bash("bash scripts/stop-postgres.sh", ADVISOR_TEST_PG_DATA=str(tmp_path / "none"))
    assert p.returncode == 0, p.stderr
    assert "nothing to stop" in p.stdout


def test_the_test_command_says_what_it_leaves_running() -> None:
    text = (REPO / "scripts" / "test.sh").read_text()
    assert "source scripts/progress.sh" in text and "trap leave_note EXIT" in text
    assert "stop it with: bash scripts/stop-postgres.sh" in text
    p = bash("bash -n scripts/test.sh && bash -n scripts/stop-postgres.sh")
    assert p.returncode == 0, p.stderr
