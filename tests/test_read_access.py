"""Read access: ADVISOR_READ_TOKENS guards what names hosts and GPUs; /readyz names no path."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastapi.testclient import TestClient

from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.catalog.settings import shipped_catalog_dir
from advisor.store import StoreError, open_store
from probes.ops_table import OpsTable
from tests.api_server import live_server
from tests.factories import mini_catalog_data, write_catalog
from tests.memory_store import MemoryStore
from tests.reports import RECENT
from tests.test_api import problem, readyz_once_unready
from tests.test_ops_tables_api import H200, posted

WRITER = "writer-t0ken"
READER = "reader-t0ken"
REPO = Path(__file__).resolve().parents[1]
REPORT = REPO / (
    "benchmarks/results/probe-2026-11-30-nvidia-h200-driver580.159.04-torch2.11.0+cu130/"
    "probe-quick.json"
)
USAGE = {
    "created_at": RECENT,
    "host": "gpu-host-7",
    "duration_s": 60.0,
    "interval_s": 1.0,
    "gpus": [{"index": 0, "samples": 60, "finding": None}],
}
# Every GET whose body names hosts, GPUs or processes (operationId -> path): the guarded ones.
GUARDED = {
    "listProbeReports": "/v1/probe-reports",
    "getProbeReport": "/v1/probe-reports/{id}",
    "listUtilisationReports": "/v1/utilisation-reports",
    "getUtilisationReport": "/v1/utilisation-reports/{uid}",
    "getFleetSummary": "/v1/fleet/summary",
    "getReview": "/v1/review",
    "getFleetOpsTable": "/v1/fleet/ops-tables/h200-sxm",
}
# Open on purpose (README "Read access" says why); the writes keep their own token.
OPEN_GETS = (
    "/healthz",
    "/readyz",
    "/metrics",
    "/v1/accelerators",
    "/v1/accelerators/h100-sxm",
    "/v1/instance-types",
    "/v1/instance-types/p5.48xlarge",
    "/openapi.json",
)
WRITES = {"createProbeReport", "createUtilisationReport", "createOpsTable", "reloadCatalog"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def make_settings(tmp_path: Path, **kw: Any) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path}/read.db", api_tokens=(WRITER,), **kw)  # type: ignore[arg-type]


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """A service with read tokens, one probe and one utilisation report stored; the paths."""
    with TestClient(create_app(make_settings(tmp_path, read_tokens=(READER, "other")))) as c:
        report = c.post(
            "/v1/probe-reports", json=json.loads(REPORT.read_text()), headers=bearer(WRITER)
        )
        usage = c.post("/v1/utilisation-reports", json=USAGE, headers=bearer(WRITER))
        ops = c.post(
            "/v1/ops-tables",
            json=posted(OpsTable.model_validate_json(H200.read_bytes()), "gpu-1"),
            headers=bearer(WRITER),
        )
        assert report.status_code == usage.status_code == ops.status_code == 201, (
            report.text,
            usage.text,
            ops.text,
        )
        paths = {
            op: p.format(id=report.json()["id"], uid=usage.json()["id"])
            for op, p in GUARDED.items()
        }
        yield c, paths


def test_guarded_reads_need_a_read_or_write_token(
    guarded: tuple[TestClient, dict[str, str]],
) -> None:
    client, paths = guarded
    for path in paths.values():
        r = client.get(path)
        problem(r, 401)
        assert r.headers["www-authenticate"] == "Bearer", path
        problem(client.get(path, headers={"Authorization": "Basic cmVhZGVy"}), 401)
        problem(client.get(path, headers=bearer("not-" + READER)), 403)
        for token in (READER, "other", WRITER):  # a write token also reads
            r = client.get(path, headers=bearer(token))
            assert r.status_code == 200, (path, token, r.text)
    body = client.get(paths["getProbeReport"], headers=bearer(READER)).json()
    assert body["report"]["inventory"]["hostname"] == body["host"]  # what the guard protects


def test_a_read_token_does_not_write(guarded: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = guarded
    body = json.loads(REPORT.read_text())
    problem(client.post("/v1/probe-reports", json=body, headers=bearer(READER)), 403)
    problem(client.post("/v1/catalog/reload", headers=bearer(READER)), 403)


def test_catalog_health_and_metrics_stay_open(guarded: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = guarded
    for path in OPEN_GETS:
        assert client.get(path).status_code == 200, path
    r = client.post("/v1/recommendations", json={"workload": "fine_tuning", "memory_gb": 80})
    assert r.status_code == 200, r.text


def test_without_read_tokens_reads_are_open_and_a_warning_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="advisor.api")
    with TestClient(create_app(make_settings(tmp_path))) as c:
        assert c.get("/v1/probe-reports").status_code == 200
        assert c.get("/v1/review").status_code == 200
    warned = [r.getMessage() for r in caplog.records if "ADVISOR_READ_TOKENS" in r.getMessage()]
    assert warned and "without a token" in warned[0]
    caplog.clear()
    with TestClient(create_app(make_settings(tmp_path, read_tokens=(READER,)))):
        pass
    assert not [r for r in caplog.records if "ADVISOR_READ_TOKENS" in r.getMessage()]


def test_read_tokens_come_from_the_environment() -> None:
    s = Settings.from_env({"ADVISOR_READ_TOKENS": " r1, r2 ,,", "ADVISOR_API_TOKENS": "w"})
    assert [t.get_secret_value() for t in s.read_tokens] == ["r1", "r2"]
    assert "r1" not in repr(s)


def test_openapi_states_the_security_of_every_operation() -> None:
    spec = yaml.safe_load((REPO / "openapi.yaml").read_text())
    schemes = spec["components"]["securitySchemes"]
    assert "ADVISOR_READ_TOKENS" in schemes["ReadToken"]["description"]
    for path, item in spec["paths"].items():
        for method, op in item.items():
            security = op.get("security")
            name = op["operationId"]
            if name in GUARDED:
                # a read token, or none: required only when ADVISOR_READ_TOKENS is set
                assert security == [{"ReadToken": []}, {}], name
            elif name in WRITES:
                assert security == [{"HTTPBearer": []}], name
            else:
                assert security is None, (method, path)
            if security:
                assert {"401", "403"} <= {str(c) for c in op["responses"]}, name
    assert {
        op for item in spec["paths"].values() for op in (o["operationId"] for o in item.values())
    } >= set(GUARDED)


# --- /readyz ------------------------------------------------------------------------------------

ABSOLUTE_PATH = re.compile(r"(?<![\w:/])/[\w.+-]+/")  # "/tmp/...", "/work/...": a directory


def assert_no_server_path(body: str, tmp_path: Path) -> None:
    for path in (tmp_path, shipped_catalog_dir(), REPO, Path.cwd()):
        assert str(path) not in body, path
    assert tmp_path.name not in body
    assert not ABSOLUTE_PATH.search(body), body


class DownStore(MemoryStore):
    """The database as it is when it cannot be reached: ping raises the adapter's own error."""

    def __init__(self, error: StoreError) -> None:
        super().__init__()
        self.error = error

    def ping(self) -> None:
        raise self.error


