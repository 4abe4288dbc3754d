"""The HTTP contract: schemathesis against a live `advisor serve`, from the checked-in openapi.yaml.

Every generated request (positive and negative data, all operations) must pass every check of
schemathesis: not a 5xx, a documented status code, content type, headers and body schema,
schema-valid data accepted and schema-invalid data rejected, auth required where declared. Error bodies are application/problem+json, which
the spec lists without a schema, so they are also checked here against its Problem component.

Every test runs against two servers: one with ADVISOR_READ_TOKENS set (the reads that name hosts
need a token) and one without (those reads are open): the contract states both. The last test
asserts, for each, that at least MIN_REQUESTS generated requests were really sent.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema_rs
import pytest
import requests
import schemathesis
import yaml
from hypothesis import HealthCheck, given, settings
from schemathesis.core.parameters import ParameterLocation

from advisor import load_catalog
from advisor.errors import InputError
from advisor.fleet.intake import as_stored
from probes.report import ProbeReport
from tests.api_server import REPO, LiveServer, live_server
from tests.reports import RECENT

OPENAPI = REPO / "openapi.yaml"
SHIPPED = load_catalog()  # the server's catalog: it grades reports against it
TOKEN = "contract-test-token"
READ_TOKEN = "contract-read-token"
# The server's read tokens, per variant: the guarded reads tested guarded, and open.
READ_TOKENS = {"read-tokens-set": READ_TOKEN, "read-tokens-unset": None}
MAX_BODY_BYTES = 64 * 1024
# Per operation and variant (90 when one server was tested). Most requests come from
# schemathesis's coverage phase, whatever this says (about 4,000 per variant); fewer examples
# keep the two variants to about 1.6x the one's time.
MAX_EXAMPLES = 25
MIN_REQUESTS = 4000  # per variant (4,459 are sent: derandomized, the same every run)
PROBLEM = "application/problem+json"

# Every check schemathesis has (server errors, status codes, content types, schemas, headers,
# positive data accepted, negative data rejected, missing or ignored auth, Allow on 405), on
# positive and negative data. One allowance: a sizing request whose every value is in the
# contract can still combine into something the catalog lacks or the model forbids (an instance
# type without a price in that region or purchase option, LoRA on a serving workload, a context
# beyond the model's): the engine's answer to those is a 422 naming why, so positive data may
# get a 422 there. Single values (ids, workloads, regions, the model/params_b and memory rules)
# are enums and rules in the contract and must be accepted.
SIZING_PATHS = ("/v1/recommendations", "/v1/estimates")
CONFIG = schemathesis.Config.from_dict(
    {
        "generation": {"mode": "all"},
        "operations": [
            {
                "include-path": path,
                "checks": {
                    "positive_data_acceptance": {
                        "expected-statuses": ["2xx", "401", "403", "404", "409", "422"]
                    }
                },
            }
            for path in SIZING_PATHS
        ]
        # A report's created_at must also lie within a year before the server's clock and 10
        # minutes after it (advisor.fleet.intake): no schema can state a time relative to now,
        # so a schema-valid report may get a 422 naming created_at. test_accepted_reports_read_back
        # sends generated reports with a current time and requires them accepted.
        + [
            {
                "include-path": "/v1/probe-reports",
                "include-method": "POST",
                "checks": {
                    # (413: a schema-valid report of up to 4,096 checks can be beyond the size limit)
                    "positive_data_acceptance": {
                        "expected-statuses": ["2xx", "401", "403", "404", "409", "413", "422"]
                    },
                    # Breaking a list's maxItems (4,096 checks) makes a body beyond the size limit:
                    # refused with 413 before it is read, which rejects it as surely as a 422.
                    "negative_data_rejection": {
                        "expected-statuses": ["400", "401", "403", "404", "406", "413", "422"]
                    },
                },
            }
        ],
    }
)
schema = schemathesis.openapi.from_path(OPENAPI, config=CONFIG)

SPEC: dict[str, Any] = yaml.safe_load(OPENAPI.read_text())
PROBLEM_VALIDATOR = jsonschema_rs.validator_for(
    {"$ref": "#/components/schemas/Problem", "components": SPEC["components"]}
)
OPERATIONS = sorted(
    f"{method.upper()} {path}" for path, item in SPEC["paths"].items() for method in item
)
JSON_BODY_OPERATIONS = sorted(
    (method.upper(), path)
    for path, item in SPEC["paths"].items()
    for method, op in item.items()
    if "application/json" in op.get("requestBody", {}).get("content", {})
)

SETTINGS = settings(
    deadline=None,
    derandomize=True,  # the same requests every run
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

# Requests actually sent by the generated tests, per variant and operation
# (SENT["read-tokens-set"]["GET /v1/accelerators"]).
SENT: defaultdict[str, Counter[str]] = defaultdict(Counter)


@pytest.fixture(scope="module", params=sorted(READ_TOKENS))
def variant(request: pytest.FixtureRequest) -> str:
    """Which server the tests run against (pytest groups the tests by it: one server at a time)."""
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def server(variant: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    workdir = tmp_path_factory.mktemp(f"advisor-api-{variant}")
    read_token = READ_TOKENS[variant]
    env = {"ADVISOR_READ_TOKENS": read_token} if read_token else {}
    with live_server(workdir, TOKEN, MAX_BODY_BYTES, env=env) as srv:
        yield srv


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


@pytest.fixture(scope="module")
def client(server: LiveServer) -> Iterator[httpx.Client]:
    # A kept-alive connection is dropped after 1 s idle, well before the server closes an idle
    # one (ADVISOR_IDLE_TIMEOUT_S, 5 s): with httpx's default 5 s the two raced, and a request
    # sent on a connection the server was closing got no answer.
    limits = httpx.Limits(keepalive_expiry=1.0)
    with httpx.Client(base_url=server.base_url, timeout=30, limits=limits) as c:
        yield c


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def header(response: schemathesis.Response, name: str) -> str:
    """One header of a schemathesis response (its headers are lowercased names -> value lists)."""
    return ", ".join(response.headers.get(name.lower(), []))


def assert_problem(status: int, content_type: str, body: bytes) -> dict[str, Any]:
    """An error must be application/problem+json whose body is the spec's Problem."""
    media_type = content_type.partition(";")[0].strip()
    assert media_type == PROBLEM, (status, content_type, body[:500])
    problem: dict[str, Any] = json.loads(body)
    errors = [e.message for e in PROBLEM_VALIDATOR.iter_errors(problem)]
    assert not errors, (status, problem, errors)
    assert problem["status"] == status, problem
    return problem


