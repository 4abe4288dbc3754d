"""`advisor probe` end to end on a machine without a usable GPU: exit 3, a report that says why,
CPU figures, and one-line errors for bad flags."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

import probes.probe
from advisor.cli import app, probe_cmd
from probes.probe import ProbeRun
from probes.report import GpuInventory, Inventory, ProbeReport
from tests.test_cli import run

EXIT_CANNOT_RUN = 3


def _cpu_only_torch() -> bool:
    """Whether the installed torch is a CPU build, read from torch/version.py without importing."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return False
    text = (Path(spec.origin).parent / "version.py").read_text()
    return re.search(r"^cuda(: [^=]+)? = None$", text, re.MULTILINE) is not None


cpu_torch_only = pytest.mark.skipif(
    not _cpu_only_torch(), reason="expects the CPU-only torch build of this test machine"
)


@pytest.fixture
def lock_dir(tmp_path: Path) -> dict[str, str]:
    return {"ADVISOR_PROBE_LOCK_DIR": str(tmp_path / "locks")}


def _one_line_error(p: subprocess.CompletedProcess[str], text: str) -> None:
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.strip().startswith("error: ") and text in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stdout == ""


@cpu_torch_only
def test_json_report_without_a_gpu(tmp_path: Path, lock_dir: dict[str, str]) -> None:
    out = tmp_path / "report.json"
    p = run("probe", "--json", "--output", str(out), env=lock_dir)
    assert p.returncode == EXIT_CANNOT_RUN, p.stderr
    report = ProbeReport.model_validate_json(p.stdout)
    assert "Traceback" not in p.stderr
    assert report.verdict == "error" and report.mode == "quick" and report.device == 0
    assert report.accelerator is None and report.expected_accelerator is None
    codes = [d.code for d in report.diagnosis]
    assert "torch_without_cuda" in codes
    assert report.inventory.torch_version and report.inventory.gpu is None
    by_name = {c.name: c for c in report.checks}
    assert [c.status for c in report.checks if c.name == "gpu_available"] == ["error"] * len(codes)
    matmul = by_name["cpu_matmul_fp32"]
    assert matmul.status == "pass" and matmul.unit == "TFLOP/s"
    assert matmul.measured is not None and matmul.measured > 0
    assert by_name["cpu_memcpy"].measured is not None and by_name["cpu_memcpy"].measured > 0
    # the CPU figures, then the one-rank collective that shows torch.distributed works here
    assert [m.name for m in report.measurements] == [
        "cpu_matmul_fp32",
        "cpu_memcpy",
        "all_reduce_1M",
    ]
    # progress goes to stderr, the report alone to stdout
    assert "probe: inspecting the machine" in p.stderr
    # --output writes the same report
    assert json.loads(out.read_text()) == json.loads(p.stdout)
    assert [f.name for f in tmp_path.iterdir() if f.name.endswith(".tmp")] == []


@cpu_torch_only
def test_table_report_without_a_gpu(lock_dir: dict[str, str]) -> None:
    p = run("probe", "--only", "cpu_matmul_fp32", env=lock_dir)
    assert p.returncode == EXIT_CANNOT_RUN, p.stderr
    assert "Traceback" not in p.stderr
    assert "diagnosis torch_without_cuda: torch " in p.stdout
    assert "gpu_available" in p.stdout and "cpu_matmul_fp32" in p.stdout
    assert "cpu_memcpy" not in p.stdout  # --only ran one measurement
    assert "verdict: error in " in p.stdout


def test_table_at_80_columns_keeps_names_and_words_whole(
    lock_dir: dict[str, str], tmp_path: Path
) -> None:
    """At 80 columns the table wraps a detail between words and never splits a check's name or a
    word of its detail (Rich's fold made `cpu_matmul_fp` + `32`). The details come from the same
    run's JSON: a second run's can differ (a 'noisy' timing on a loaded machine)."""
    saved = tmp_path / "report.json"
    p = run(
        "probe",
        "--only",
        "cpu_matmul_fp32",
        "--output",
        str(saved),
        env={**lock_dir, "COLUMNS": "80"},
    )
    table = p.stdout.split("\ndiagnosis")[0]
    assert max(len(line) for line in table.splitlines()) <= 80
    words = table.split()
    report = json.loads(saved.read_text())
    for check in report["checks"]:
        assert check["name"] in words, check["name"]
        for word in check["detail"].split():
            if word.isalpha() or "_" in word:
                assert word in words, (word, table)


