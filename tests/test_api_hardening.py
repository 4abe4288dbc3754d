"""Hardening of the app, in-process: bounded metrics labels, the calibration and the
review off the read path, strict JSON in and out, time filters as RFC 3339 instants, extreme but
valid inputs, and a fleet calibration that bad reports cannot poison."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs
import pytest
import yaml
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

import advisor.api.routes.review as review_route
from advisor import Catalog, load_catalog
from advisor.api import create_app
from advisor.api.problems import STORE_RETRY_AFTER_S
from advisor.api.settings import ENV, Settings
from advisor.errors import InputError
from advisor.fleet.statistics import PLAUSIBLE_RATIO
from advisor.request import ID_MAX_CHARS
from advisor.store import Store, StoreError, open_store
from tests.api_server import REPO
from tests.factories import mini_catalog_data, write_catalog
from tests.test_estimate_api import FINE_TUNE, RATIOS, probe_report

TOKEN = "hardening-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def settings(tmp_path: Path) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path}/h.db", api_tokens=(TOKEN,))  # type: ignore[arg-type]


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(settings(tmp_path))) as c:
        yield c


def strict_json(text: str) -> Any:
    """JSON as RFC 8259 has it: NaN and Infinity are not numbers."""

    def refuse(token: str) -> None:
        raise ValueError(f"{token} in a response")

    return json.loads(text, parse_constant=refuse)


def assert_problem(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json", r.headers
    body: dict[str, Any] = strict_json(r.text)
    assert body["status"] == status
    return body


# --- item 1: bounded work ---------------------------------------------------------------------


def test_made_up_methods_and_paths_share_one_label_each(client: TestClient) -> None:
    for i in range(40):
        assert client.request(f"X{i}", "/v1/recommendations").status_code == 405
        assert client.get(f"/no/such/path/{i}").status_code == 404
    exposition = client.get("/metrics").text
    labels: dict[str, set[str]] = {"method": set(), "route": set()}
    other = 0.0
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            for name, seen in labels.items():
                if name in sample.labels:
                    seen.add(sample.labels[name])
            if sample.name == "advisor_http_requests_total" and sample.labels["method"] == "OTHER":
                other += sample.value
    assert labels["method"] <= {"GET", "POST", "OTHER"}, labels["method"]
    assert not any(r.startswith("/no/") for r in labels["route"]), labels["route"]
    assert "(unmatched)" in labels["route"]
    assert other == 40


class CountingStore:
    """A real store that counts how often the whole fleet is read."""

    def __init__(self, store: Store) -> None:
        self.store, self.fleet_reads = store, 0

    def fleet(self, accelerator: str | None = None, check: str | None = None) -> Any:
        self.fleet_reads += 1
        return self.store.fleet(accelerator, check)

    def host_ratios(self, check: str) -> Any:
        self.fleet_reads += 1
        return self.store.host_ratios(check)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.mark.usefixtures("roofline")
def test_reads_never_recompute_the_fleet_calibration(tmp_path: Path, shipped: Catalog) -> None:
    counting = CountingStore(open_store(f"sqlite:///{tmp_path}/c.db"))
    app = create_app(settings(tmp_path), store=counting)  # type: ignore[arg-type]
    base = shipped.workloads["fine_tuning"].efficiency
    with TestClient(app) as c:
        for i, ratio in enumerate(RATIOS):
            assert c.post("/v1/probe-reports", json=probe_report(f"h{i}", ratio), headers=AUTH)
        before = counting.fleet_reads
        for _ in range(5):
            est = c.post("/v1/estimates", json=FINE_TUNE).json()
            assert est["efficiency"] == pytest.approx(
                base * 0.80
            )  # the reports arrived: calibrated
            sized = {"workload": "fine_tuning", "model": "llama-3-8b", "tokens": 2e9}
            assert c.post("/v1/recommendations", json=sized).status_code == 200
        assert counting.fleet_reads == before, "estimates read the whole store"


def test_concurrent_reviews_share_one_build_per_store_generation(tmp_path: Path) -> None:
    app = create_app(settings(tmp_path))
    builds = 0
    real = review_route.build_review

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal builds
        builds += 1
        return real(*args, **kwargs)

    async def run() -> tuple[list[httpx.Response], list[httpx.Response]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            first = await asyncio.gather(*(http.get("/v1/review") for _ in range(8)))
            stored = await http.post(
                "/v1/probe-reports", json=probe_report("new-host", 0.8), headers=AUTH
            )
            assert stored.status_code == 201
            second = await asyncio.gather(*(http.get("/v1/review") for _ in range(8)))
            return first, second

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(review_route, "build_review", counted)
        first, second = asyncio.run(run())
    assert {r.status_code for r in first + second} == {200}
    assert len({r.content for r in first}) == 1
    assert len({r.content for r in second}) == 1
    assert first[0].content != second[0].content  # the stored report is in the second page
    assert builds == 2, builds  # one per store generation, not one per caller
    app.state.advisor.store.close()


# --- item 2: strict JSON in and out, time filters, extreme inputs -----------------------------


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e309", "-1e309", "9" * 400])
def test_non_json_numbers_are_422_naming_the_field(client: TestClient, token: str) -> None:
    body = f'{{"workload": "fine_tuning", "max_hourly_usd": {token}}}'
    r = client.post(
        "/v1/recommendations", content=body, headers={"content-type": "application/json"}
    )
    problem = assert_problem(r, 422)
    assert [e["field"] for e in problem["errors"]] == ["max_hourly_usd"], problem
    sent = probe_report("nan-host", 0.8)
    sent["checks"][0]["measured"] = "MEASURED"
    report = json.dumps(sent).replace('"MEASURED"', token)
    assert token in report
    r = client.post(
        "/v1/probe-reports", content=report, headers={**AUTH, "content-type": "application/json"}
    )
    problem = assert_problem(r, 422)
    assert [e["field"] for e in problem["errors"]] == ["checks.0.measured"], problem
    assert client.get("/v1/probe-reports").json()["total"] == 0  # nothing stored


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/recommendations", {"workload": "fine_tuning", "params_b": 5e-324, "tokens": 1e9}),
        ("/v1/estimates", {**FINE_TUNE, "model": None, "params_b": 5e-324}),
        ("/v1/estimates", {**FINE_TUNE, "tokens": 5e-324}),
        (
            "/v1/recommendations",
            {
                "workload": "fine_tuning",
                "model": "llama-3-8b",
                "tokens": 2e9,
                "deadline_days": 5e-324,
            },
        ),
        (
            "/v1/recommendations",
            {"workload": "low_latency_inference", "model": "llama-3-8b", "max_ttft_ms": 5e-324},
        ),
    ],
)
def test_extreme_valid_numbers_never_500(
    client: TestClient, path: str, body: dict[str, Any]
) -> None:
    r = client.post(path, json={k: v for k, v in body.items() if v is not None})
    assert r.status_code in (200, 422), r.text
    if r.status_code == 422:
        assert_problem(r, 422)
    else:
        strict_json(r.text)


@pytest.mark.parametrize(
    "value",
    [
        "0",
        "0.5",
        "1700000000",
        "2026-11-30T12:00:00",  # no zone: not one instant
        "2026-11-30",
        "0001-01-01T00:00:00+14:00",  # year 0 in UTC
        "9999-12-31T23:59:59-14:00",  # year 10000 in UTC
        "2026-13-01T00:00:00Z",
    ],
)
def test_time_filters_must_be_rfc3339_instants(client: TestClient, value: str) -> None:
    for name in ("since", "until"):
        problem = assert_problem(client.get("/v1/probe-reports", params={name: value}), 422)
        assert [e["field"] for e in problem["errors"]] == [name], problem


def test_time_filters_compare_as_instants_before_year_1000(client: TestClient) -> None:
    assert (
        client.post("/v1/probe-reports", json=probe_report("h", 0.8), headers=AUTH).status_code
        == 201
    )

    def total(**params: str) -> int:
        r = client.get("/v1/probe-reports", params=params)
        assert r.status_code == 200, r.text
        return int(r.json()["total"])

    assert total(since="0999-01-01T00:00:00Z") == 1
    assert total(until="0999-01-01T00:00:00Z") == 0
    assert total(since="0001-01-01T00:00:00Z", until="9999-12-31T23:59:59Z") == 1
    assert total(since="2999-01-01T00:00:00+02:00") == 0


def test_report_times_are_rfc3339(client: TestClient) -> None:
    for created_at in (0, 0.5, "0", "2026-11-30T12:00:00"):
        report = {**probe_report("h", 0.8), "created_at": created_at}
        problem = assert_problem(client.post("/v1/probe-reports", json=report, headers=AUTH), 422)
        assert [e["field"] for e in problem["errors"]] == ["created_at"], problem


@pytest.mark.parametrize(
    "created_at",
    [
        "0001-01-01T02:00:03+03:00",  # year 0 in UTC: found by the contract test's generator
        "0999-12-31T23:59:59Z",
        "9000-01-01T00:00:00Z",
    ],
)
def test_report_times_are_in_the_years_the_schema_states(
    client: TestClient, created_at: str
) -> None:
    """A report's created_at is an instant of the years 1000 to 8999, the range the OpenAPI
    pattern states, so a schema-valid report is always one the server can store in UTC."""
    report = {**probe_report("h", 0.8), "created_at": created_at}
    problem = assert_problem(client.post("/v1/probe-reports", json=report, headers=AUTH), 422)
    assert [e["field"] for e in problem["errors"]] == ["created_at"], problem
    assert "the years" in problem["detail"]  # 1000 to 8999, or 1 to 9999 in UTC
    schema = client.get("/openapi.json").json()["components"]["schemas"]["ProbeReport"]
    assert schema["properties"]["created_at"]["pattern"] == "^[1-8][0-9]{3}-"


def test_unhandled_errors_are_problems(tmp_path: Path) -> None:
    app = create_app(settings(tmp_path))

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("internal detail that must not leak")

    with TestClient(app, raise_server_exceptions=False) as c:
        problem = assert_problem(c.get("/boom"), 500)
    assert "internal detail" not in problem["detail"]


# --- item 3: calibration robust to bad data ---------------------------------------------------


@pytest.mark.usefixtures("roofline")
def test_absurd_ratios_are_ignored_and_counted(client: TestClient, shipped: Catalog) -> None:
    base = shipped.workloads["fine_tuning"].efficiency
    for i in range(6):
        r = client.post("/v1/probe-reports", json=probe_report(f"absurd-{i}", 350.0), headers=AUTH)
        assert r.status_code == 201
    est = client.post("/v1/estimates", json=FINE_TUNE)
    assert est.status_code == 200, est.text
    assert est.json()["efficiency"] == base, "six absurd reports calibrated the fleet"
    (summary,) = strict_json(client.get("/v1/fleet/summary").text)
    check = summary["checks"]["matmul_bf16"]
    assert check["ratios_ignored"] == 6 and check["ratios"] == 0 and check["ratio_median"] is None
    # five plausible reports next to them: the median is theirs alone
    for i, ratio in enumerate(RATIOS):
        client.post("/v1/probe-reports", json=probe_report(f"good-{i}", ratio), headers=AUTH)
    est = client.post("/v1/estimates", json=FINE_TUNE).json()
    assert est["efficiency"] == pytest.approx(base * 0.80)
    assert "over 5 probe reports" in est["efficiency_source"]
    (summary,) = client.get("/v1/fleet/summary").json()
    assert summary["checks"]["matmul_bf16"]["ratios_ignored"] == 6
    assert summary["checks"]["matmul_bf16"]["ratio_median"] == pytest.approx(0.80)


@pytest.mark.parametrize("ratio", [1e308, 1e-300, PLAUSIBLE_RATIO.high * 1.01])
def test_ratios_outside_the_band_never_reach_a_response(client: TestClient, ratio: float) -> None:
    for i in range(6):
        report = probe_report(f"h{i}", 1.0)
        report["checks"][0].update(measured=ratio, expected=1.0)
        assert client.post("/v1/probe-reports", json=report, headers=AUTH).status_code == 201
    (summary,) = strict_json(client.get("/v1/fleet/summary").text)
    assert summary["checks"]["matmul_bf16"]["ratios_ignored"] == 6
    est = client.post("/v1/estimates", json=FINE_TUNE)
    assert (
        est.status_code == 200
        and "fleet-calibrated" not in strict_json(est.text)["efficiency_source"]
    )
    review = client.get("/v1/review")
    assert review.status_code == 200


# --- item 5: the contract ---------------------------------------------------------------------


@pytest.mark.parametrize("method", ["OPTIONS", "PUT", "DELETE", "X-MADE-UP"])
def test_405_allows_every_method_of_the_path(client: TestClient, method: str) -> None:
    for path, allowed in (
        ("/v1/probe-reports", "GET, HEAD, POST"),
        ("/v1/utilisation-reports", "GET, HEAD, POST"),
        ("/v1/recommendations", "POST"),
        ("/healthz", "GET, HEAD"),
    ):
        r = client.request(method, path)
        assert_problem(r, 405)
        assert r.headers["allow"] == allowed, (path, r.headers["allow"])


def enums(spec: dict[str, Any]) -> dict[str, list[str]]:
    schemas = spec["components"]["schemas"]

    def string_branch(schema: dict[str, Any]) -> dict[str, Any]:
        (branch,) = [b for b in schema.get("anyOf", [schema]) if b.get("type") == "string"]
        return branch

    def param(path: str, name: str) -> list[str]:
        (p,) = [p for p in spec["paths"][path]["get"]["parameters"] if p["name"] == name]
        return list(string_branch(p["schema"])["enum"])

    return {
        "workloads": string_branch(schemas["RecommendRequest"]["properties"]["workload"])["enum"],
        "regions": string_branch(schemas["RecommendRequest"]["properties"]["region"])["enum"],
        "models": string_branch(schemas["EstimateRequest"]["properties"]["model"])["enum"],
        "accelerators": param("/v1/accelerators/{accelerator_id}", "accelerator_id"),
        "instance_types": param("/v1/instance-types/{instance_type_id}", "instance_type_id"),
        "review_regions": param("/v1/review", "region"),
    }


def expected_enums(catalog: Catalog) -> dict[str, list[str]]:
    return {
        "workloads": sorted(catalog.workloads),
        "regions": sorted(catalog.regions),
        "models": sorted(catalog.models),
        "accelerators": sorted(catalog.accelerators),
        "instance_types": sorted(catalog.instance_types),
        "review_regions": sorted(catalog.regions),
    }


def test_the_checked_in_contract_names_the_shipped_catalog(shipped: Catalog) -> None:
    spec = yaml.safe_load((REPO / "openapi.yaml").read_text())
    assert enums(spec) == expected_enums(shipped)


def test_the_live_contract_names_the_loaded_catalog(tmp_path: Path) -> None:
    user = write_catalog(tmp_path / "cat", mini_catalog_data())
    s = Settings(
        database_url=f"sqlite:///{tmp_path}/l.db",
        catalog_dir=str(user),
        catalog_mode="replace",
        api_tokens=(TOKEN,),  # type: ignore[arg-type]
    )
    with TestClient(create_app(s)) as c:
        live = c.get("/openapi.json").json()
        loaded = load_catalog(user, replace=True)
        assert enums(live) == expected_enums(loaded)
        assert "h100-sxm" not in enums(live)["accelerators"]
        data = mini_catalog_data()
        data["accelerators"].append(
            {
                **data["accelerators"][0],
                "id": "added-gpu",
                "name": "ADDED",
                "no_instance_reason": "test",
            }
        )
        write_catalog(user, data)
        assert c.post("/v1/catalog/reload", headers=AUTH).json()["reloaded"] is True
        assert "added-gpu" in enums(c.get("/openapi.json").json())["accelerators"]


@pytest.mark.parametrize(
    ("path", "body", "valid"),
    [
        ("/v1/estimates", {**FINE_TUNE}, True),
        ("/v1/estimates", {**FINE_TUNE, "model": None, "params_b": 8.0}, True),
        ("/v1/estimates", {**FINE_TUNE, "params_b": 8.0}, False),  # both
        ("/v1/estimates", {k: v for k, v in FINE_TUNE.items() if k != "model"}, False),  # none
        ("/v1/estimates", {k: v for k, v in FINE_TUNE.items() if k != "instance_type"}, False),
        ("/v1/recommendations", {"workload": "fine_tuning"}, True),
        ("/v1/recommendations", {"workload": "fine_tuning", "params_b": 8.0}, True),
        (
            "/v1/recommendations",
            {"workload": "fine_tuning", "model": "llama-3-8b", "params_b": 8.0},
            False,
        ),
    ],
)
def test_the_contract_states_the_model_rule(
    client: TestClient, path: str, body: dict[str, Any], valid: bool
) -> None:
    spec = yaml.safe_load((REPO / "openapi.yaml").read_text())
    ref = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    validator = jsonschema_rs.validator_for({**ref, "components": spec["components"]})
    assert validator.is_valid(body) is valid
    assert (client.post(path, json=body).status_code == 200) is valid


def test_docs_need_nothing_from_outside(client: TestClient) -> None:
    r = client.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert r.headers["content-security-policy"].startswith("default-src 'none'")
    html = r.text
    assert "<script" not in html and "<link" not in html and "src=" not in html
    assert not re.search(r"(href|src)=\"(https?:)?//", html), "an external asset"
    assert "/v1/recommendations" in html and "large_scale_training" in html
    assert "<code>workload</code>" in html
    assert client.get("/redoc").status_code == 404


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("ADVISOR_MAX_PRICE_AGE_DAYS", "-1"),
        ("ADVISOR_REQUEST_TIMEOUT_S", "0"),
        ("ADVISOR_KEEP_ALIVE_S", "soon"),
        ("ADVISOR_MAX_CONNECTIONS", "0"),
        ("ADVISOR_FLEET_REFRESH_S", "NaN"),
        ("ADVISOR_MAX_HEADER_BYTES", "10"),
        ("ADVISOR_IDLE_TIMEOUT_S", "0"),
        ("ADVISOR_RESERVED_CONNECTIONS", "-1"),
        ("ADVISOR_DATABASE_TIMEOUT_S", "0.5"),
        ("ADVISOR_DATABASE_RETRY_S", "0"),
        ("ADVISOR_MAX_CONNECTIONS_PER_CLIENT", "-1"),
        ("ADVISOR_ENGINE_MAX_PER_CLIENT", "-1"),
        ("ADVISOR_ENGINE_MAX_QUEUED", "0"),
    ],
)
def test_every_service_setting_is_validated_at_start_up(variable: str, value: str) -> None:
    with pytest.raises(InputError, match=variable):
        Settings.from_env({variable: value})
    assert variable in ENV.values()


def test_a_failed_reload_names_no_server_path(tmp_path: Path) -> None:
    user = write_catalog(tmp_path / "secret-dir" / "cat", mini_catalog_data())
    s = Settings(
        database_url=f"sqlite:///{tmp_path}/l.db",
        catalog_dir=str(user),
        catalog_mode="replace",
        api_tokens=(TOKEN,),  # type: ignore[arg-type]
    )
    with TestClient(create_app(s)) as c:
        (user / "catalog.yaml").write_text("accelerators: [{id: broken}]\n")
        answer = c.post("/v1/catalog/reload", headers=AUTH).json()
    assert answer["reloaded"] is False
    assert "reload failed" in answer["detail"]
    assert "secret-dir" not in answer["detail"], answer["detail"]
    assert "ADVISOR_CATALOG" in answer["detail"] or "catalog.yaml" in answer["detail"]


@pytest.mark.parametrize(
    ("number", "stored"),
    [(2**63 - 1, True), (2**63, False), (-(2**63), True), (-(2**63) - 1, False), (10**308, False)],
)
def test_integers_are_bounded_to_64_bits(client: TestClient, number: int, stored: bool) -> None:
    sent = probe_report(f"int-host-{number % 97}", 0.95)
    sent["device"] = "DEVICE"
    body = json.dumps(sent).replace('"DEVICE"', str(number))
    r = client.post(
        "/v1/probe-reports", content=body, headers={**AUTH, "content-type": "application/json"}
    )
    if stored:
        assert r.status_code == 201, r.text
    else:
        problem = assert_problem(r, 422)
        assert [e["field"] for e in problem["errors"]] == ["device"], problem


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gpu_hours_lost", -1.0),
        ("gpu_hours_lost", 1e300),
        ("idle_usd_per_h", -5_000_000.0),
        ("saving_usd_per_h", 1e300),
    ],
)
def test_money_and_hours_are_finite_and_not_negative(field: str, value: float) -> None:
    from probes.report import JobFinding, JobReport

    finding: dict[str, Any] = {"code": "host_bound", "summary": "s", "evidence": [], "fix": "f"}
    job: dict[str, Any] = {
        "command": ["x"],
        "exit_code": 0,
        "wall_s": 1.0,
        "sampled_s": 1.0,
        "interval_s": 1.0,
        "verdict": "findings",
        "findings": [finding],
    }
    if field == "gpu_hours_lost":
        job[field] = value
    else:
        finding[field] = value
    with pytest.raises(ValidationError, match=field):
        JobReport.model_validate(job)
    JobFinding.model_validate({**finding, field: 1.5} if field != "gpu_hours_lost" else finding)


class FullDiskStore(CountingStore):
    """A real store whose writes fail as SQLite's do on a full disk (the store's own error)."""

    def add_once(self, *_: Any) -> Any:
        raise StoreError("could not store the report: database or disk is full")


def test_a_storage_failure_says_when_to_retry(tmp_path: Path) -> None:
    store = FullDiskStore(open_store(f"sqlite:///{tmp_path}/full.db"))
    with TestClient(create_app(settings(tmp_path), store=store)) as c:  # type: ignore[arg-type]
        r = c.post("/v1/probe-reports", json=probe_report("full-host", 0.95), headers=AUTH)
    assert_problem(r, 503)
    assert r.headers["Retry-After"] == str(STORE_RETRY_AFTER_S)


def test_the_contract_document_has_its_own_metrics_label(client: TestClient) -> None:
    assert client.get("/openapi.json").status_code == 200
    labels = {
        sample.labels.get("route")
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for sample in family.samples
    }
    assert "/openapi.json" in labels
    assert "(unmatched)" not in labels


@pytest.mark.parametrize(
    ("method", "path", "location"),
    [
        ("GET", "/v1/accelerators/?provider=aws", "/v1/accelerators?provider=aws"),
        ("GET", "/v1/accelerators/h100-sxm/", "/v1/accelerators/h100-sxm"),
        ("POST", "/v1/recommendations/", "/v1/recommendations"),
    ],
)
def test_a_trailing_slash_redirects_without_the_host_header(
    client: TestClient, method: str, path: str, location: str
) -> None:
    r = client.request(method, path, headers={"Host": "evil.example"}, follow_redirects=False)
    assert r.status_code == 307, r.text
    assert r.headers["location"] == location


@pytest.mark.parametrize("path", ["//evil.example/", "/no/such/", "/v1/probe-reports/x/y/"])
def test_a_trailing_slash_outside_the_contract_is_a_404(client: TestClient, path: str) -> None:
    assert_problem(client.get(path, follow_redirects=False), 404)


INFERENCE = {"workload": "high_throughput_inference", "model": "llama-3-8b"}
ID_CASES = [
    ("/v1/recommendations", {"workload": "fine_tuning"}, "workload"),
    ("/v1/recommendations", {"workload": "fine_tuning"}, "model"),
    ("/v1/recommendations", {"workload": "fine_tuning"}, "provider"),
    ("/v1/estimates", {**INFERENCE, "instance_type": "p5.48xlarge"}, "engine"),
    ("/v1/estimates", {k: v for k, v in FINE_TUNE.items() if k != "instance_type"}, "accelerator"),
    ("/v1/estimates", FINE_TUNE, "instance_type"),
]


@pytest.mark.parametrize(("path", "body", "field"), ID_CASES)
def test_an_overlong_id_is_refused_before_any_lookup(
    client: TestClient, shipped: Catalog, path: str, body: dict[str, Any], field: str
) -> None:
    """An id longer than any the catalog could hold is a 422 naming the field, and the answer
    does not repeat it whole (an unknown id is echoed with a "did you mean"); one at the bound is
    taken (the engine names a stored correction, which none is) or looked up and named."""
    longest = max(
        len(i)
        for ids in (shipped.workloads, shipped.models, shipped.accelerators, shipped.instance_types)
        for i in ids
    )
    assert longest < ID_MAX_CHARS
    for length in (ID_MAX_CHARS + 1, 100_000):
        r = client.post(path, json={**body, field: "q" * length})
        problem = assert_problem(r, 422)
        assert problem["errors"][0]["field"] == field and len(r.content) < 1000
    at_bound = client.post(path, json={**body, field: "q" * ID_MAX_CHARS})
    if field == "engine":
        assert at_bound.status_code == 200, at_bound.text
    else:
        assert_problem(at_bound, 422)
        assert "q" * ID_MAX_CHARS in at_bound.text


@pytest.mark.parametrize(
    ("route", "field"),
    [("/v1/accelerators/", "accelerator_id"), ("/v1/instance-types/", "instance_type_id")],
)
def test_an_overlong_catalog_path_id_is_refused_before_any_lookup(
    client: TestClient, route: str, field: str
) -> None:
    """A path id is bounded as a request's are: beyond the bound a short 422 naming it (an
    unknown id is compared with every known one and echoed); at the bound a 404 naming it."""
    for length in (ID_MAX_CHARS + 1, 16_000):
        problem = assert_problem(client.get(route + "q" * length), 422)
        assert problem["errors"][0]["field"] == field
        assert len(json.dumps(problem)) < 1000
    at_bound = client.get(route + "q" * ID_MAX_CHARS)
    assert_problem(at_bound, 404)
    assert "q" * ID_MAX_CHARS in at_bound.text