def valid_report(host: str = "contract-host-1", verdict: str = "pass") -> dict[str, Any]:
    return {
        "created_at": RECENT,
        "mode": "quick",
        "device": 0,
        "verdict": verdict,
        "accelerator": "h100-sxm",
        "inventory": {"hostname": host, "python": "3.11.9", "device_count": 8},
        "checks": [
            {"name": "memory_bandwidth", "status": "pass", "measured": 3100.0, "detail": "ok"}
        ],
        "duration_s": 12.5,
    }


# --- generated requests, every operation ------------------------------------------------------


@pytest.mark.slow
@schema.parametrize()
@settings(SETTINGS, max_examples=MAX_EXAMPLES)
def test_generated_requests_conform(
    case: schemathesis.Case, variant: str, server: LiveServer, session: requests.Session
) -> None:
    # The write token goes on every request (writes need it, guarded reads accept it, the open
    # endpoints ignore it), except where the case's headers are the negative part: a request
    # generated without its required Authorization must go without it, and be refused.
    negative_headers = case.meta is not None and case.meta.is_negative_at(ParameterLocation.HEADER)
    headers = None if negative_headers else auth()
    response = case.call(base_url=server.base_url, session=session, headers=headers, timeout=30)
    SENT[variant][f"{case.operation.method.upper()} {case.operation.path}"] += 1
    case.validate_response(response, headers=headers)
    if response.status_code >= 400:  # every error, documented or not, is a Problem
        assert_problem(response.status_code, header(response, "content-type"), response.content)


