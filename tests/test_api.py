"""The HTTP API in-process (starlette's TestClient): routes, security, limits, reload, metrics."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from starlette.responses import JSONResponse

from advisor import Workload, load_catalog, recommend
from advisor.api import create_app
from advisor.api.openapi import render
from advisor.api.settings import Settings
from advisor.api.state import SHARED_READING_S
from advisor.errors import InputError
from advisor.store import open_store
from probes.report import ProbeReport
from tests.factories import mini_catalog_data, write_catalog

TOKEN = "t0ken-for-tests"
REPORT = Path(__file__).parents[1] / (
    "benchmarks/results/probe-2026-11-30-nvidia-h200-driver580.159.04-torch2.11.0+cu130/probe-quick.json"
)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def settings(tmp_path: Path, **kw: Any) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path}/api.db", api_tokens=(TOKEN,), **kw)  # type: ignore[arg-type]


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(settings(tmp_path, max_body_bytes=200_000))) as c:
        yield c


def problem(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = r.json()
    assert body["status"] == status and body["title"] and body["detail"]
    return body


def test_catalog_listing_and_lookup(client: TestClient) -> None:
    accs = client.get("/v1/accelerators", params={"form_factor": "edge"}).json()
    assert accs and all(a["form_factor"] == "edge" for a in accs)
    its = client.get("/v1/instance-types", params={"provider": "aws", "min_gpus": 8}).json()
    assert its and all(i["provider"] == "aws" and i["gpu_count"] >= 8 for i in its)
    cheap = client.get(
        "/v1/instance-types", params={"region": "us-east-1", "max_hourly_usd": 1}
    ).json()
    assert cheap, "the shipped catalog has instances under $1/h in us-east-1"
    assert all(
        p["region"] == "us-east-1" and p["hourly_usd"] <= 1 for i in cheap for p in i["prices"]
    )
    # g5.xlarge costs $1.006/h on demand in us-east-1: only cheaper as spot ($0.42) and on a
    # 1-year reservation ($0.63)
    (g5,) = [i for i in cheap if i["id"] == "g5.xlarge"]
    assert [p["purchase"] for p in g5["prices"]] == ["spot", "reserved_1y"]
    assert "p5.48xlarge" not in {i["id"] for i in cheap}
    assert client.get("/v1/instance-types/p5.48xlarge").json()["accelerator"] == "h100-sxm"
    body = problem(client.get("/v1/accelerators/h100-sxn"), 404)
    assert "did you mean 'h100-sxm'" in body["detail"]
    body = problem(client.get("/v1/instance-types", params={"provider": "amazon"}), 422)
    assert "valid: aws" in body["detail"]


def test_recommendation_matches_the_engine(client: TestClient) -> None:
    request = {"workload": "large_scale_training", "memory_gb": 80, "interconnect_gb_s": 900}
    r = client.post("/v1/recommendations", json=request)
    assert r.status_code == 200
    answer = recommend(load_catalog(), Workload(**request), listed=False)  # counted, not listed
    assert r.json() == json.loads(json.dumps(answer.to_dict()))
    full = recommend(load_catalog(), Workload(**request))
    assert r.json()["rejected_count"] == len(full.rejected) > 0


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"workload": "fine_tuning", "memry_gb": 80}, "memry_gb", "did you mean 'memory_gb'"),
        ({"workload": "fine_tuning", "memory_gb": -1}, "memory_gb", "greater than or equal to 0"),
        ({"memory_gb": 80}, "workload", "Field required"),
    ],
)
def test_invalid_bodies_are_422_naming_the_field(
    client: TestClient, body: dict[str, Any], field: str, message: str
) -> None:
    r = problem(client.post("/v1/recommendations", json=body), 422)
    assert any(e["field"] == field and message in e["message"] for e in r["errors"]), r


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/v1/probe-reports?limt=5"),  # a misspelt filter would mean "no filter"
        ("GET", "/v1/accelerators?vendr=nvidia"),  # the filters are named exactly
        ("GET", "/v1/fleet/summary?host=a"),  # an operation that takes no query at all
        ("POST", "/v1/recommendations?distinct"),  # a body route: the query is checked too
    ],
)
def test_undeclared_query_parameters_are_422_naming_them(
    client: TestClient, method: str, path: str
) -> None:
    body = {"workload": "fine_tuning"} if method == "POST" else None
    r = client.request(method, path, json=body)
    assert r.status_code == 422
    assert r.headers["content-type"] == "application/problem+json"
    name = path.partition("?")[2].partition("=")[0]
    assert r.json()["errors"][0]["field"] == name


def test_operational_endpoints_ignore_query_parameters(client: TestClient) -> None:
    """Load balancers and scrapers append their own parameters (cache busters, name[])."""
    for path in ("/healthz?ts=1", "/metrics?name[]=x"):
        assert client.get(path).status_code == 200, path


def test_unknown_workload_is_422_with_valid_list(client: TestClient) -> None:
    r = problem(client.post("/v1/recommendations", json={"workload": "edge_inferenc"}), 422)
    assert "did you mean 'edge_inference'" in r["detail"]


def test_reports_need_a_valid_token(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    body = json.loads(REPORT.read_text())
    caplog.set_level(logging.DEBUG)
    problem(client.post("/v1/probe-reports", json=body), 401)
    problem(
        client.post(
            "/v1/probe-reports", json=body, headers={"Authorization": "Bearer wrong-secret"}
        ),
        403,
    )
    problem(
        client.post("/v1/probe-reports", json=body, headers={"Authorization": "Basic abc"}), 401
    )
    assert "wrong-secret" not in caplog.text and TOKEN not in caplog.text


def test_report_store_list_get_and_fleet(client: TestClient) -> None:
    body = json.loads(REPORT.read_text())
    created = client.post("/v1/probe-reports", json=body, headers=AUTH)
    assert created.status_code == 201
    rid = created.json()["id"]
    assert created.headers["location"] == f"/v1/probe-reports/{rid}"
    got = client.get(f"/v1/probe-reports/{rid}").json()
    # a schema-1 report comes back as the current schema reads it: the fields it lacks as defaults
    canonical = ProbeReport.model_validate(body).model_dump(mode="json")
    assert got["report"] == canonical and got["report"]["checks"][0]["scope"] is None
    page = client.get(
        "/v1/probe-reports", params={"accelerator": "h200-sxm", "verdict": body["verdict"]}
    ).json()
    assert page["total"] == 1 and page["items"][0]["id"] == rid and page["next_offset"] is None
    assert client.get("/v1/probe-reports", params={"host": "elsewhere"}).json()["total"] == 0
    assert (
        client.get("/v1/probe-reports", params={"since": "2999-01-01T00:00:00Z"}).json()["total"]
        == 0
    )
    problem(client.get("/v1/probe-reports/nope"), 404)
    (fleet,) = client.get("/v1/fleet/summary").json()
    assert fleet["accelerator"] == "h200-sxm" and fleet["reports"] == 1
    (bf16,) = [c for c in body["checks"] if c["name"] == "matmul_bf16"]
    ratio = bf16["measured"] / bf16["expected"]  # one report: its own ratio is the median
    assert fleet["checks"]["matmul_bf16"]["ratio_median"] == pytest.approx(ratio)
    assert fleet["checks"]["matmul_bf16"]["count"] == 1


def test_report_with_unknown_field_is_422(client: TestClient) -> None:
    body = json.loads(REPORT.read_text())
    body["verdikt"] = "pass"
    r = problem(client.post("/v1/probe-reports", json=body, headers=AUTH), 422)
    assert any(
        e["field"] == "verdikt" and "did you mean 'verdict'" in e["message"] for e in r["errors"]
    )


def test_body_size_limit(client: TestClient) -> None:
    big = {"workload": "fine_tuning", "region": "x" * 300_000}
    problem(client.post("/v1/recommendations", json=big), 413)

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is counted as bytes arrive
        yield b'{"workload": "fine_tuning", "region": "'
        for _ in range(30):
            yield b"y" * 10_000
        yield b'"}'

    problem(
        client.post(
            "/v1/recommendations", content=chunks(), headers={"content-type": "application/json"}
        ),
        413,
    )


def test_readyz_and_reload_keep_the_last_good_catalog(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    user = write_catalog(tmp_path / "cat", mini_catalog_data())
    s = settings(tmp_path, catalog_dir=str(user), catalog_mode="replace")
    with TestClient(create_app(s)) as c:
        assert c.get("/readyz").json()["status"] == "ready"
        bad = mini_catalog_data()
        bad["accelerators"][0]["memry_gb"] = 1
        write_catalog(user, bad)
        r = c.post("/v1/catalog/reload", headers=AUTH).json()
        assert r["reloaded"] is False and "memry_gb" in r["detail"]
        ready = c.get("/readyz").json()
        assert ready["status"] == "degraded" and "memry_gb" in ready["catalog"]["detail"]
        assert "catalog reload failed" in caplog.text
        assert c.get("/v1/accelerators/big").status_code == 200  # still serving the last good one
        write_catalog(user, mini_catalog_data())
        assert c.post("/v1/catalog/reload", headers=AUTH).json()["reloaded"] is True
        assert c.get("/readyz").json()["status"] == "ready"
        problem(c.post("/v1/catalog/reload"), 401)


def readyz_once_unready(c: TestClient) -> Any:
    """/readyz once the database is not "ok" in it, or after 20 x SHARED_READING_S: the last
    good ping of the database is shared for SHARED_READING_S (advisor/api/state.py), the first
    reading after it finds the database gone."""
    deadline = time.monotonic() + 20 * SHARED_READING_S
    while (r := c.get("/readyz")).json()["database"]["status"] == "ok":
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return r


def test_readyz_is_503_while_the_database_is_unreachable(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/ready.db")
    with TestClient(create_app(settings(tmp_path), store=store)) as c:
        assert c.get("/readyz").status_code == 200
        store.close()  # the database connection is gone, as when the database is down
        r = readyz_once_unready(c)
        assert r.status_code == 503, r.text
        body = r.json()
        assert body["status"] == "unavailable"
        assert body["database"]["status"] == "unavailable" and body["database"]["detail"]
        assert body["catalog"]["status"] == "ok"  # the other component is still reported
        assert c.get("/healthz").status_code == 200  # alive, only not ready: no restart


def test_metrics_count_requests_and_reports(client: TestClient) -> None:
    client.get("/healthz")
    client.post("/v1/probe-reports", json=json.loads(REPORT.read_text()), headers=AUTH)
    text = client.get("/metrics").text
    assert 'advisor_http_requests_total{method="GET",route="/healthz",status="200"} 1' in text
    assert (
        'advisor_http_requests_total{method="POST",route="/v1/probe-reports",status="201"} 1'
        in text
    )
    assert "advisor_probe_reports_stored_total 1" in text
    assert 'advisor_probe_report_verdicts_total{verdict="pass"} 1' in text
    assert 'advisor_http_request_duration_seconds_count{method="GET",route="/healthz"} 1' in text


def test_settings_are_validated_at_start_up() -> None:
    with pytest.raises(InputError, match="ADVISOR_MAX_BODY_BYTES"):
        Settings.from_env({"ADVISOR_MAX_BODY_BYTES": "lots"})
    with pytest.raises(InputError, match="ADVISOR_CATALOG_MODE"):
        Settings.from_env({"ADVISOR_CATALOG_MODE": "merge"})
    s = Settings.from_env(
        {"ADVISOR_API_TOKENS": " a, b ,,", "ADVISOR_DATABASE_URL": "sqlite:///fleet.db"}
    )
    assert [t.get_secret_value() for t in s.api_tokens] == ["a", "b"]
    assert "a" not in repr(s.api_tokens)


def test_openapi_yaml_is_current() -> None:
    checked_in = (Path(__file__).parents[1] / "openapi.yaml").read_text()
    assert yaml.safe_load(checked_in) == yaml.safe_load(render()), (
        "openapi.yaml differs from the app: regenerate with `python -m advisor.api.openapi`"
    )
    spec = yaml.safe_load(checked_in)
    ids = [op["operationId"] for path in spec["paths"].values() for op in path.values()]
    assert len(ids) == len(set(ids)) and "createRecommendation" in ids


NODE_REPORT = Path(__file__).parents[1] / (
    "benchmarks/results/node-probe-2026-12-01-nvidia-h200-driver580.159.04-torch2.11.0+cu130/"
    "node-quick.json"
)


def test_a_node_report_is_stored_whole_and_counted_per_gpu_check(client: TestClient) -> None:
    """The recorded node report of the H200 (schema 2: per-GPU checks with the GPU's index and
    UUID, health checks with actions, the one-rank collective) goes in and comes back as sent."""
    body = json.loads(NODE_REPORT.read_text())
    assert body["schema_version"] == 2 and body["gpu_verdicts"][0]["verdict"] == "pass"
    created = client.post("/v1/probe-reports", json=body, headers=AUTH)
    assert created.status_code == 201, created.text
    got = client.get(f"/v1/probe-reports/{created.json()['id']}").json()["report"]
    assert got == body
    bf16 = next(c for c in got["checks"] if c["name"] == "matmul_bf16")
    assert bf16["gpu"] == 0 and bf16["scope"] == "gpu" and bf16["gpu_uuid"].startswith("GPU-")
    (fleet,) = client.get("/v1/fleet/summary").json()
    assert fleet["accelerator"] == "h200-sxm" and fleet["checks"]["matmul_bf16"]["count"] == 1


def test_unfiltered_catalog_listings_and_the_docs_page_follow_a_reload(tmp_path: Path) -> None:
    """The unfiltered listings and the /docs page are kept for the catalog loaded now: equal to
    what a filter admitting everything answers, and new after a reload."""
    user = write_catalog(tmp_path / "cat", mini_catalog_data())
    s = settings(tmp_path, catalog_dir=str(user), catalog_mode="replace")
    with TestClient(create_app(s)) as c:
        before = [c.get(p) for p in ("/v1/instance-types", "/v1/accelerators", "/docs")]
        assert before[0].content == c.get("/v1/instance-types?min_gpus=0").content
        assert before[0].headers["content-type"] == "application/json"
        assert {a["id"] for a in before[1].json()} >= {"big", "small"}
        again = [c.get(p) for p in ("/v1/instance-types", "/v1/accelerators", "/docs")]
        assert [r.content for r in before] == [r.content for r in again]
        data = mini_catalog_data()
        data["accelerators"][0]["name"] = "Renamed Big"
        data["instance_types"][0]["id"] = "big8-renamed"
        write_catalog(user, data)
        assert c.post("/v1/catalog/reload", headers=AUTH).json()["reloaded"] is True
        types = c.get("/v1/instance-types")
        assert "big8-renamed" in {t["id"] for t in types.json()}
        assert types.content == c.get("/v1/instance-types?min_gpus=0").content
        accelerators = {a["id"]: a["name"] for a in c.get("/v1/accelerators").json()}
        assert accelerators["big"] == "Renamed Big"
        assert "big8-renamed" in c.get("/docs").text and "big8-renamed" not in before[2].text


def test_the_openapi_document_is_served_as_starlette_encodes_it(tmp_path: Path) -> None:
    """/openapi.json is encoded once per document (advisor/api/docs.py): the bytes Starlette's
    JSONResponse makes of the live document, again after a reload changed it; behind a root
    path the document names it as a server, as FastAPI's own route did."""
    user = write_catalog(tmp_path / "cat", mini_catalog_data())
    s = settings(tmp_path, catalog_dir=str(user), catalog_mode="replace")
    app = create_app(s)
    with TestClient(app) as c:
        first = c.get("/openapi.json")
        assert first.content == JSONResponse(app.openapi()).body
        assert first.headers["content-type"] == "application/json"
        data = mini_catalog_data()
        data["instance_types"][0]["id"] = "big8-renamed"
        write_catalog(user, data)
        assert c.post("/v1/catalog/reload", headers=AUTH).json()["reloaded"] is True
        after = c.get("/openapi.json")
        assert after.content == JSONResponse(app.openapi()).body != first.content
        assert b"big8-renamed" in after.content
    with TestClient(app, root_path="/behind") as c:
        assert c.get("/openapi.json").json()["servers"] == [{"url": "/behind"}]


