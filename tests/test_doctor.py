"""`advisor doctor`: the child command's handling (output, exit codes, signals, no orphans) on
CPU commands; the CLI over the fake NVML; the --torch start-up hook on a CPU PyTorch job. The
diagnosis itself: tests/test_job_diagnosis.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor.cli import build_app, doctor_cmd
from probes.nvml import Nvml
from tests.fake_nvml import FakeNvmlLib, h200

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}


def doctor(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "advisor", "doctor", *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
        **kwargs,  # type: ignore[arg-type]
    )


def py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def test_the_job_runs_with_its_output_untouched_and_nothing_measured_is_exit_3() -> None:
    p = doctor("--", *py("import sys; print('line 1'); print('err', file=sys.stderr)"))
    assert p.returncode == 3, p.stderr  # no NVML here: the command ran, nothing was measured
    assert p.stdout.startswith("line 1\n")  # the job's own output first, as it printed it
    assert "err\n" in p.stderr
    assert "not measured: GPU: nvml_library_missing" in p.stdout


def test_without_nvml_the_host_side_is_still_sampled(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    # The busy loop prints the share of a core it got (its CPU time over its wall time): on a
    # loaded machine that is well under 100%, and the sampler must see about the same.
    job = (
        "import time\nt0, c0 = time.time(), time.process_time()\n"
        "while time.time() < t0 + 1.2: pass\n"
        "print(100 * (time.process_time() - c0) / (time.time() - t0))"
    )
    p = doctor("--interval", "0.2s", "--output", str(out), "--", *py(job))
    assert p.returncode == 3
    own_share_pct = float(p.stdout.splitlines()[0])
    samples = json.loads(out.read_text())["job"]["samples"]
    hosts = [s["host"] for s in samples[1:] if s["host"] is not None]
    assert len(hosts) >= 3 and all(s["gpus"] == [] for s in samples)
    assert max(h["busiest_process_cpu_pct"] for h in hosts) >= 0.5 * own_share_pct > 0


def test_a_failing_job_passes_its_exit_code_on_and_the_report_is_still_written(
    tmp_path: Path,
) -> None:
    out = tmp_path / "report.json"
    p = doctor("--output", str(out), "--", *py("raise SystemExit(7)"))
    assert p.returncode == 7
    report = json.loads(out.read_text())
    assert report["kind"] == "utilisation" and report["job"]["exit_code"] == 7
    assert report["job"]["verdict"] == "unmeasured"


def test_a_command_that_does_not_exist_is_exit_2_naming_it() -> None:
    p = doctor("--", "no-such-command-xyz", "--flag")
    assert p.returncode == 2
    assert "command not found: no-such-command-xyz" in p.stderr
    assert "Traceback" not in p.stderr


def test_a_job_killed_by_a_signal_exits_128_plus_the_signal() -> None:
    p = doctor("--", *py("import os, signal; os.kill(os.getpid(), signal.SIGTERM)"))
    assert p.returncode == 128 + signal.SIGTERM


def _started(proc: subprocess.Popen[str], marker: Path) -> None:
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.05)


def test_a_signal_to_the_doctor_reaches_the_job_once(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    job = f"""
        import pathlib, signal, sys, time
        got = []
        signal.signal(signal.SIGINT, lambda *_: got.append(1))
        pathlib.Path({str(marker)!r}).write_text("up")
        end = time.time() + 30
        while not got and time.time() < end:
            time.sleep(0.01)
        time.sleep(0.3)  # a second SIGINT would land here
        print("interrupts:", len(got))
        sys.exit(5)
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "advisor", "doctor", "--", *py(job)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    _started(proc, marker)
    proc.send_signal(signal.SIGINT)
    stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 5  # the job's own exit code
    assert "interrupts: 1" in stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_doctor_leaves_no_orphan(tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    job = f"""
        import os, pathlib, time
        pathlib.Path({str(marker)!r}).write_text(str(os.getpid()))
        time.sleep(60)
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "advisor", "doctor", "--", *py(job)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    _started(proc, marker)
    time.sleep(0.2)  # the pid is written before the file's content lands
    child = int(marker.read_text())
    proc.kill()
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _alive(child):
        assert time.monotonic() < deadline, f"job {child} outlived the doctor"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie has exited: only its parent (init here) has yet to reap it
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[1].startswith("Z"))


def test_duration_reports_while_the_job_runs_on(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    p = doctor(
        "--duration", "0.5s", "--json", "--output", str(out), "--",
        *py("import time; time.sleep(2); print('job done')"),
    )  # fmt: skip
    report = json.loads(out.read_text())
    assert report["job"]["exit_code"] is None  # written while the job still ran
    assert 0.4 <= report["job"]["sampled_s"] < 1.9
    assert p.stdout.rstrip().endswith("job done")  # the job went on after the report
    assert p.returncode == 3


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--interval", "1ms", "--", "true"], "--interval '1ms' is below 0.1 s"),
        (["--duration", "soon", "--", "true"], "--duration 'soon' is not a duration"),
        (["--instance-type", "p5.48xlarg", "--", "true"], "p5.48xlarge"),
    ],
)
def test_bad_usage_is_exit_2_before_the_job_starts(args: list[str], text: str) -> None:
    p = doctor(*args)
    assert p.returncode == 2 and text in p.stderr, p.stderr


# --- the CLI over the fake NVML -----------------------------------------------------------


def _invoke(monkeypatch: pytest.MonkeyPatch, lib: FakeNvmlLib, *args: str) -> object:
    monkeypatch.setattr(doctor_cmd, "open_nvml", lambda: Nvml(lib))
    return CliRunner().invoke(build_app("doctor"), ["doctor", *args], env={"COLUMNS": "200"})


def test_a_job_that_never_touches_the_gpu_is_found_and_priced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """p5.48xlarge's cheapest on-demand price in the shipped catalog, $55.04/h over 8 GPUs:
    $6.88/h a GPU, all 8 idle while a CPU-only job runs: $55.04/h."""
    lib = FakeNvmlLib(devices=[h200(util=(0, 0)) for _ in range(8)])
    job = py("import time; sum(i * i for i in range(3_000_000)); time.sleep(1.2)")
    result = _invoke(
        monkeypatch, lib, "--json", "--interval", "0.2s", "--instance-type", "p5.48xlarge", "--",
        *job,
    )  # fmt: skip
    assert result.exit_code == 1, result.output  # type: ignore[attr-defined]
    body = json.loads(result.output[result.output.index("{") :])  # type: ignore[attr-defined]
    job_report = body["job"]
    assert job_report["verdict"] == "findings"
    (finding,) = job_report["findings"]
    assert finding["code"] == "never_used_gpu"
    assert finding["idle_usd_per_h"] == pytest.approx(55.04)
    assert "instance type p5.48xlarge" in job_report["price_basis"]
    assert len(job_report["samples"]) >= 3
    assert all(g["job_on_gpu"] is False for s in job_report["samples"] for g in s["gpus"])
    assert (
        "GPU 0: SM and tensor activity (GPM) not supported by this GPU or driver"
        in job_report["unmeasured"]
    )


def test_gpm_readings_reach_the_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake's GPM values (metric id: value; PCIe in MiB/s) land in the samples: SM 42%,
    tensor 17%, PCIe 1,000 MiB/s = 1,048.58 MB/s to the host, 2,000 MiB/s from it."""
    gpm = {2: 42.0, 5: 17.0, 20: 1000.0, 21: 2000.0}
    lib = FakeNvmlLib(devices=[h200(gpm=gpm)])
    result = _invoke(monkeypatch, lib, "--json", "--interval", "0.2s", "--", *py(
        "import time; time.sleep(0.7)"))  # fmt: skip
    body = json.loads(result.output[result.output.index("{") :])  # type: ignore[attr-defined]
    g = body["job"]["samples"][-1]["gpus"][0]
    assert (g["sm_active_pct"], g["tensor_active_pct"]) == (42.0, 17.0)
    assert g["pcie_tx_mb_s"] == pytest.approx(1048.58)
    assert g["pcie_rx_mb_s"] == pytest.approx(2097.15)


# --- the --torch hook on a CPU job ----------------------------------------------------------


def test_the_torch_hook_counts_nothing_on_a_cpu_job_and_never_starts_cuda(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    other = tmp_path / "site"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    job = """
        import os, torch
        x = torch.randn(64, 64)
        y = (x @ x).sum()
        print("chained", os.environ.get("CHAINED"), "cuda", torch.cuda.is_initialized())
    """
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(ROOT), str(other)])}
    p = subprocess.run(
        [sys.executable, "-m", "advisor", "doctor", "--torch", "--json", "--", *py(job)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert "chained yes cuda False" in p.stdout  # the job's own sitecustomize still ran
    body = json.loads(p.stdout[p.stdout.index("{") :])
    torch_stats = body["job"]["torch"]
    assert torch_stats["cuda_used"] is False
    assert (torch_stats["syncs"], torch_stats["h2d_copies"]) == (0, 0)
    assert torch_stats["torch_version"].startswith("2.")
    assert torch_stats["hook_s"] >= 0  # the hook's own time, recorded (no bound: load adds)


def test_a_small_job_on_the_gpu_is_under_used_with_a_cheaper_option(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The job's process (the child's pid, listed by the fake NVML) holds 2 GiB of an H200's
    141 with SM activity 10%: under_used, 90% of p5en.48xlarge's per-GPU price idle, and the
    review's cheapest catalog option that holds 2 GiB and 10% of an H200's compute, with the
    saving per GPU-hour."""
    import psutil  # type: ignore[import-untyped]

    def children() -> list[dict[str, int]]:
        return [{"pid": c.pid, "used": 2 << 30} for c in psutil.Process().children()]

    lib = FakeNvmlLib(devices=[h200(processes=children, util=(100, 5), gpm={2: 10.0, 5: 2.0})])
    job = py("import time; time.sleep(1.5)")
    result = _invoke(
        monkeypatch, lib, "--json", "--interval", "0.2s", "--instance-type", "p5en.48xlarge",
        "--", *job,
    )  # fmt: skip
    assert result.exit_code == 1, result.output  # type: ignore[attr-defined]
    body = json.loads(result.output[result.output.index("{") :])  # type: ignore[attr-defined]
    (finding,) = body["job"]["findings"]
    assert finding["code"] == "under_used"
    assert "2.0 GiB and 10%" in finding["summary"]
    basis = body["job"]["price_basis"]
    assert basis.startswith("instance type p5en.48xlarge: $")
    per_gpu = float(basis.split("$")[1].split("/h")[0].replace(",", "")) / 8
    assert finding["idle_usd_per_h"] == pytest.approx(per_gpu * 0.9, abs=0.01)
    assert finding["cheaper_option"] is not None
    cheaper = float(finding["cheaper_option"].rsplit("$", 1)[1].split("/h")[0].replace(",", ""))
    assert finding["saving_usd_per_h"] == pytest.approx(per_gpu - cheaper, abs=0.01)
    assert 0 < cheaper < per_gpu