@given(case=schema["/v1/probe-reports"]["POST"].as_strategy())
@settings(SETTINGS, max_examples=25)
def test_accepted_reports_read_back(
    case: schemathesis.Case, variant: str, server: LiveServer, session: requests.Session
) -> None:
    """Whatever POST /v1/probe-reports accepts, GET returns: conforming, and the same report
    (as the server reads it: advisor.fleet.intake.as_stored). Sent with a current
    created_at: the server refuses times more than a year old or in the future."""
    if isinstance(case.body, dict):
        case.body["created_at"] = dt.datetime.now(dt.UTC).isoformat()
    created = case.call(base_url=server.base_url, session=session, headers=auth(), timeout=30)
    SENT[variant]["POST /v1/probe-reports"] += 1
    case.validate_response(created, headers=auth())
    if created.status_code == 413:  # a schema-valid report can still be over the size limit
        return
    sent = ProbeReport.model_validate(case.body)
    try:  # what the server stores: its reading of the report (advisor.fleet.intake)
        expected = as_stored(sent, SHIPPED).model_dump(mode="json")
    except InputError:  # a host name that could be mistaken for another: refused
        assert created.status_code == 422, created.text
        return
    # 200: the same report (with the same Idempotency-Key) was generated before: stored once
    assert created.status_code in (200, 201), created.text
    report_id = created.json()["id"]
    read = schema["/v1/probe-reports/{report_id}"]["GET"].Case(
        path_parameters={"report_id": report_id}
    )
    reader = auth(READ_TOKENS[variant] or TOKEN)  # unset: any token is ignored, the read is open
    got = read.call(base_url=server.base_url, session=session, headers=reader, timeout=30)
    SENT[variant]["GET /v1/probe-reports/{report_id}"] += 1
    read.validate_response(got, headers=reader)
    assert got.status_code == 200, got.text
    assert got.json()["report"] == expected


# --- explicit cases against the live server ---------------------------------------------------


def conforms(method: str, path: str, server: LiveServer, **kwargs: Any) -> schemathesis.Response:
    """Send one hand-written request and validate it against the spec like a generated one."""
    case = schema[path][method].Case(**kwargs)
    response = case.call(base_url=server.base_url, headers=auth(), timeout=30)
    case.validate_response(response, headers=auth())
    return response


def test_known_good_requests_conform(server: LiveServer) -> None:
    assert conforms("GET", "/readyz", server).status_code == 200
    metrics = conforms("GET", "/metrics", server)
    assert "advisor_http_requests_total" in metrics.text
    path = "/v1/accelerators/{accelerator_id}"
    h100 = conforms("GET", path, server, path_parameters={"accelerator_id": "h100-sxm"})
    assert h100.json()["id"] == "h100-sxm"
    types = conforms("GET", "/v1/instance-types", server, query={"accelerator": "h100-sxm"}).json()
    assert types, "the shipped catalog has H100 instance types"
    one = conforms(
        "GET",
        "/v1/instance-types/{instance_type_id}",
        server,
        path_parameters={"instance_type_id": types[0]["id"]},
    )
    assert one.json() == types[0]
    example = SPEC["paths"]["/v1/recommendations"]["post"]["requestBody"]["content"][
        "application/json"
    ]["example"]
    result = conforms("POST", "/v1/recommendations", server, body=example).json()
    assert result["recommendations"], result
    assert conforms("POST", "/v1/catalog/reload", server).json()["reloaded"] is True


def test_stored_report_round_trip(server: LiveServer) -> None:
    created = conforms("POST", "/v1/probe-reports", server, body=valid_report("contract-rt"))
    assert created.status_code == 201
    stored = created.json()
    assert header(created, "location") == f"/v1/probe-reports/{stored['id']}"
    full = conforms(
        "GET", "/v1/probe-reports/{report_id}", server, path_parameters={"report_id": stored["id"]}
    ).json()
    assert full["host"] == "contract-rt" and full["report"]["verdict"] == "pass"
    page = conforms("GET", "/v1/probe-reports", server, query={"host": "contract-rt"}).json()
    assert [item["id"] for item in page["items"]] == [stored["id"]]
    fleet = conforms("GET", "/v1/fleet/summary", server, query={"accelerator": "h100-sxm"}).json()
    assert fleet and fleet[0]["accelerator"] == "h100-sxm"


def test_unknown_recommendation_field_is_named(client: httpx.Client) -> None:
    r = client.post(
        "/v1/recommendations", json={"workload": "large_scale_training", "memory_gbs": 80}
    )
    assert r.status_code == 422
    problem = assert_problem(r.status_code, r.headers["content-type"], r.content)
    assert {"field": "memory_gbs", "message": "unknown field (did you mean 'memory_gb'?)"} in (
        problem["errors"]
    )
    assert "memory_gbs" in problem["detail"]