def test_the_direct_recommendation_route_answers_as_fastapis_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """advisor/api/strict_json.py DirectEngineRoute calls the endpoint past FastAPI's handler;
    an app with a dependency override takes FastAPI's handler. The two answer every request
    alike, byte for byte: answers, refusals of the body, of the query and of the engine."""
    from fastapi import routing as fastapi_routing

    from advisor.api.deps import get_state
    from benchmarks.bench_service import DISTINCT_BODIES, RECOMMEND_BODIES

    solved: list[int] = []
    real_solve = fastapi_routing.solve_dependencies

    async def counted(*args: Any, **kwargs: Any) -> Any:
        solved.append(1)
        return await real_solve(*args, **kwargs)

    monkeypatch.setattr(fastapi_routing, "solve_dependencies", counted)
    requests: list[tuple[str, bytes]] = [("", b) for b in DISTINCT_BODIES[::150]]
    requests += [("", b) for b in RECOMMEND_BODIES]
    requests += [
        ("", json.dumps(b).encode())
        for b in (
            {"workload": "fine_tuning", "memory_gb": 80, "show_rejected": True},
            {"workload": "fine_tuning", "limit": 12},  # on the engine's thread
            {"workload": "edge_inferenc"},  # the engine's 422
            {"workload": "fine_tuning", "region": "us-east-9"},
            {"workload": "fine_tuning", "memry_gb": 80},  # the body's 422
            {"workload": "low_latency_inference", "memory_gb": 300, "max_hourly_usd": 10},
        )
    ]
    requests += [("?limt=3", RECOMMEND_BODIES[0]), ("?limit=3", RECOMMEND_BODIES[1])]
    answers = []
    for override in (False, True):
        app = create_app(settings(tmp_path / str(override)))
        if override:
            app.dependency_overrides[get_state] = get_state
        solved.clear()
        with TestClient(app) as c:
            answers.append(
                [
                    (r.status_code, r.headers.items(), r.content)
                    for query, body in requests
                    for r in [
                        c.post(
                            "/v1/recommendations" + query,
                            content=body,
                            headers={"content-type": "application/json"},
                        )
                    ]
                ]
            )
        # the direct path resolves nothing through FastAPI; an override takes its handler
        assert bool(solved) is override
    direct, fastapi = answers
    assert [a[0] for a in direct].count(200) >= len(DISTINCT_BODIES[::150]) + 2
    assert {a[0] for a in direct} >= {200, 422}
    assert direct == fastapi


def test_a_direct_route_on_another_fastapis_dependant_is_fastapis_own() -> None:
    """A FastAPI whose Dependant lacks a field the direct call reads gets no direct call (its
    own handler answers), rather than a route that cannot be built."""
    from types import SimpleNamespace

    from advisor.api.strict_json import _direct_endpoint

    older = SimpleNamespace(
        path_params=[], query_params=[], header_params=[], cookie_params=[], dependencies=[]
    )
    route = SimpleNamespace(dependant=older, path="/v1/recommendations", endpoint=None)
    assert _direct_endpoint(route) is None  # type: ignore[arg-type]
