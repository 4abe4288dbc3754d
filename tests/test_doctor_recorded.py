"""The diagnosis on readings recorded on our H200 (benchmarks/doctor_gpu.sh, 2026-12-02, driver
580.159.04, torch 2.11.0+cu130; the reports of benchmarks/results/doctor-2026-12-02-*, copied to
tests/data/doctor/): each pitfall program diagnosed as what it is, its fix as healthy. The rules
are re-run on the recorded samples and hook counts, so a change to them is checked against real
GPM, NVML and PyTorch data."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.fleet.job_diagnosis import Diagnosis, diagnose
from probes.report import UtilisationReport

DATA = Path(__file__).parent / "data" / "doctor"
PRICE = 10.0  # $/h a GPU, for the arithmetic


def recorded(program: str) -> tuple[UtilisationReport, Diagnosis]:
    report = UtilisationReport.model_validate_json((DATA / f"h200-{program}.json").read_text())
    job = report.job
    assert job is not None and job.torch is not None
    totals = {g.index: g.memory_total_mib for g in report.gpus}
    return report, diagnose(job.samples, job.torch, totals, job.sampled_s, PRICE)


@pytest.mark.parametrize(
    ("program", "codes"),
    [
        ("model_on_cpu", ["never_used_gpu"]),
        ("pageable_sync", ["sync_bound", "transfer_bound"]),
        ("pinned_prefetch", []),
        ("made_on_host", ["made_on_host"]),
        ("made_on_device", []),
        ("small_model", ["host_bound", "under_used"]),
    ],
)
def test_each_program_is_diagnosed_as_what_it_is(program: str, codes: list[str]) -> None:
    _, d = recorded(program)
    assert [f.code for f in d.findings] == codes
    assert d.verdict == ("findings" if codes else "healthy")


def test_the_healthy_loops_keep_the_sms_busy() -> None:
    for program in ("pinned_prefetch", "made_on_device"):
        _, d = recorded(program)
        (gpu,) = d.activity
        assert gpu.source == "SM activity (GPM)" and gpu.active_pct is not None
        assert gpu.active_pct > 80  # bf16 GEMMs of 16,384 x 8,192 x 8,192 once fed (84-90%)
        assert d.gpu_hours_lost is not None and d.gpu_hours_lost <= 0.001  # of a ~25 s window


def test_the_pageable_loop_names_its_lines_and_prices_the_idle_share() -> None:
    """print(loss) at line 20 syncs 8 times a step (tensor printing reads elements: 1,296 for
    162 steps), the blocking copy at line 15 runs at the step rate, 161 in 9.97 s = 16.2 a
    second of 268 MB (4,334 MB/s); SM activity 21.0%, so 79% of a $10/h GPU idles."""
    _, d = recorded("pageable_sync")
    sync, transfer = d.findings
    assert "pageable_sync.py:20" in sync.summary and "pageable_sync.py:15" not in sync.summary
    assert transfer.summary == (
        "transfer-bound: 16 host-to-GPU copies a second at pageable_sync.py:15, 4,334 MB/s"
    )
    assert d.activity[0].active_pct == pytest.approx(21.0, abs=0.05)
    assert sync.idle_usd_per_h == pytest.approx(PRICE * (1 - 0.21), abs=0.01)


def test_the_cpu_made_tensors_are_traced_to_their_line() -> None:
    _, d = recorded("made_on_host")
    (f,) = d.findings
    assert "63 at made_on_host.py:15" in f.summary
    assert "device='cuda'" in f.fix


def test_the_cpu_job_never_had_a_gpu_context() -> None:
    report, d = recorded("model_on_cpu")
    assert report.job is not None and report.job.torch is not None
    assert report.job.torch.cuda_used is False
    assert all(g.job_on_gpu is False for s in report.job.samples for g in s.gpus)
    assert d.findings[0].idle_usd_per_h == PRICE  # the machine's one GPU, all of it