def test_write_without_token_is_401(client: httpx.Client) -> None:
    for path, body in (("/v1/probe-reports", valid_report()), ("/v1/catalog/reload", None)):
        r = client.post(path, json=body)
        assert r.status_code == 401, path
        assert r.headers["www-authenticate"] == "Bearer"
        # a body answered before it was read: not kept for the next request (which, sent on it
        # while the server dropped the rest and closed, was lost under load); none: kept
        assert r.headers.get("connection") == ("close" if body else None), path
        assert_problem(r.status_code, r.headers["content-type"], r.content)


GUARDED_READS = ("/v1/probe-reports", "/v1/utilisation-reports", "/v1/fleet/summary", "/v1/review")


def test_guarded_read_needs_a_token_only_when_read_tokens_are_set(
    variant: str, server: LiveServer
) -> None:
    """With ADVISOR_READ_TOKENS set, what names hosts needs a token (401 without one, 403 with a
    wrong one); unset, it is open. Either answer is documented."""
    read_token = READ_TOKENS[variant]
    for path in GUARDED_READS:
        case = schema[path]["GET"].Case()
        r = case.call(base_url=server.base_url, timeout=30)
        case.validate_response(r)
        if read_token is None:
            assert r.status_code == 200, (path, r.text)
            continue
        assert r.status_code == 401, path
        assert header(r, "www-authenticate") == "Bearer"
        assert_problem(r.status_code, header(r, "content-type"), r.content)
        wrong = case.call(base_url=server.base_url, headers=auth("not-" + read_token))
        case.validate_response(wrong, headers=auth("not-" + read_token))
        assert wrong.status_code == 403, path
        for token in (read_token, TOKEN):  # a read token, or any write token
            assert case.call(base_url=server.base_url, headers=auth(token)).status_code == 200


def test_write_with_wrong_token_is_403(client: httpx.Client) -> None:
    r = client.post("/v1/probe-reports", json=valid_report(), headers=auth("not-" + TOKEN))
    assert r.status_code == 403
    assert_problem(r.status_code, r.headers["content-type"], r.content)
    r = client.post("/v1/catalog/reload", headers=auth("not-" + TOKEN))
    assert r.status_code == 403


def test_body_over_limit_is_413(client: httpx.Client) -> None:
    body = json.dumps({"workload": "x" * MAX_BODY_BYTES}).encode()
    for path, headers in (("/v1/recommendations", {}), ("/v1/probe-reports", auth())):
        r = client.post(path, content=body, headers={"content-type": "application/json", **headers})
        assert r.status_code == 413, (path, r.text)
        problem = assert_problem(r.status_code, r.headers["content-type"], r.content)
        assert str(MAX_BODY_BYTES) in problem["detail"]


def test_chunked_body_over_limit_is_413(client: httpx.Client) -> None:
    """No Content-Length to trust: the limit must still hold, and still answer 413."""
    body = json.dumps({"workload": "x" * MAX_BODY_BYTES}).encode()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 4096):
            yield body[start : start + 4096]

    r = client.post(
        "/v1/recommendations", content=chunks(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413, r.text
    assert_problem(r.status_code, r.headers["content-type"], r.content)


@pytest.mark.parametrize(("method", "path"), JSON_BODY_OPERATIONS)
def test_undecodable_json_body_is_a_documented_problem(
    method: str, path: str, client: httpx.Client
) -> None:
    """Bytes that are not UTF-8, sent as application/json: a documented error, as a Problem."""
    r = client.request(
        method,
        path,
        content=b"\xff\xfe{\x93}",
        headers={"content-type": "application/json", **auth()},
    )
    assert 400 <= r.status_code < 500, r.text
    schema[path][method].Case().validate_response(r)
    assert_problem(r.status_code, r.headers["content-type"], r.content)


def test_unknown_accelerator_suggests_the_closest(client: httpx.Client) -> None:
    r = client.get("/v1/accelerators/h100-sxn")
    assert r.status_code == 404
    problem = assert_problem(r.status_code, r.headers["content-type"], r.content)
    assert "did you mean 'h100-sxm'" in problem["detail"]


# --- must run last: the generated tests above have filled SENT --------------------------------


def test_generated_request_count(variant: str) -> None:
    sent = SENT[variant]
    if not sent:
        pytest.skip("the generated contract tests were not selected in this run")
    total = sum(sent.values())
    assert total >= MIN_REQUESTS, f"{variant}: only {total} generated requests: {dict(sent)}"
    missing = [op for op in OPERATIONS if not sent[op]]
    assert not missing, f"{variant}: operations never exercised: {missing}"
    print(f"\n{variant}: {total} generated requests: {dict(sorted(sent.items()))}")
