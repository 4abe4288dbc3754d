"""On a base install (`pip install advisor`, no probe extra: no torch, no nvidia-ml-py) the
commands that need the extra exit 3 with the install hint and the advice works. The test
command runs this file in such an environment (.venv-base, its "base install" step); in the
full test environment it is skipped, and tests/test_nvml_without_bindings.py hides the two
libraries instead."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BASE = all(importlib.util.find_spec(m) is None for m in ("torch", "pynvml"))
pytestmark = pytest.mark.skipif(
    not BASE and not os.environ.get("ADVISOR_BASE_INSTALL"),
    reason="torch or nvidia-ml-py installed: not a base install",
)


def advisor(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ADVISOR_PROBE_LOCK_DIR": str(tmp_path / "locks")}
    return subprocess.run(
        [sys.executable, "-m", "advisor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )


def test_this_is_a_base_install() -> None:
    assert BASE, "ADVISOR_BASE_INSTALL is set but torch or nvidia-ml-py is importable"


@pytest.mark.parametrize(
    "args",
    [
        ("doctor", "--", sys.executable, "-c", "pass"),
        ("probe",),
        ("probe", "--health-check"),
        ("probe", "--ops", "--quick"),
        ("doctor", "--pid", str(os.getpid()), "--duration", "1s"),
    ],
    ids=["doctor", "probe", "probe-health-check", "probe-ops", "doctor-pid"],
)
def test_the_probe_extra_commands_exit_3_with_the_hint(tmp_path: Path, args: tuple[str]) -> None:
    p = advisor(tmp_path, *args)
    if "No such option" in p.stderr:  # a command this tree does not have yet
        pytest.skip(p.stderr.strip().splitlines()[-1])
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    assert "pip install" in p.stdout + p.stderr


def test_the_advice_needs_no_extra(tmp_path: Path) -> None:
    p = advisor(tmp_path, "recommend", "-w", "fine_tuning", "-m", "llama-3-8b", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["recommendations"]
