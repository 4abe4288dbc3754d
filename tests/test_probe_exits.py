"""`advisor probe` exit codes on a fake H200 (tests/fake_gpu_probe.py), each in its own process:
another probe holding the GPU's lock (3 after --lock-wait-s), an --output that cannot be written
(2, one line), and a hung measurement stopped by the watchdog (1: a check errored, README).

tests/test_probe_cli.py covers the machine without a GPU; tests/test_probe_lock.py and
tests/test_probe_run.py the lock and the watchdog below the CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.report import ProbeReport
from tests.api_server import REPO

GPU_KEY = "GPU-00000000-fake-h200"  # the fake H200's NVML UUID: the lock is keyed by it
H200_BF16_TFLOPS = "781"  # h200-sxm's measured reference: the run passes when nothing else fails

HOLDER = textwrap.dedent(
    """
    import sys
    from probes.lock import gpu_lock
    with gpu_lock(sys.argv[1], directory=sys.argv[2], wait_s=0):
        print("held", flush=True)
        sys.stdin.read()  # holds the lock until the test closes our stdin
    """
)


def probe(
    matmul: str, watchdog_s: float, lock_dir: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    # No COLUMNS: stderr is a pipe, as in a provisioning script's log, and errors must stay
    # one line at the default width.
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["ADVISOR_PROBE_LOCK_DIR"] = str(lock_dir)
    cmd = [sys.executable, "-m", "tests.fake_gpu_probe", matmul, str(watchdog_s), "--"]
    return subprocess.run(
        [*cmd, "probe", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=120
    )


def error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if not line.startswith("probe: ")]


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the fake GPU's lock in tmp_path."""
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER, GPU_KEY, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    yield p
    if p.poll() is None:
        p.kill()
    p.wait(timeout=10)


def test_a_passing_run_exits_0(tmp_path: Path) -> None:
    """The baseline the cases below depart from: the same fake machine, nothing in the way."""
    p = probe(H200_BF16_TFLOPS, 30, tmp_path, "--only", "matmul_bf16", "--json")
    assert p.returncode == 0, p.stderr
    assert ProbeReport.model_validate_json(p.stdout).verdict == "pass"


def test_lock_held_by_another_process_exits_3(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    p = probe(H200_BF16_TFLOPS, 30, tmp_path, "--only", "matmul_bf16", "--lock-wait-s", "0.3")
    assert p.returncode == 3, (p.stdout, p.stderr)
    said = p.stderr.replace("\n", " ")
    assert f"GPU {GPU_KEY} is being probed by pid {holder.pid} since " in said
    (error,) = error_lines(p.stderr)[-1:]
    assert error.startswith(f"error: another probe (pid {holder.pid} since "), error
    assert error.endswith(
        f"is measuring GPU {GPU_KEY}; refusing after 0.3 s so that the two do not measure each other"
    )
    assert "measuring matmul_bf16" not in p.stderr and p.stdout == ""  # nothing was measured


@pytest.fixture
def unwritable_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory the probe cannot create files in. Root ignores permission bits, so as root
    sysfs stands in: the kernel refuses to create regular files there, even for root."""
    locked = tmp_path / "read-only"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        yield locked if not os.access(locked, os.W_OK) else Path("/sys")
    finally:
        locked.chmod(0o755)


def test_unwritable_output_exits_2_with_one_line(tmp_path: Path, unwritable_dir: Path) -> None:
    target = unwritable_dir / "probe-report.json"
    p = probe(H200_BF16_TFLOPS, 30, tmp_path, "--only", "matmul_bf16", "--output", str(target))
    assert p.returncode == 2, (p.stdout, p.stderr)
    (error,) = error_lines(p.stderr)
    assert error.startswith("error: ") and "--output" in error and str(target) in error
    assert not target.exists()
    assert [f.name for f in unwritable_dir.iterdir() if f.name.startswith(".probe-report")] == []


def test_hung_measurement_is_stopped_by_the_watchdog_and_exits_1(tmp_path: Path) -> None:
    # matmul_fp16 runs before matmul_bf16; it never returns
    only = "matmul_bf16,matmul_fp16"
    p = probe("hang", 0.5, tmp_path, "--only", only, "--json", "--expect", "h200-sxm")
    assert p.returncode == 1, (p.stdout, p.stderr)  # README: 1 = a check failed or errored
    report = ProbeReport.model_validate_json(p.stdout)
    assert report.verdict == "error"
    checks = {c.name: c for c in report.checks}
    assert checks["matmul_fp16"].status == "error"
    assert checks["matmul_fp16"].detail == "matmul_fp16 did not finish within 0.5 s (watchdog)"
    # nothing more is run on a device that may be hung
    assert checks["matmul_bf16"].status == "error"
    assert checks["matmul_bf16"].detail == "not run: an earlier step hung"
    assert "measuring matmul_bf16" not in p.stderr
