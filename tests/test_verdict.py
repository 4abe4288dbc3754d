"""One verdict per job: the GPU classes the review's savings read and the doctor's findings agree
(advisor/fleet/verdict.py), and a cheaper option on another vendor's stack says what porting it
needs, in the doctor and in the review."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from advisor import load_catalog
from advisor.fleet.job_diagnosis import diagnose
from advisor.fleet.porting import porting_note
from advisor.fleet.utilisation import classify
from advisor.fleet.verdict import agree, gpu_class
from advisor.review import build_review, from_dir, render_html
from advisor.review.costs import savings
from advisor.review.data import usage_record
from probes.report import GpuUtilisation, JobReport, SyncSite, UtilisationReport
from tests.test_job_diagnosis import GIB, TOTAL, WINDOW_S, samples, torch_stats


@pytest.mark.parametrize(
    ("current", "codes", "expected"),
    [
        # the fleet rules' class stands where the doctor has nothing to add
        ("optimized", [], "optimized"),
        ("over_provisioned", ["under_used"], "over_provisioned"),
        ("under_provisioned", ["sync_bound"], "under_provisioned"),
        # held without kernels: idle, whatever the memory
        ("optimized", ["idle_reservation"], "idle"),
        ("over_provisioned", ["never_used_gpu"], "idle"),
        # memory and activity both low by the doctor's finer readings
        ("optimized", ["under_used"], "over_provisioned"),
        # a cause in the job's code: not sized until it is fixed
        ("over_provisioned", ["input_bound"], None),
        ("idle", ["host_bound", "made_on_host"], None),
        ("over_provisioned", ["straggler"], None),
    ],
)
def test_the_gpu_class_follows_the_doctors_findings(
    current: str, codes: list[str], expected: str | None
) -> None:
    finding, why = gpu_class(current, codes)  # type: ignore[arg-type]
    assert finding == expected
    assert (why is None) == (expected == current)


def gpu(memory_mib: float, util: float = 95.0) -> GpuUtilisation:
    """An H200 (140 GiB) classified by the fleet rules."""
    g = GpuUtilisation(
        index=0,
        name="NVIDIA H200",
        samples=60,
        util_gpu_mean_pct=util,
        util_gpu_p95_pct=util,
        memory_used_max_mib=memory_mib,
        memory_total_mib=TOTAL[0],
    )
    return classify(g, WINDOW_S, load_catalog())


def report(g: GpuUtilisation, job: JobReport) -> UtilisationReport:
    return UtilisationReport(
        created_at=dt.datetime.now(dt.UTC),
        host="gpu-9",
        instance_type="p5en.48xlarge",
        duration_s=WINDOW_S,
        interval_s=1.0,
        gpus=[g],
        job=job,
    )


def job(readings: list, found: object, stats: object) -> JobReport:  # type: ignore[type-arg]
    return JobReport(
        command=["python", "serve.py"],
        exit_code=0,
        wall_s=WINDOW_S,
        sampled_s=WINDOW_S,
        interval_s=1.0,
        samples=readings,
        torch=stats,  # type: ignore[arg-type]
        verdict=found.verdict,  # type: ignore[attr-defined]
        findings=found.findings,  # type: ignore[attr-defined]
        gpu_hours_lost=found.gpu_hours_lost,  # type: ignore[attr-defined]
    )


def test_a_healthy_job_on_an_over_provisioned_gpu_is_one_verdict(tmp_path: Path) -> None:
    """SM activity 90% but 10 GiB of the H200's 140 (7%, below the rules' 40%): the doctor alone
    calls it healthy, the rules over-provisioned. Agreed: the doctor reports under_used with the
    rules' evidence, and the review's saving for the same GPU stands beside it."""
    readings = samples(sm=90, job_mib=10 * GIB)
    stats = torch_stats()
    alone = diagnose(readings, stats, TOTAL, WINDOW_S, 4.0)
    g = gpu(10 * GIB)
    assert alone.verdict == "healthy" and g.finding == "over_provisioned"
    gpus, found = agree([g], readings, alone)
    assert found.verdict == "findings"
    (f,) = found.findings
    assert f.code == "under_used" and "GPU_MEMORY_LOW" in f.summary
    assert any("memory used peaked at 10.0 GiB" in e for e in f.evidence)
    assert gpus[0].finding == "over_provisioned"
    (tmp_path / "doctor.json").write_text(
        report(gpus[0], job(readings, found, stats)).model_dump_json()
    )
    review = build_review(from_dir(tmp_path), load_catalog())
    (row,) = review.jobs
    assert row.job.verdict == "findings"
    assert [s.finding for s in review.savings] == ["over_provisioned"]


def test_a_job_bound_by_its_own_code_is_not_told_to_downsize(tmp_path: Path) -> None:
    """Sync-bound at SM 30% on 10 GiB: the rules alone would call the GPU over-provisioned and the
    review would offer a smaller one; the fix is in the job, so the GPU is not sized."""
    readings = samples(sm=30, core=100, job_mib=10 * GIB)
    stats = torch_stats(
        syncs=250, sync_sites=[SyncSite(site="train.py:41", count=251, span_s=10.0)]
    )
    found = diagnose(readings, stats, TOTAL, WINDOW_S, 4.0)
    assert [f.code for f in found.findings] == ["sync_bound"]
    g = gpu(10 * GIB, util=30.0)
    assert g.finding == "over_provisioned"
    gpus, agreed = agree([g], readings, found)
    assert agreed == found
    assert gpus[0].finding is None
    assert "not sized: the job is sync_bound" in gpus[0].evidence[-1]
    (tmp_path / "doctor.json").write_text(
        report(gpus[0], job(readings, found, stats)).model_dump_json()
    )
    assert build_review(from_dir(tmp_path), load_catalog()).savings == []


def test_an_option_off_cuda_says_what_porting_it_needs(tmp_path: Path) -> None:
    """An H200 busy 15% of the time on 2 GiB: a replacement needs 15% of its 989 dense TFLOP/s
    (148), more than an L4 or A10G has; the cheapest that covers it is Inferentia2, which the
    review offers only with the port to Neuron named, in its data and on its page."""
    cat = load_catalog()
    g = gpu(2 * GIB, util=15.0)
    readings = samples(sm=15, job_mib=2 * GIB)
    found = diagnose(readings, torch_stats(), TOTAL, WINDOW_S, 4.0)
    doctor = report(g, job(readings, found, torch_stats()))
    (s,) = savings(cat, [usage_record(doctor)], None)
    assert s.suggestion is not None and s.suggestion.accelerator == "inferentia2"
    assert "the job must be ported to the AWS Neuron SDK" in s.note
    (tmp_path / "doctor.json").write_text(doctor.model_dump_json())
    page = render_html(build_review(from_dir(tmp_path), cat))
    assert "inf2.xlarge" in page and "ported to the AWS Neuron SDK" in page
    # every other vendor's accelerator the catalog could offer carries a note, NVIDIA's none
    for acc in cat.accelerators.values():
        note = porting_note(cat, "h200-sxm", acc.id)
        assert (note is None) == (acc.vendor == "nvidia"), acc.id
