"""Operator tables posted to the service become the fleet's table per accelerator: stored once
per idempotency key, one vote per host, outliers out (POST /v1/ops-tables, GET
/v1/fleet/ops-tables/{accelerator}), on SQLite and on the in-memory store."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.store import Store, open_store
from probes.ops_table import ROW_SECTIONS, OpsReport, OpsTable
from tests.memory_store import MemoryStore
from tests.test_api import problem

TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
H200 = Path(__file__).resolve().parent.parent / "catalog" / "ops"
H200 /= "h200-sxm--torch2.11.0-cu130-driver580.json"


@pytest.fixture(scope="module")
def h200() -> OpsTable:
    table = OpsTable.model_validate_json(H200.read_bytes())
    return table.model_copy(update={s: getattr(table, s)[:6] for s in ROW_SECTIONS})


def posted(table: OpsTable, host: str, factor: float = 1.0) -> dict[str, Any]:
    """A host's table measured `factor` times slower, as the probe posts it."""
    slower = table.model_copy(
        update={
            s: [r.model_copy(update={"median_us": r.median_us * factor}) for r in getattr(table, s)]
            for s in ROW_SECTIONS
        }
    )
    report = OpsReport(created_at=dt.datetime.now(dt.UTC), host=host, table=slower)
    return report.model_dump(mode="json")


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = (
        open_store(f"sqlite:///{tmp_path}/ops.db") if request.param == "sqlite" else (MemoryStore())
    )
    yield s
    s.close()


def test_stored_once_per_key_and_read_newest_first(store: Store, h200: OpsTable) -> None:
    first = OpsReport.model_validate(posted(h200, "gpu-1"))
    got, created = store.add_ops(first, "k1")
    again, created_again = store.add_ops(first, "k1")
    assert created and not created_again and again == got
    later = OpsReport.model_validate(posted(h200, "gpu-2", 1.1))
    store.add_ops(later, None, dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1))
    assert [r.host for r in store.ops_tables("h200-sxm")] == ["gpu-2", "gpu-1"]
    assert store.ops_tables("h100-sxm") == []


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/api.db", api_tokens=(TOKEN,))  # type: ignore[arg-type]
    with TestClient(create_app(settings)) as c:
        yield c


def test_posted_tables_become_the_fleets_table(client: TestClient, h200: OpsTable) -> None:
    """Hosts at x0.98, x1.0, x1.02 and x2.0 (the last posting twice): the x2.0 host is one vote,
    left out (see tests/test_fleet_ops_tables.py for the arithmetic), the fleet's times are the
    measured table's own."""
    problem(client.post("/v1/ops-tables", json=posted(h200, "gpu-1")), 401)
    problem(client.get("/v1/fleet/ops-tables/h200-sxm"), 404)
    for host, factor in (("gpu-a", 0.98), ("gpu-b", 1.0), ("gpu-c", 1.02), ("slow", 2.0)):
        r = client.post("/v1/ops-tables", json=posted(h200, host, factor), headers=AUTH)
        assert r.status_code == 201, r.text
        assert r.json()["accelerator"] == "h200-sxm"
    client.post("/v1/ops-tables", json=posted(h200, "slow", 2.0), headers=AUTH)
    got = client.get("/v1/fleet/ops-tables/h200-sxm")
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["hosts"] == ["gpu-a", "gpu-b", "gpu-c", "slow"] and body["tables"] == 5
    assert {i["host"] for i in body["ignored"]} == {"slow"}
    fleet = OpsTable.model_validate(body["table"])
    assert [r.median_us for r in fleet.gemm] == pytest.approx([r.median_us for r in h200.gemm])


def test_the_fleet_table_is_voted_once_per_stored_count(tmp_path: Path, h200: OpsTable) -> None:
    """Voting reads and parses every stored table of the accelerator: an answer is kept until
    another is stored, by this service or by another process writing the same database, and
    the next answer counts it."""
    url = f"sqlite:///{tmp_path}/api.db"
    settings = Settings(database_url=url, api_tokens=(TOKEN,))  # type: ignore[arg-type]
    with TestClient(create_app(settings)) as client:
        kept = client.app.state.advisor.fleet_ops_tables  # type: ignore[attr-defined]
        for host in ("gpu-a", "gpu-b"):
            client.post("/v1/ops-tables", json=posted(h200, host), headers=AUTH)
        answers = [client.get("/v1/fleet/ops-tables/h200-sxm") for _ in range(3)]
        assert [r.status_code for r in answers] == [200] * 3
        assert kept.builds == 1 and answers[0].content == answers[2].content
        assert answers[0].json()["tables"] == 2
        other = open_store(url)  # another process's write
        other.add_ops(OpsReport.model_validate(posted(h200, "gpu-c", 1.01)), None)
        other.close()
        after = client.get("/v1/fleet/ops-tables/h200-sxm").json()
        assert kept.builds == 2 and after["tables"] == 3 and "gpu-c" in after["hosts"]
        problem(client.get("/v1/fleet/ops-tables/h100-sxm"), 404)
        assert kept.builds == 2  # none stored: nothing built or kept
