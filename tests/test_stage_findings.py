"""The findings that need the time line or the stacks (advisor.fleet.stage_findings):
idle_reservation with its GPU-hours and dollars, input_bound, and transfer_bound dismissed when
the copies take a small share of the time. Expected values computed by hand in each test."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.fleet.job_diagnosis import Diagnosis, diagnose, gpu_activity
from advisor.fleet.stage_findings import (
    idle_reservation,
    idle_stretches,
    straggler,
    with_stages,
)
from probes.report import JobFinding, JobGpuSample, JobSample, UtilisationReport
from probes.stage_report import StageReport, StageShare, StageSite

H200_MIB = 143_771.0
HELD_MIB = 102_400.0  # 100 GiB


def readings(actives: list[float], memory_mib: float = HELD_MIB) -> list[JobSample]:
    """One reading a second, the job's process on GPU 0 holding `memory_mib`."""
    return [
        JobSample(
            t_s=float(i),
            gpus=[
                JobGpuSample(
                    index=0,
                    util_gpu_pct=a,
                    sm_active_pct=a,
                    job_on_gpu=True,
                    job_memory_mib=memory_mib,
                    memory_used_mib=memory_mib,
                )
            ],
        )
        for i, a in enumerate(actives)
    ]


def test_memory_held_with_no_kernel_for_the_whole_window_is_an_idle_reservation() -> None:
    """11 readings 1 s apart, all at 0%: 10 s held idle (the first reading stands for no time),
    10 / 3600 = 0.0027778 GPU-hours; at $6.88 a GPU-hour (p5.48xlarge's $55.04 / 8 GPUs),
    $0.0191 lost, $6.88 an hour while it lasts."""
    samples = readings([0.0] * 11)
    activity = gpu_activity(samples, {0: H200_MIB})
    finding = idle_reservation(samples, activity, 6.88)
    assert finding is not None and finding.code == "idle_reservation"
    assert finding.lost_gpu_hours == pytest.approx(10 / 3600, abs=1e-6)
    assert finding.lost_usd == pytest.approx(0.0191, abs=1e-4)
    assert finding.idle_usd_per_h == 6.88
    assert "100.0 GiB held, no kernel for the job's whole window" in finding.evidence[0]


def test_a_long_idle_stretch_counts_and_a_short_one_does_not() -> None:
    """100 s at 80%, then 300 readings at 0%: a 300 s stretch, at the 300 s threshold: fires
    with 300 s = 0.083333 GPU-hours. 100 s busy then 200 s idle: below it, no finding."""
    long = readings([80.0] * 100 + [0.0] * 300)
    assert idle_stretches(long, 0) == (300.0, 300.0, False)
    finding = idle_reservation(long, gpu_activity(long, {0: H200_MIB}), None)
    assert finding is not None
    assert finding.lost_gpu_hours == pytest.approx(300 / 3600, abs=1e-6)
    assert finding.lost_usd is None and finding.idle_usd_per_h is None  # no price known
    short = readings([80.0] * 100 + [0.0] * 200)
    assert idle_reservation(short, gpu_activity(short, {0: H200_MIB}), 6.88) is None


def test_a_busy_job_is_no_idle_reservation() -> None:
    samples = readings([95.0] * 20)
    assert idle_reservation(samples, gpu_activity(samples, {0: H200_MIB}), 6.88) is None


def _stages(shares: dict[str, float], in_process: bool | None, samples: int = 100) -> StageReport:
    return StageReport(
        pid=42,
        samples=samples,
        interval_s=0.2,
        loading_in_process=in_process,
        shares=[
            StageShare(
                stage=stage,  # type: ignore[arg-type]
                share=share,
                samples=round(share * samples),
                sites=[StageSite(site="train.py:16", share=share, code="x = transform(raw)")],
            )
            for stage, share in shares.items()
        ],
    )


def _finding(code: str) -> JobFinding:
    return JobFinding(code=code, summary=code, evidence=[], fix="-")  # type: ignore[arg-type]


