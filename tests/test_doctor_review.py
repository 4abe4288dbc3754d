"""A doctor report is a utilisation report: the service stores it whole and the review shows the
job, its verdict, the GPU-hours lost and the fixes."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from fastapi.testclient import TestClient

from advisor import load_catalog
from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.fleet.job_diagnosis import diagnose
from advisor.review import build_review, from_dir, render_html
from probes.report import JobReport, SyncSite, UtilisationReport
from tests.test_job_diagnosis import TOTAL, WINDOW_S, samples, torch_stats

TOKEN = "doctor-review-token"


def doctor_report(host: str = "gpu-7") -> UtilisationReport:
    """A job sync-bound at train.py:41 (SM 30%): 0.70 GPU-hours lost in its hour, $2.80/h."""
    readings = samples(sm=30, core=100)
    stats = torch_stats(
        syncs=250, sync_sites=[SyncSite(site="train.py:41", count=251, span_s=10.0)]
    )
    found = diagnose(readings, stats, TOTAL, WINDOW_S, 4.0)
    return UtilisationReport(
        created_at=dt.datetime.now(dt.UTC),  # the server takes reports of the last 366 days
        host=host,
        duration_s=WINDOW_S,
        interval_s=1.0,
        gpus=[],
        job=JobReport(
            command=["python", "train.py", "--lr", "3e-4"],
            exit_code=0,
            wall_s=WINDOW_S,
            sampled_s=WINDOW_S,
            interval_s=1.0,
            samples=readings,
            torch=stats,
            verdict=found.verdict,
            findings=found.findings,
            gpu_hours_lost=found.gpu_hours_lost,
        ),
    )


def test_the_review_shows_jobs_diagnosed_with_hours_lost_and_fixes(tmp_path: Path) -> None:
    (tmp_path / "doctor.json").write_text(doctor_report().model_dump_json())
    review = build_review(from_dir(tmp_path), load_catalog())
    (row,) = review.jobs
    assert row.host == "gpu-7" and row.job.verdict == "findings"
    assert row.job.gpu_hours_lost == 0.7
    html = render_html(review)
    assert "Jobs diagnosed" in html
    assert "python train.py --lr 3e-4" in html
    assert "sync_bound" in html and "train.py:41" in html
    assert "$2.80/h idle" in html
    assert "0.70</b><span>GPU-hours lost" in html


def test_the_service_stores_a_doctor_report_whole(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/d.db", api_tokens=(TOKEN,))  # type: ignore[arg-type]
    body = json.loads(doctor_report().model_dump_json())
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(settings)) as client:
        created = client.post("/v1/utilisation-reports", json=body, headers=auth)
        assert created.status_code == 201, created.text
        stored = client.get(created.headers["Location"], headers=auth).json()
    assert stored["report"]["job"] == body["job"]
