"""The node check's verdict where fleet tools act on it, against their documented formats:
node-problem-detector's custom plugin (exit 0 OK, 1 NonOK, other Unknown; one line of at most
80 characters), the Prometheus text exposition (parsed by prometheus_client's own parser), a
node condition PATCH through the `kubernetes` client (a local API server fake checks the
request), and the exporter mode serving /metrics."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from advisor.deploy.actions import ActionFailed, kubernetes_api, set_node_condition
from advisor.deploy.verdicts import health_registry, node_condition, node_health
from probes.report import Check, Diagnosis, GpuVerdict, Inventory, ProbeReport, Status

REPO = Path(__file__).resolve().parents[1]
NOW = dt.datetime(2026, 12, 2, 20, 0, tzinfo=dt.UTC)


def report(checks: list[Check], diagnosis: list[Diagnosis] | None = None) -> ProbeReport:
    gpus = sorted({c.gpu for c in checks if c.gpu is not None})
    bad = {c.gpu for c in checks if c.status in ("fail", "error")}
    return ProbeReport(
        created_at=NOW,
        mode="quick",
        device=0,
        verdict="fail" if bad else "pass",
        inventory=Inventory(hostname="node-7", python="3.11"),
        diagnosis=diagnosis or [],
        checks=checks,
        duration_s=12.5,
        gpu_verdicts=[
            GpuVerdict(gpu=g, uuid=f"GPU-{g}", verdict="fail" if g in bad else "pass") for g in gpus
        ],
    )


def matmul(gpu: int, measured: float, status: Status = "pass") -> Check:
    return Check(
        name="matmul_bf16",
        status=status,
        measured=measured,
        expected=800.0,
        unit="TFLOP/s",
        detail="",
        scope="gpu",
        gpu=gpu,
    )


HEALTHY = report([matmul(0, 760.0), matmul(1, 752.0)])
SICK = report([matmul(0, 760.0), matmul(1, 401.0, "fail")])
NO_GPU = report([], [Diagnosis(code="nvml_library_missing", message="NVML not found")])


def test_npd_lines_and_exit_codes() -> None:
    ok, sick = node_health(HEALTHY, True), node_health(SICK, True)
    assert (ok.exit_code, ok.npd_line()) == (0, "OK: 2 checks passed on 2 GPU(s)")
    assert (sick.exit_code, sick.npd_line()) == (1, "NonOK: 1 check(s) failed: matmul_bf16 gpu 1")
    # no GPU at all: a problem where GPUs are expected, else not known (NPD: any other code)
    assert node_health(NO_GPU, True).exit_code == 1
    unknown = node_health(NO_GPU, False)
    assert unknown.exit_code == 3 and unknown.npd_line().startswith("Unknown: ")
    many = report([matmul(g, 1.0, "fail") for g in range(8)])
    assert len(node_health(many, True).npd_line()) == 80  # NPD's default max_output_length


def test_prometheus_text_parses_with_the_values_of_the_report() -> None:
    from prometheus_client import generate_latest

    text = generate_latest(health_registry(SICK, node_health(SICK, True))).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    host = (("host", "node-7"),)
    assert samples[("advisor_node_healthy", host)] == 0.0
    assert samples[("advisor_node_problem", host)] == 1.0
    assert (
        samples[("advisor_gpu_healthy", (("gpu", "1"), ("host", "node-7"), ("uuid", "GPU-1")))] == 0
    )
    assert (
        samples[("advisor_gpu_healthy", (("gpu", "0"), ("host", "node-7"), ("uuid", "GPU-0")))] == 1
    )
    check = (
        ("check", "matmul_bf16"),
        ("gpu", "1"),
        ("host", "node-7"),
        ("peer", ""),
        ("unit", "TFLOP/s"),
    )
    assert samples[("advisor_check_measured", check)] == 401.0
    assert samples[("advisor_check_expected", check)] == 800.0
    assert samples[("advisor_check_ratio", check)] == pytest.approx(401 / 800)


def test_the_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    sick = node_health(SICK, True)
    first = node_condition(sick, NOW, None)
    assert first["status"] == "True" and first["lastTransitionTime"] == "2026-12-02T20:00:00Z"
    later = node_condition(sick, NOW + dt.timedelta(minutes=5), first)
    assert later["lastTransitionTime"] == "2026-12-02T20:00:00Z"
    assert later["lastHeartbeatTime"] == "2026-12-02T20:05:00Z"
    healed = node_condition(node_health(HEALTHY, True), NOW + dt.timedelta(minutes=10), later)
    assert (healed["status"], healed["lastTransitionTime"]) == ("False", "2026-12-02T20:10:00Z")


class FakeApiServer:
    """The two calls the node condition makes, as the API server answers them: GET the node's
    status, PATCH it (strategic merge: conditions merge by type)."""

    def __init__(self) -> None:
        self.conditions: list[dict[str, Any]] = [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T00:00:00Z"}
        ]
        self.patches: list[tuple[str, dict[str, Any]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _node(self) -> None:
                if self.path != "/api/v1/nodes/gpu-node-1/status":
                    self.send_error(404)
                    return
                body = json.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": "gpu-node-1"},
                        "status": {"conditions": fake.conditions},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._node()

            def do_PATCH(self) -> None:
                kind = self.headers.get("Content-Type", "")
                patch = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.patches.append((kind, patch))
                if kind != "application/strategic-merge-patch+json":
                    self.send_error(415)
                    return
                for new in patch["status"]["conditions"]:
                    fake.conditions = [c for c in fake.conditions if c["type"] != new["type"]]
                    fake.conditions.append(new)
                self._node()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def api_server() -> Iterator[FakeApiServer]:
    fake = FakeApiServer()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    yield fake
    fake.server.shutdown()


def test_the_node_condition_is_a_strategic_merge_patch(api_server: FakeApiServer) -> None:
    api = kubernetes_api(api_server.url)
    set_node_condition(api, "gpu-node-1", node_health(SICK, True), NOW)
    later = NOW + dt.timedelta(minutes=5)
    written = set_node_condition(api, "gpu-node-1", node_health(SICK, True), later)
    kinds = {kind for kind, _ in api_server.patches}
    assert kinds == {"application/strategic-merge-patch+json"}
    assert len(api_server.patches) == 2
    by_type = {c["type"]: c for c in api_server.conditions}
    assert by_type["Ready"]["status"] == "True"  # the kubelet's condition untouched
    mine = by_type["AdvisorGPUProblem"]
    assert (mine["status"], mine["reason"]) == ("True", "ChecksFailed")
    assert mine["message"] == "1 check(s) failed: matmul_bf16 gpu 1"
    # the second patch read the first one back: the problem started at the first check
    assert written["lastTransitionTime"] == "2026-12-02T20:00:00Z"


def test_an_unknown_node_is_an_action_failed(api_server: FakeApiServer) -> None:
    with pytest.raises(ActionFailed, match="--node-condition other: the API server answered 404"):
        set_node_condition(kubernetes_api(api_server.url), "other", node_health(SICK, True), NOW)


def test_the_textfile_from_the_cli(tmp_path: Path) -> None:
    """The CLI's --health-check on this machine (no GPU) writes a parseable textfile."""
    out = tmp_path / "advisor.prom"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "advisor",
            "probe",
            "--health-check",
            "--npd",
            "--textfile",
            str(out),
        ],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""},
        timeout=120,
    )
    assert done.returncode == 3 and done.stdout.startswith("Unknown: "), done.stderr
    names = {f.name for f in text_string_to_metric_families(out.read_text())}
    assert {"advisor_node_healthy", "advisor_node_problem", "advisor_check_ok"} <= names
    assert not list(tmp_path.glob("*.tmp*"))  # written beside and renamed


def test_serve_metrics_exposes_the_last_check() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "advisor",
            "probe",
            "--health-check",
            "--serve-metrics",
            "0",
            "--metrics-address",
            "127.0.0.1",
            "--interval",
            "1s",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""},
    )
    try:
        assert proc.stderr is not None
        url = None
        while url is None:
            line = proc.stderr.readline()
            assert line, "the exporter ended before serving"
            found = re.search(r"serving metrics on (http://\S+)", line)
            url = found.group(1) if found else None
        deadline = time.monotonic() + 90
        text = ""
        while "advisor_node_healthy" not in text and time.monotonic() < deadline:
            text = httpx.get(url, timeout=5).text
            time.sleep(0.2)
        values = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
        assert values["advisor_node_healthy"] == 0.0  # no GPU here: not known, so not healthy
        assert values["advisor_node_problem"] == 0.0  # ... and not a problem either
    finally:
        proc.terminate()
        proc.wait(timeout=30)