def test_a_starved_gpu_with_loading_in_the_main_process_is_input_bound_not_transfer_bound() -> None:
    """GPU at 5%; the main thread: loading 70% (in-process), torch 28%, copies 2%. The copies
    are below the 20% a finding needs: transfer_bound dismissed with its share; host_bound
    gives way to input_bound, whose fix is the DataLoader's workers. Idle price: $6.88 x 95%
    = $6.54 an hour."""
    samples = readings([5.0] * 10, memory_mib=2048.0)
    activity = gpu_activity(samples, {0: H200_MIB})
    base = Diagnosis(
        "findings", [_finding("transfer_bound"), _finding("host_bound")], 0.0, activity
    )
    stages = _stages({"data_loading": 0.70, "launch": 0.28, "copy": 0.02}, in_process=True)
    done, noted = with_stages(base, samples, stages, 6.88)
    assert [f.code for f in done.findings] == ["input_bound"]
    finding = done.findings[0]
    assert "num_workers" in finding.fix
    assert "70%" in finding.summary and "train.py:16" in finding.summary
    assert finding.idle_usd_per_h == pytest.approx(6.54, abs=0.01)
    assert noted is not None
    assert noted.notes == [
        "transfer_bound not reported: host-device copies took 2% of the main thread's time "
        "(a finding needs 20%)"
    ]


def test_waiting_for_workers_is_input_bound_with_the_workers_fix() -> None:
    samples = readings([5.0] * 10, memory_mib=2048.0)
    base = Diagnosis("healthy", [], 0.0, gpu_activity(samples, {0: H200_MIB}))
    done, _ = with_stages(base, samples, _stages({"data_loading": 0.6}, False), None)
    (finding,) = done.findings
    assert finding.code == "input_bound" and done.verdict == "findings"
    assert "cannot keep up" in finding.fix


def test_an_input_bound_job_is_not_also_told_its_gpu_is_too_big() -> None:
    """2 GiB of the H200's 140 at 5%: diagnose alone calls it under_used (memory and activity
    both low); the stages show the input pipeline idling it, so only input_bound stays. A GPU of
    the machine the job never touched is still under-used."""
    samples = [
        s.model_copy(
            update={
                "gpus": [
                    *s.gpus,
                    JobGpuSample(index=1, util_gpu_pct=0.0, sm_active_pct=0.0, job_on_gpu=False),
                ]
            }
        )
        for s in readings([5.0] * 10, memory_mib=2048.0)
    ]
    found = diagnose(samples, None, {0: H200_MIB, 1: H200_MIB}, 10.0, 6.88)
    small = [f for f in found.findings if f.code == "under_used"]
    assert len(small) == 2  # the job's GPU too big, the other GPU untouched
    done, _ = with_stages(found, samples, _stages({"data_loading": 0.6}, False), 6.88)
    assert [f.code for f in done.findings] == ["input_bound", "under_used"]
    assert "used 1 of the machine's 2 GPUs" in done.findings[1].summary


def test_material_copies_keep_transfer_bound_and_a_busy_gpu_is_not_input_bound() -> None:
    """Copies at 35% (above 20%) keep transfer_bound, with the stage in its evidence; a GPU at
    90% is not starved whatever the loading share."""
    low = readings([5.0] * 10, memory_mib=2048.0)
    base = Diagnosis(
        "findings", [_finding("transfer_bound")], 0.0, gpu_activity(low, {0: H200_MIB})
    )
    done, _ = with_stages(base, low, _stages({"copy": 0.35, "launch": 0.65}, None), None)
    assert [f.code for f in done.findings] == ["transfer_bound"]
    assert done.findings[0].evidence[-1].startswith("stage host-device copies: 35%")
    busy = readings([90.0] * 10, memory_mib=2048.0)
    healthy = Diagnosis("healthy", [], 0.0, gpu_activity(busy, {0: H200_MIB}))
    done, _ = with_stages(healthy, busy, _stages({"data_loading": 0.6}, True), None)
    assert done.verdict == "healthy" and done.findings == []


def test_too_few_stack_samples_dismiss_nothing() -> None:
    samples = readings([5.0] * 10, memory_mib=2048.0)
    base = Diagnosis(
        "findings", [_finding("transfer_bound")], 0.0, gpu_activity(samples, {0: H200_MIB})
    )
    done, _ = with_stages(base, samples, _stages({"copy": 0.0, "data_loading": 1.0}, True, 5), None)
    assert [f.code for f in done.findings] == ["transfer_bound"]


def _rank(rank: int, shares: dict[str, float]) -> StageReport:
    report = _stages(shares, None)
    return report.model_copy(update={"rank": rank, "pid": 100 + rank})


