"""Utilisation reports: storage on every backend (schema steps 3 and 5 included; idempotent
ingestion over HTTP is in test_idempotency) and the HTTP API, and `advisor monitor --report-to`
delivering to a live service, with its own spool."""

from __future__ import annotations

import datetime as dt
import inspect
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_type_hints

import httpx
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.cli import app, monitor_cmd
from advisor.store import SqlStore, Store, migrate, open_store
from advisor.store import sql as q
from probes.nvml import Nvml
from probes.report import UtilisationReport
from tests import store_steps
from tests.api_server import serve_in_thread
from tests.memory_store import MemoryStore
from tests.reports import RECENT
from tests.test_api import problem
from tests.test_monitor import busy_and_idle
from tests.test_store import report as probe_report
from tests.threads import simultaneously

PG_URL = os.environ.get("ADVISOR_TEST_POSTGRES_URL")
TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def utilisation(host: str = "gpu-1", finding: str | None = "idle") -> dict[str, Any]:
    body = {
        "created_at": RECENT,
        "host": host,
        "instance_type": "p5en.48xlarge",
        "duration_s": 600.0,
        "interval_s": 1.0,
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA H200",
                "accelerator": "h200-sxm",
                "samples": 600,
                "util_gpu_mean_pct": 3.0,
                "util_gpu_p95_pct": 4.0,
                "memory_used_max_mib": 512.0,
                "memory_total_mib": 143_771.0,
                "throttled_fraction": 0.0,
                "finding": finding,
                "reason_codes": ["GPU_UTIL_LOW", "GPU_MEMORY_LOW"],
                "evidence": ["GPU utilisation averaged 3% (p95 4%) over 10 min"],
            },
            {"index": 1, "samples": 600, "finding": None},
        ],
    }
    return UtilisationReport.model_validate(body).model_dump(mode="json")


def as_model(body: dict[str, Any]) -> UtilisationReport:
    return UtilisationReport.model_validate(body)


def _require_pg() -> str:
    if not PG_URL:
        if os.environ.get("CI"):
            pytest.fail("ADVISOR_TEST_POSTGRES_URL is not set in CI")
        pytest.skip("no PostgreSQL (set ADVISOR_TEST_POSTGRES_URL; scripts/start-postgres.sh)")
    return PG_URL


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        s: Store = open_store(f"sqlite:///{tmp_path}/util.db")
    elif request.param == "memory":
        s = MemoryStore()
    else:
        url = _require_pg()
        s = open_store(url)
        store_steps.truncate_reports(url)
        store_steps.run(url, "TRUNCATE utilisation_reports")
    yield s
    s.close()


# -- storage ----------------------------------------------------------------------------------


def test_round_trip_is_exact(store: Store) -> None:
    body = utilisation()
    body["gpus"][0]["evidence"].append("Δ unicode ✓")
    stored = store.add_utilisation(as_model(body))
    again = store.get_utilisation(stored.id)
    assert again is not None and again.report == body
    assert (again.id, again.host, again.received_at) == (stored.id, "gpu-1", stored.received_at)
    assert store.get_utilisation(uuid.uuid4().hex) is None
    assert store.count() == 0  # probe reports are counted apart


def test_query_by_host_newest_first_with_paging(store: Store) -> None:
    base = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    for i in range(7):
        store.add_utilisation(as_model(utilisation(host=f"h{i % 3}")), base + dt.timedelta(hours=i))
    items, total = store.query_utilisation(limit=3)
    assert total == 7 and [r.received_at.hour for r in items] == [6, 5, 4]
    page2, _ = store.query_utilisation(limit=3, offset=3)
    assert [r.received_at.hour for r in page2] == [3, 2, 1]
    h0, total_h0 = store.query_utilisation(host="h0")
    assert total_h0 == 3 and {r.host for r in h0} == {"h0"}
    assert store.query_utilisation(host="nope") == ([], 0)
    evil = "x'; DROP TABLE utilisation_reports; --"
    store.add_utilisation(as_model(utilisation(host=evil)))
    assert store.query_utilisation(host=evil)[1] == 1
    assert store.query_utilisation()[1] == 8