# (case guarded, arguments, text of the one-line error)
BAD_FLAGS = [
    (
        "a typo of an accelerator id gets a suggestion",
        ["probe", "--expect", "h200-sxn"],
        "did you mean 'h200-sxm'",
    ),
    (
        "an id that is nothing like a known one",
        ["probe", "--expect", "nope"],
        "--expect 'nope' is no GPU accelerator or GPU instance type",
    ),
    (
        "--output into a directory that does not exist",
        ["probe", "--output", "/nonexistent/dir/x.json"],
        "--output: directory '/nonexistent/dir' does not exist",
    ),
]


@pytest.mark.parametrize(
    ("args", "text"), [row[1:] for row in BAD_FLAGS], ids=[row[0] for row in BAD_FLAGS]
)
def test_bad_flags_fail_fast_with_one_line(args: list[str], text: str) -> None:
    p = run(*args)
    _one_line_error(p, text)  # one line also means nothing was measured first


@cpu_torch_only
def test_output_that_is_a_directory_is_refused(tmp_path: Path, lock_dir: dict[str, str]) -> None:
    target = tmp_path / "out"
    target.mkdir()
    p = run("probe", "--only", "cpu_matmul_fp32", "--output", str(target), env=lock_dir)
    try:
        _one_line_error(p, "--output")
    finally:
        for stray in tmp_path.glob(".out.*.tmp"):
            stray.unlink()


BLOCK_TORCH = (
    "import sys; sys.modules['torch'] = None; sys.modules['numpy'] = None; "
    "from advisor.cli import main; sys.argv = ['advisor', *sys.argv[1:]]; main()"
)


def test_without_torch_names_the_extra_and_still_gives_cpu_figures(
    lock_dir: dict[str, str],
) -> None:
    """torch (and numpy) made unimportable in the child: exit 3, the diagnosis says which extra
    to install, the memory copy is measured without torch and the matmul is skipped, saying why."""
    p = subprocess.run(
        [sys.executable, "-c", BLOCK_TORCH, "probe", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, **lock_dir},
        timeout=60,
    )
    assert p.returncode == EXIT_CANNOT_RUN, p.stderr
    assert "Traceback" not in p.stderr
    report = ProbeReport.model_validate_json(p.stdout)
    assert report.verdict == "error" and report.inventory.torch_version is None
    (torch_missing,) = [d for d in report.diagnosis if d.code == "torch_missing"]
    assert "pip install 'advisor[probe]'" in torch_missing.message
    by_name = {c.name: c for c in report.checks}
    memcpy, matmul = by_name["cpu_memcpy"], by_name["cpu_matmul_fp32"]
    assert memcpy.status == "pass" and memcpy.measured is not None and memcpy.measured > 0.5
    assert matmul.status == "skip" and matmul.measured is None
    assert "needs torch or numpy" in matmul.detail


# -- exits that need a GPU run: the measuring is replaced at probes.probe.run_probe -----------


def gpu_run(watchdog_tripped: bool = False) -> ProbeRun:
    """A run that reached an H200 and measured nothing: verified, its verdict is pass."""
    gpu = GpuInventory(name="NVIDIA H200")
    inventory = Inventory(hostname="h", python="3.11", device_count=1, gpu=gpu)
    return ProbeRun(
        dt.datetime(2026, 11, 30, tzinfo=dt.UTC),
        "quick",
        0,
        inventory,
        [],
        duration_s=1.0,
        watchdog_tripped=watchdog_tripped,
    )


def invoke(monkeypatch: pytest.MonkeyPatch, run: ProbeRun, *args: str) -> Result:
    monkeypatch.setattr(probes.probe, "run_probe", lambda *a, **kw: run)
    return CliRunner().invoke(app, ["probe", *args], env={"COLUMNS": "200"})


def test_a_gpu_run_that_passes_exits_0(monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(monkeypatch, gpu_run(), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["verdict"] == "pass"


def test_unwritable_output_still_prints_the_report_and_exits_2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # /proc exists as a directory but takes no new files, even for root
    result = invoke(monkeypatch, gpu_run(), "--json", "--output", "/proc/report.json")
    assert result.exit_code == 2
    assert "cannot write --output /proc/report.json" in result.stderr
    assert json.loads(result.stdout)["verdict"] == "pass"


def test_a_tripped_watchdog_leaves_at_once_with_the_verdicts_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hung measurement thread cannot be joined: the CLI leaves through os._exit."""
    left: list[int] = []

    def exit_now(code: int) -> None:
        left.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(probe_cmd.os, "_exit", exit_now)
    result = invoke(monkeypatch, gpu_run(watchdog_tripped=True), "--json")
    assert left == [0] and result.exit_code == 0
    result = invoke(monkeypatch, gpu_run(watchdog_tripped=False), "--json")
    assert result.exit_code == 0 and left == [0]  # no tripped watchdog: a normal exit