def test_the_rank_the_others_wait_for_is_the_straggler_with_each_ranks_shares() -> None:
    """Ranks 0 and 2 wait in collectives 60% and 70% of their time, rank 1 10% while its host
    work takes 90%: the others' median wait (index 1 of [0.6, 0.7]: 70%) less rank 1's (10%) is
    60% >= 20%: rank 1 is the straggler, with the host-work fix; idle price $6.88 x (0.6 + 0.7)
    = $8.94 an hour."""
    ranks = [
        _rank(0, {"collective": 0.6, "launch": 0.4}),
        _rank(1, {"host_compute": 0.9, "collective": 0.1}),
        _rank(2, {"collective": 0.7, "launch": 0.3}),
    ]
    finding = straggler(ranks, 6.88)
    assert finding is not None and finding.code == "straggler"
    assert "wait for rank 1 (70% of their time against its 10%)" in finding.summary
    assert "host preprocessing" in finding.summary
    assert "split the work evenly" in finding.fix
    assert len(finding.evidence) == 3 and finding.evidence[1].startswith(
        "rank 1 (pid 101): waiting for the others 10%"
    )
    assert finding.idle_usd_per_h == pytest.approx(8.94, abs=0.01)


def test_balanced_ranks_have_no_straggler() -> None:
    """Waits of 50% and 35%: 15% apart, below the 20% a finding needs."""
    ranks = [
        _rank(0, {"collective": 0.5, "launch": 0.5}),
        _rank(1, {"collective": 0.35, "launch": 0.65}),
    ]
    assert straggler(ranks, 6.88) is None
    assert straggler(ranks[:1], 6.88) is None  # one rank: no one to wait for


def test_host_bound_needs_the_host_stages_to_take_a_material_share() -> None:
    """A saturated core with the main thread waiting 85% of the time (its own Python 10%,
    PyTorch's calls 5%: 15% < 20%): host_bound dismissed; at 30% + 10% it stays."""
    samples = readings([5.0] * 10, memory_mib=2048.0)
    base = Diagnosis(
        "findings", [_finding("host_bound")], 0.0, gpu_activity(samples, {0: H200_MIB})
    )
    waiting = _stages({"waiting": 0.85, "host_compute": 0.10, "launch": 0.05}, None)
    done, noted = with_stages(base, samples, waiting, None)
    assert done.findings == [] and done.verdict == "healthy"
    assert noted is not None and noted.notes[0].startswith("host_bound not reported:")
    busy = _stages({"waiting": 0.6, "host_compute": 0.3, "launch": 0.1}, None)
    done, _ = with_stages(base, samples, busy, None)
    assert [f.code for f in done.findings] == ["host_bound"]


RECORDED = Path(__file__).parent / "data" / "doctor"


def _recorded_ranks(name: str) -> list[StageReport]:
    report = UtilisationReport.model_validate_json((RECORDED / f"h200-{name}.json").read_bytes())
    assert report.job is not None
    return report.job.ranks


def test_on_the_h200_the_rank_with_more_gpu_work_is_the_straggler() -> None:
    """benchmarks/doctor/straggler_gpu.py on one H200 (2026-12-03, benchmarks/results/
    doctor-verdict-2026-12-03c-...): two gloo ranks, rank 1 running five times rank 0's matrix
    products; both stepped at 18.95 a second, 53.10 with equal work. Rank 0 sat in the
    all-reduce 60% of its stack samples, rank 1 4%; both also waited on the GPU (32% and 81%),
    which here is their own kernels: with collectives on the host, only they count as waiting
    for the others (60% - 4% = 56% >= 20%). Counting the GPU wait too (92% vs 85%) the slow rank
    would hide. The report the doctor wrote on the GPU names it too."""
    finding = straggler(_recorded_ranks("straggler_gpu"), 6.88)
    assert finding is not None
    assert "wait for rank 1 (60% of their time against its 4%)" in finding.summary
    assert "waiting for the GPU" in finding.summary
    assert "more work than the others" in finding.fix
    report = UtilisationReport.model_validate_json(
        (RECORDED / "h200-straggler_gpu.json").read_bytes()
    )
    assert report.job is not None
    assert [f.summary for f in report.job.findings] == [finding.summary]


def test_on_the_h200_equal_work_has_no_straggler() -> None:
    assert straggler(_recorded_ranks("straggler_gpu_fixed"), 6.88) is None
