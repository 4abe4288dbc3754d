"""`advisor deploy slurm` against a real Slurm: a one-host cluster of two slurmd nodes
(scripts/start-slurm.sh, started by the test command), the rendered sbatch script submitted as
is, its two tasks meeting through torchrun's rendezvous and running the gloo collectives; and the
health check draining its node with a reason through scontrol.

Without Slurm the tests skip, except under CI=true, where a missing Slurm is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ADVISOR = f"{sys.executable} -m advisor"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment that reaches the test cluster: ADVISOR_TEST_SLURM_CONF's, else one this
    fixture starts (and stops) where Slurm is installed and this runs as root."""
    conf = os.environ.get("ADVISOR_TEST_SLURM_CONF")
    started = None
    if not conf and shutil.which("slurmctld") and os.geteuid() == 0:
        started = tmp_path_factory.mktemp("slurm")
        done = subprocess.run(
            ["bash", "scripts/start-slurm.sh"],
            cwd=REPO,
            capture_output=True,
            text=True,
            env={**os.environ, "ADVISOR_TEST_SLURM_DIR": str(started)},
            timeout=120,
        )
        conf = done.stdout.strip()
        assert done.returncode == 0, done.stderr
    if not conf:
        why = "no Slurm here (scripts/start-slurm.sh installs and starts one)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}: the test command must run the Slurm test in CI")
        pytest.skip(why)
    env = {**os.environ, "SLURM_CONF": conf, "PYTHONPATH": str(REPO)}
    yield env
    if started is not None:
        subprocess.run(
            ["bash", "scripts/stop-slurm.sh"],
            cwd=REPO,
            env={**os.environ, "ADVISOR_TEST_SLURM_DIR": str(started)},
            timeout=60,
            check=False,
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_job(job: str, env: dict[str, str], limit_s: float = 240) -> dict[str, str]:
    """Polls `scontrol show job` (faster than sbatch --wait) until the job ends."""
    deadline = time.monotonic() + limit_s
    fields: dict[str, str] = {}
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["scontrol", "show", "job", job], capture_output=True, text=True, env=env, check=True
        ).stdout
        fields = dict(w.split("=", 1) for w in out.split() if "=" in w)
        if fields.get("JobState") not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            return fields
        time.sleep(0.5)
    raise AssertionError(f"job {job} still {fields.get('JobState')} after {limit_s} s")


def test_the_rendered_sbatch_runs_two_tasks_through_torchrun(
    slurm_env: dict[str, str], tmp_path: Path
) -> None:
    script = tmp_path / "probe.sbatch"
    rendered = subprocess.run(
        [
            sys.executable,
            "-m",
            "advisor",
            "deploy",
            "slurm",
            "--nodes",
            "2",
            "--launcher",
            ADVISOR,
            "--output",
            str(script),
        ],
        capture_output=True,
        text=True,
        env=slurm_env,
        check=True,
    )
    assert rendered.returncode == 0
    env = {**slurm_env, "ADVISOR_RDZV_PORT": str(_free_port())}
    job = subprocess.run(
        ["sbatch", "--parsable", str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    ).stdout.strip()
    fields = _wait_for_job(job, env)
    log = (tmp_path / f"advisor-probe-{job}.out").read_text()
    reports = {
        node: json.loads((tmp_path / f"advisor-probe-{job}" / f"probe-{node}.json").read_text())
        for node in ("n1", "n2")
    }
    # No GPU here: each node's probe exits 3 (could not measure a GPU), which fails the job...
    assert fields["JobState"] == "FAILED" and fields["ExitCode"] == "3:0", log
    # ... but the two tasks met: one world of two ranks, one per Slurm node, gloo between them
    assert {r["node_rank"] for r in reports.values()} == {0, 1}
    for report in reports.values():
        assert report["world_size"] == 2 and report["backend"] == "gloo"
        assert report["diagnosis"], "a CPU machine says why no GPU was measured"
        across = [m for m in report["measurements"] if m["name"].startswith("all_reduce")]
        assert any(m["value"] and m["value"] > 0 for m in across), across
    lead = next(r for r in reports.values() if r["node_rank"] == 0)
    assert [h["node_rank"] for h in lead["cluster"]["hosts"]] == [0, 1]


def test_the_health_check_drains_its_node_with_the_reason(slurm_env: dict[str, str]) -> None:
    """An 8-GPU instance type expected and no GPU visible: a problem; --drain drains n1."""
    try:
        done = subprocess.run(
            [
                "srun",
                "-w",
                "n1",
                "-N1",
                "-n1",
                *ADVISOR.split(),
                "probe",
                "--health-check",
                "--expect",
                "p5.48xlarge",
                "--drain",
                "--npd",
            ],
            capture_output=True,
            text=True,
            env=slurm_env,
            timeout=120,
        )
        assert done.returncode == 1, done.stderr  # srun passes the task's exit code on
        assert done.stdout.startswith("NonOK: no GPU could be measured")
        node = subprocess.run(
            ["scontrol", "show", "node", "n1"],
            capture_output=True,
            text=True,
            env=slurm_env,
            check=True,
        ).stdout
        assert "DRAIN" in node.split("State=", 1)[1].split()[0]
        assert "Reason=advisor: no GPU could be measured" in node
        other = subprocess.run(
            ["scontrol", "show", "node", "n2"], capture_output=True, text=True, env=slurm_env
        ).stdout
        assert "DRAIN" not in other.split("State=", 1)[1].split()[0]
    finally:
        subprocess.run(
            ["scontrol", "update", "NodeName=n1", "State=RESUME"],
            env=slurm_env,
            check=False,
            capture_output=True,
        )