def test_readyz_names_no_server_path_in_any_state(tmp_path: Path) -> None:
    user = write_catalog(tmp_path / "private-catalog", mini_catalog_data())
    store = open_store(f"sqlite:///{tmp_path / 'ready.db'}")
    s = make_settings(tmp_path, catalog_dir=str(user), catalog_mode="extend")
    with TestClient(create_app(s, store=store)) as c:
        states: dict[str, str] = {"ready": c.get("/readyz").text}
        bad = mini_catalog_data()
        bad["accelerators"][0]["memry_gb"] = 1
        write_catalog(user, bad)
        c.post("/v1/catalog/reload", headers=bearer(WRITER))
        states["bad field"] = c.get("/readyz").text
        (user / "broken.yaml").write_text("accelerators: [\n")
        c.post("/v1/catalog/reload", headers=bearer(WRITER))
        states["bad YAML"] = c.get("/readyz").text
        shutil.rmtree(user)
        c.post("/v1/catalog/reload", headers=bearer(WRITER))
        states["no catalog directory"] = c.get("/readyz").text
        store.close()
        states["database closed"] = readyz_once_unready(c).text
    (tmp_path / "a-file").write_text("")
    with pytest.raises(StoreError) as opened:  # the real adapter's error, naming its path
        open_store(f"sqlite:///{tmp_path / 'a-file' / 'fleet.db'}")
    assert str(tmp_path) in str(opened.value)
    with TestClient(create_app(make_settings(tmp_path), store=DownStore(opened.value))) as c:
        states["database unreachable"] = c.get("/readyz").text
    for state, body in states.items():
        assert_no_server_path(body, tmp_path), state
    details = {k: json.loads(v) for k, v in states.items()}
    assert details["ready"]["status"] == "ready"
    # Still says what is wrong, and in which file of which catalog.
    assert (
        "ADVISOR_CATALOG/catalog.yaml: big: memry_gb" in details["bad field"]["catalog"]["detail"]
    )
    assert (
        "ADVISOR_CATALOG/broken.yaml: YAML syntax error" in details["bad YAML"]["catalog"]["detail"]
    )
    assert "does not exist" in details["no catalog directory"]["catalog"]["detail"]
    assert details["database closed"]["database"]["status"] == "unavailable"
    unreachable = details["database unreachable"]["database"]
    assert (
        unreachable["status"] == "unavailable"
        and "cannot open SQLite database 'fleet.db'" in unreachable["detail"]
    )


# --- the review client --------------------------------------------------------------------------


def review_cli(server: str, out: Path, token: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ADVISOR_TOKEN"}
    if token is not None:
        env["ADVISOR_TOKEN"] = token
    cmd = [sys.executable, "-m", "advisor", "review", "--server", server, "--output", str(out)]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)


def test_review_cli_reads_a_guarded_service_with_a_read_token(tmp_path: Path) -> None:
    with live_server(tmp_path, WRITER, env={"ADVISOR_READ_TOKENS": READER}) as server:
        with httpx.Client(base_url=server.base_url, headers=bearer(WRITER)) as http:
            assert (
                http.post("/v1/probe-reports", json=json.loads(REPORT.read_text())).status_code
                == 201
            )
        refused = review_cli(server.base_url, tmp_path / "refused.html", None)
        served = review_cli(server.base_url, tmp_path / "served.html", READER)
    assert refused.returncode == 2 and "HTTP 401: it needs a token" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1  # one line, no traceback
    assert served.returncode == 0, served.stderr
    assert "<b>1</b><span>probe reports</span>" in (tmp_path / "served.html").read_text()