def test_iter_utilisation_yields_all_oldest_first(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(q, "ITER_PAGE", 2)  # several pages, one ending exactly at the last row
    base = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    same = base + dt.timedelta(hours=1)
    ids = [store.add_utilisation(as_model(utilisation(host=f"h{i}")), base).id for i in range(3)]
    ids += [store.add_utilisation(as_model(utilisation(host=f"s{i}")), same).id for i in range(3)]
    seen = []
    for r in store.iter_utilisation():
        seen.append(r.id)
        store.get_utilisation(r.id)  # the store stays usable while iterating
    assert len(seen) == 6 and set(seen) == set(ids)
    assert set(seen[:3]) == set(ids[:3])  # oldest first; ties in any order, each once
    assert list(MemoryStore().iter_utilisation()) == []


def test_add_utilisation_once_stores_a_key_once_even_when_posted_simultaneously(
    store: Store,
) -> None:
    body = utilisation(host="once")
    results = [
        (stored.id, created)
        for stored, created in simultaneously(
            lambda: store.add_utilisation_once(as_model(body), "key-1")
        )
    ]
    assert sorted(created for _, created in results) == [False] * 7 + [True]
    (first_id,) = {i for i, _ in results}
    again = store.get_utilisation(first_id)
    assert again is not None and again.report == body
    assert store.query_utilisation()[1] == 1
    other, created = store.add_utilisation_once(
        as_model(body), "key-2"
    )  # another run's equal report
    assert created and other.id != first_id and store.query_utilisation()[1] == 2
    assert store.add_utilisation(as_model(body)).id not in (
        first_id,
        other.id,
    )  # no key: always stored
    assert store.query_utilisation()[1] == 3
    _, probe_created = store.add_once(probe_report(), "key-1")  # each kind has its own keys
    assert probe_created and store.count() == 1


def _database(backend: str, tmp_path: Path) -> str:
    """The URL of an empty database of `backend`."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'steps.db'}"
    url = _require_pg()
    store_steps.drop_all(url)
    return url


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_listing_of_utilisation_reports_reads_no_body(backend: str, tmp_path: Path) -> None:
    """A page names each report's instance type, GPUs and findings without its body (up to
    1 MiB each, 500 a page): no statement names the body, and with every stored body made
    unreadable the listing still answers, as the bodies said when they were stored."""
    url = _database(backend, tmp_path)
    store = SqlStore(url)
    bodies = [utilisation(host="h1"), utilisation(host="h2", finding=None)]
    bodies[1]["instance_type"] = None
    ids = [store.add_utilisation(as_model(b)).id for b in bodies]
    store_steps.run(url, "UPDATE utilisation_reports SET body = 'not json'")
    sent: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        sent.append(statement)

    sa.event.listen(store._reader, "before_cursor_execute", seen)
    listed, total = store.query_utilisation()
    assert total == 2 and sent and not [text for text in sent if "body" in text], sent
    assert {u.id: (u.host, u.instance_type, u.gpus, u.findings) for u in listed} == {
        ids[0]: ("h1", "p5en.48xlarge", 2, {"idle": 1, "unclassified": 1}),
        ids[1]: ("h2", None, 2, {"unclassified": 2}),
    }
    store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_database_at_step_4_migrates_to_5_keeping_its_utilisation_reports(
    backend: str, tmp_path: Path
) -> None:
    url = _database(backend, tmp_path)
    store_steps.at_revision(url, "0004")
    body = utilisation(host="before-5")
    # equal reports, all kept: a database before step 5 has no key column
    ids = [store_steps.add_v3_utilisation(url, as_model(body)) for _ in range(3)]
    new = SqlStore(url)
    assert new.revision == migrate.head() >= "0005"
    assert all(new.get_utilisation(i) is not None for i in ids)
    stored, created = new.add_utilisation_once(as_model(body), "k")  # the old rows hold no key
    assert created and stored.id not in ids
    assert new.add_utilisation_once(as_model(body), "k") == (stored, False)
    assert new.query_utilisation()[1] == 4
    new.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_utilisation_table_that_outlived_the_probe_tables_migrates_again(
    backend: str, tmp_path: Path
) -> None:
    """Step 3 creates the utilisation table only if it is missing: one that outlived the probe
    tables (dropped by a test or an operator) already went through step 5, which must not trip
    over its key column, and keeps answering for its keys."""
    url = _database(backend, tmp_path)
    first = SqlStore(url)
    stored, _ = first.add_utilisation_once(as_model(utilisation(host="outlived")), "k")
    first.close()
    store_steps.run(url, "DROP TABLE probe_reports", "DROP TABLE alembic_version")
    again = SqlStore(url)
    assert again.revision == migrate.head() and again.count() == 0
    assert again.add_utilisation_once(as_model(utilisation(host="outlived")), "k") == (
        stored,
        False,
    )
    again.close()


def test_the_memory_fake_offers_every_store_method_as_the_protocol_words_it() -> None:
    """mypy holds the SQLite and PostgreSQL stores to the Store protocol; the fake lives in tests,
    which mypy does not check, so a method added to Store without the fake fails here."""
    methods = [n for n, v in vars(Store).items() if callable(v) and not n.startswith("_")]
    assert "add_utilisation_once" in methods
    for name in methods:
        wanted, offered = getattr(Store, name), getattr(MemoryStore, name)
        assert inspect.signature(offered) == inspect.signature(wanted), name
        assert get_type_hints(offered) == get_type_hints(wanted), name


def _upgrade_from_step_2_keeps_probe_reports(url: str) -> list[str]:
    store_steps.at_revision(url, "0002")
    ids = [
        store_steps.add_v1_report(url, probe_report(host=f"h{i}"), checks=True) for i in range(3)
    ]
    new = SqlStore(url)
    assert new.revision == migrate.head()
    assert all(new.get(i) is not None for i in ids)
    assert new.fleet()[0].checks["matmul_bf16"]["count"] == 3
    stored = new.add_utilisation(as_model(utilisation()))
    assert new.get_utilisation(stored.id) is not None
    new.close()
    again = SqlStore(url)  # opening a current database migrates nothing
    assert again.get_utilisation(stored.id) is not None and again.count() == 3
    again.close()
    return ids


def test_sqlite_upgrade_from_version_2_keeps_probe_reports(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    _upgrade_from_step_2_keeps_probe_reports(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        versions = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        assert versions == [(migrate.head(),)]


def test_postgres_upgrade_from_version_2_keeps_probe_reports() -> None:
    url = _require_pg()
    store_steps.drop_all(url)
    _upgrade_from_step_2_keeps_probe_reports(url)


# -- HTTP API ---------------------------------------------------------------------------------


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/api.db", api_tokens=(TOKEN,))  # type: ignore[arg-type]
    with TestClient(create_app(settings)) as c:
        yield c


def test_writing_needs_an_accepted_token(client: TestClient) -> None:
    r = client.post("/v1/utilisation-reports", json=utilisation())
    problem(r, 401)
    assert r.headers["www-authenticate"] == "Bearer"
    bad = {"Authorization": "Bearer not-" + TOKEN}
    problem(client.post("/v1/utilisation-reports", json=utilisation(), headers=bad), 403)
    assert client.get("/v1/utilisation-reports").json()["total"] == 0


def test_create_list_and_get(client: TestClient) -> None:
    r = client.post("/v1/utilisation-reports", json=utilisation("gpu-1"), headers=AUTH)
    assert r.status_code == 201, r.text
    created = r.json()
    assert r.headers["location"] == f"/v1/utilisation-reports/{created['id']}"
    assert created["host"] == "gpu-1" and created["instance_type"] == "p5en.48xlarge"
    assert (created["gpus"], created["findings"]) == (2, {"idle": 1, "unclassified": 1})
    for host in ("gpu-2", "gpu-2", "gpu-3"):  # two runs' equal reports: each has its own key
        run = {**AUTH, "Idempotency-Key": uuid.uuid4().hex}
        assert client.post(
            "/v1/utilisation-reports", json=utilisation(host), headers=run
        ).is_success
    page = client.get("/v1/utilisation-reports", params={"limit": 2}).json()
    assert (page["total"], len(page["items"]), page["next_offset"]) == (4, 2, 2)
    last = client.get("/v1/utilisation-reports", params={"limit": 2, "offset": 2}).json()
    assert last["next_offset"] is None and created["id"] in {i["id"] for i in last["items"]}
    mine = client.get("/v1/utilisation-reports", params={"host": "gpu-2"}).json()
    assert mine["total"] == 2 and {i["host"] for i in mine["items"]} == {"gpu-2"}
    full = client.get(f"/v1/utilisation-reports/{created['id']}").json()
    assert full["report"] == utilisation("gpu-1") and full["id"] == created["id"]
    problem(client.get(f"/v1/utilisation-reports/{uuid.uuid4().hex}"), 404)
    problem(client.get("/v1/utilisation-reports/" + "x" * 65), 404)
    problem(client.get("/v1/utilisation-reports", params={"limit": 0}), 422)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda b: b.update(hots="x"), "hots"),  # unknown top-level field
        (lambda b: b["gpus"][0].update(util_pct=3), "gpus.0.util_pct"),  # unknown GPU field
        (lambda b: b["gpus"][0].update(finding="wasteful"), "gpus.0.finding"),  # not a finding
        (lambda b: b.update(kind="probe"), "kind"),  # not a utilisation report
        (lambda b: b.pop("host"), "host"),  # required
    ],
)
def test_invalid_reports_are_422(client: TestClient, change: Any, field: str) -> None:
    body = utilisation()
    change(body)
    r = client.post("/v1/utilisation-reports", json=body, headers=AUTH)
    errors = problem(r, 422)["errors"]
    assert field in [e["field"] for e in errors], errors
    assert client.get("/v1/utilisation-reports").json()["total"] == 0


def test_openapi_names_the_operations(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    ops = {op["operationId"] for p in paths.values() for op in p.values()}
    assert {"createUtilisationReport", "listUtilisationReports", "getUtilisationReport"} <= ops


# -- advisor monitor --report-to ---------------------------------------------------------------


@pytest.fixture
def live_service(tmp_path: Path) -> Iterator[str]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/svc.db", api_tokens=(TOKEN,))  # type: ignore[arg-type]
    with serve_in_thread(create_app(settings)) as url:
        yield url


def test_monitor_spools_then_delivers_to_the_utilisation_endpoint(
    tmp_path: Path, live_service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(monitor_cmd, "open_nvml", lambda: Nvml(busy_and_idle()))
    monkeypatch.setenv("COLUMNS", "400")  # the spool path (TIME-KEY.json) on one line
    spool = tmp_path / "spool"
    args = ["monitor", "--duration", "0.6s", "--interval", "0.1s", "--json"]
    args += ["--token", TOKEN, "--spool-dir", str(spool)]
    down = CliRunner().invoke(app, [*args, "--report-to", "http://127.0.0.1:9"])
    assert down.exit_code == 0, down.output
    assert "the next run with --report-to sends it" in down.stderr
    assert len(list((spool / "utilisation").glob("*.json"))) == 1
    assert not list(spool.glob("*.json"))  # never where probe reports wait
    up = CliRunner().invoke(app, [*args, "--report-to", live_service + "/"])
    assert up.stderr.count("report delivered to") == 2, up.stderr
    assert f"{live_service}/v1/utilisation-reports" in up.stderr
    assert not list((spool / "utilisation").glob("*.json"))
    listed = httpx.get(f"{live_service}/v1/utilisation-reports").json()
    assert (
        listed["total"] == 2 and httpx.get(f"{live_service}/v1/probe-reports").json()["total"] == 0
    )
    newest = httpx.get(f"{live_service}/v1/utilisation-reports/{listed['items'][0]['id']}")
    assert newest.json()["findings"] == {"idle": 1, "optimized": 1}
