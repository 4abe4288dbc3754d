"""`advisor doctor` on the jobs it missed: a job holding GPU memory with no kernel (idle
reservation) and a training loop starved by its own DataLoader (input-bound). The GPU is the fake
NVML of tests/fake_nvml.py (this machine has none); the jobs are real processes and their stacks
are read by the real py-spy (skipped where this machine refuses it ptrace)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]
import pytest
from typer.testing import CliRunner

from advisor.cli import build_app, doctor_cmd
from probes.nvml import Nvml
from probes.stacks import find_py_spy
from tests.fake_nvml import FakeNvmlLib, h200

ROOT = Path(__file__).resolve().parents[1]


def _invoke(monkeypatch: pytest.MonkeyPatch, lib: FakeNvmlLib, *args: str) -> Any:
    monkeypatch.setattr(doctor_cmd, "open_nvml", lambda: Nvml(lib))
    return CliRunner().invoke(build_app("doctor"), ["doctor", *args], env={"COLUMNS": "200"})


def _children_holding(mib: int) -> Any:
    def listed() -> list[dict[str, int]]:
        return [{"pid": c.pid, "used": mib << 20} for c in psutil.Process().children()]

    return listed


def _body(result: Any) -> dict[str, Any]:
    return json.loads(result.output[result.output.index("{") :])  # type: ignore[no-any-return]


def test_a_job_holding_100_gib_with_no_kernel_is_an_idle_reservation_with_its_price(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The job (a sleep) holds 100 GiB of an H200 and the GPU reads 0% throughout: the finding
    names the memory and the whole window; its lost GPU-hours are the window held idle and
    its dollars those hours at p5en.48xlarge's per-GPU price (its hourly price / 8)."""
    lib = FakeNvmlLib(devices=[h200(processes=_children_holding(100 << 10), util=(0, 0))])
    job = [sys.executable, "-c", "import time; time.sleep(2.0)"]
    result = _invoke(
        monkeypatch, lib, "--json", "--interval", "0.2s", "--instance-type", "p5en.48xlarge",
        "--", *job,
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    report = _body(result)["job"]
    assert report["verdict"] == "findings"
    codes = [f["code"] for f in report["findings"]]
    assert codes[0] == "idle_reservation" and "under_used" not in codes
    finding = report["findings"][0]
    assert "100.0 GiB held, no kernel for the job's whole window" in finding["evidence"][0]
    per_gpu = float(report["price_basis"].split("$")[1].split("/h")[0].replace(",", "")) / 8
    assert finding["idle_usd_per_h"] == pytest.approx(per_gpu, abs=0.01)
    held = [s for s in report["samples"] if s["gpus"][0]["job_on_gpu"]]
    # each reading stands for the time since the one before; the first held one for none
    idle_s = held[-1]["t_s"] - held[0]["t_s"]
    assert finding["lost_gpu_hours"] == pytest.approx(idle_s / 3600, abs=2 / 3600)
    assert finding["lost_usd"] == pytest.approx(finding["lost_gpu_hours"] * per_gpu, abs=1e-3)


@pytest.mark.slow
def test_a_loader_without_workers_starving_the_gpu_is_input_bound_at_its_transform(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """tests/jobs/cpu_loader.py with num_workers=0 while the GPU reads 5%: input_bound, in the
    main process, at the transform's line (16), with the workers' fix; no transfer finding."""
    if find_py_spy() is None:
        pytest.skip("py-spy is not installed (the probe extra)")
    lib = FakeNvmlLib(
        devices=[h200(processes=_children_holding(2 << 10), util=(5, 1), gpm={2: 5.0, 5: 0.0})]
    )
    job = [sys.executable, str(ROOT / "tests" / "jobs" / "cpu_loader.py"), "0", "12"]
    result = _invoke(monkeypatch, lib, "--json", "--interval", "0.5s", "--", *job)
    report = _body(result)["job"]
    stages = report["stages"]
    if stages is None and any("ptrace" in u for u in report["unmeasured"]):
        pytest.skip("this machine refuses ptrace to py-spy")
    assert stages is not None and stages["loading_in_process"] is True
    codes = [f["code"] for f in report["findings"]]
    assert codes[0] == "input_bound", report["findings"]
    assert "transfer_bound" not in codes and "host_bound" not in codes
    finding = report["findings"][0]
    assert "cpu_loader.py:16" in finding["summary"]
    assert "num_workers" in finding["fix"]


# --- --pid: a job already running ---------------------------------------------------------------


def _doctor(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "advisor", "doctor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_pid_watches_a_running_job_without_stopping_it_and_says_what_it_cannot_count() -> None:
    """tests/jobs/sleepy.py sleeps 0.1 s a step: watched for 3 s, its time is waiting at the
    sleep line (where py-spy may read it); it is still running afterwards; no NVML here: exit 3.
    """
    job = subprocess.Popen([sys.executable, str(ROOT / "tests" / "jobs" / "sleepy.py"), "60"])
    try:
        time.sleep(1.0)
        p = _doctor("--pid", str(job.pid), "--duration", "3s", "--json")
        still_running = job.poll() is None
    finally:
        job.kill()
        job.wait()
    assert p.returncode == 3, p.stderr
    assert still_running
    report = json.loads(p.stdout)["job"]
    assert report["exit_code"] is None
    assert report["command"][-2:] == [str(ROOT / "tests" / "jobs" / "sleepy.py"), "60"]
    assert any(
        u.startswith("--pid: attached to a running process, so no --torch hook")
        for u in report["unmeasured"]
    )
    assert 2.5 <= report["sampled_s"] < 30
    stages = report["stages"]
    if stages is None:
        assert any("py-spy" in u for u in report["unmeasured"])  # why the stacks are missing
        return
    assert stages["shares"][0]["stage"] == "waiting"
    assert stages["shares"][0]["sites"][0]["site"].endswith("tests/jobs/sleepy.py:15")


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--pid", "999999999", "--duration", "1s"], "--pid 999999999: no such process"),
        (["--pid", "1", "--", "true"], "--pid watches a running process: give no command"),
    ],
)
def test_pid_bad_usage_is_exit_2_naming_the_option(args: list[str], text: str) -> None:
    p = _doctor(*args)
    assert p.returncode == 2 and text in p.stderr, p.stderr


# --- --node: every GPU of the machine at one look ----------------------------------------------


def test_node_view_names_each_gpu_state_its_processes_and_the_idle_dollars(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Four H200s at p5en.48xlarge's per-GPU price P (its hourly price / 8): GPU 0 held (80 GiB)
    with SM 0% -> idle_reservation, P idle; GPU 1 with no process and no kernel -> free, P idle;
    GPU 2 at SM 30% -> under_used, 0.7 P; GPU 3 at SM 90% -> busy. The node: 2 P idle an hour,
    0.7 P under-used."""
    gib = 1 << 30
    lib = FakeNvmlLib(
        devices=[
            h200(processes=[{"pid": 4242, "used": 80 * gib, "name": "jupyter"}], gpm={2: 0.0}),
            h200(processes=[], gpm={2: 0.0}),
            h200(processes=[{"pid": 4343, "used": 10 * gib}], util=(60, 5), gpm={2: 30.0}),
            h200(processes=[{"pid": 4444, "used": 70 * gib}], util=(100, 50), gpm={2: 90.0}),
        ]
    )
    result = _invoke(
        monkeypatch, lib, "--node", "--json", "--duration", "0.3s", "--instance-type",
        "p5en.48xlarge",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    view = _body(result)
    assert view["kind"] == "node_view"
    assert [g["state"] for g in view["gpus"]] == ["idle_reservation", "free", "under_used", "busy"]
    p = float(view["price_basis"].split("$")[1].split("/h")[0].replace(",", "")) / 8
    assert view["idle_usd_per_h"] == pytest.approx(2 * p, abs=0.02)
    assert view["under_used_usd_per_h"] == pytest.approx(0.7 * p, abs=0.01)
    held = view["gpus"][0]["processes"]
    assert held == [
        {
            "pid": 4242,
            "name": "jupyter",
            "used_memory_mib": 80 * 1024.0,
            "finding": "idle_reservation",
        }
    ]
    assert view["gpus"][3]["processes"][0]["finding"] is None


def test_node_view_without_nvml_is_exit_3_and_with_a_command_exit_2() -> None:
    p = _doctor("--node", "--json")
    assert p.returncode == 3 and "nvml" in p.stderr.lower(), p.stderr
    p = _doctor("--node", "--", "true")
    assert p.returncode == 2 and "--node looks at the whole machine" in p.stderr


@pytest.mark.slow
def test_two_ranks_one_slow_names_the_straggler_and_shows_each_rank() -> None:
    """tests/jobs/straggler.py: two gloo ranks, rank 1 doing five times rank 0's host work per
    step: rank 0 waits in the all-reduce, rank 1 is named the straggler, each rank's stages are
    in the report (the first rank's are the job's)."""
    if find_py_spy() is None:
        pytest.skip("py-spy is not installed (the probe extra)")
    p = _doctor("--json", "--", sys.executable, str(ROOT / "tests" / "jobs" / "straggler.py"), "15")
    report = json.loads(p.stdout[p.stdout.index("{") :])["job"]
    if not report["ranks"] and any("ptrace" in u for u in report["unmeasured"]):
        pytest.skip("this machine refuses ptrace to py-spy")
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert report["stages"]["rank"] == 0
    codes = [f["code"] for f in report["findings"]]
    assert codes[0] == "straggler", (report["findings"], report["ranks"])
    assert "wait for rank 1" in report["findings"][0]["summary"]
    assert p.returncode == 1


def test_node_watch_redraws_the_view_after_each_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two refreshes of a node with one held, idle GPU: the snapshot is read twice (once a
    window) and the drawn view names the GPU's state and its process's finding."""
    from rich.console import Console

    from advisor.catalog import load_catalog
    from advisor.cli import doctor_node

    gib = 1 << 30
    lib = FakeNvmlLib(
        devices=[h200(processes=[{"pid": 4242, "used": 80 * gib, "name": "jupyter"}], gpm={2: 0.0})]
    )
    reads = []
    real = doctor_node.read_node
    monkeypatch.setattr(doctor_node, "read_node", lambda *a: reads.append(1) or real(*a))
    out = Console(record=True, width=200, force_terminal=False)
    view = doctor_node.watch(load_catalog(), Nvml(lib), None, 0.2, refreshes=2, out=out)
    assert len(reads) == 2
    assert view is not None and view.gpus[0].state == "idle_reservation"
    drawn = out.export_text()
    assert "GPU 0" in drawn and "idle_reservation" in drawn and "[idle_reservation]" in drawn


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--watch"], "give --node with it"),
        (["--node", "--watch", "--json"], "--watch is a live view"),
    ],
)
def test_watch_bad_usage_is_exit_2(args: list[str], text: str) -> None:
    p = _doctor(*args)
    assert p.returncode == 2 and text in p.stderr, p.stderr
