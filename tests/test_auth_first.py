"""Every guarded route answers 401 (no token) or 403 (a token not accepted) before it reads or
parses the body: an anonymous client once had its 1 MiB body parsed and validated (about 1 s of
CPU) and read the schema back from field-by-field 422s."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from advisor.api import create_app
from advisor.api.deps import early_guard
from advisor.api.settings import Settings

WRITE, READ = "write-token", "read-token"
# invalid every way at once: a 422 (or worse) would be the answer were it parsed
JUNK = json.dumps({f"x{i:05d}": {"y": [0] * 3} for i in range(900)})


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("auth") / "a.db"
    settings = Settings(
        database_url=f"sqlite:///{db}",
        api_tokens=(WRITE,),
        read_tokens=(READ,),
    )
    with TestClient(create_app(settings)) as c:
        yield c


def guarded(client: TestClient) -> list[tuple[str, str]]:
    """(method, path) of every route with a token check, ids filled in."""
    out: list[tuple[str, str]] = []
    pending = list(client.app.routes)  # type: ignore[attr-defined]
    while pending:
        route = pending.pop()
        included = getattr(route, "original_router", None)  # an included router's routes
        if included is not None:
            pending.extend(included.routes)
        elif isinstance(route, APIRoute) and early_guard(route) is not None:
            path = route.path.replace("{report_id}", "r1")
            out.extend((method, path) for method in sorted(route.methods or ()))
    return out


def test_the_write_and_read_routes_are_all_guarded(client: TestClient) -> None:
    found = set(guarded(client))
    assert ("POST", "/v1/probe-reports") in found
    assert ("POST", "/v1/utilisation-reports") in found
    assert ("POST", "/v1/catalog/reload") in found
    assert ("GET", "/v1/fleet/summary") in found


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), ({"Authorization": "Bearer nope"}, 403), ({"Authorization": "Basic eA=="}, 401)],
)
def test_every_guarded_route_refuses_before_the_body(
    client: TestClient, headers: dict[str, str], status: int
) -> None:
    for method, path in guarded(client):
        r = client.request(
            method, path, content=JUNK, headers={**headers, "content-type": "application/json"}
        )
        assert r.status_code == status, (method, path, r.text[:300])
        assert r.headers["content-type"] == "application/problem+json"
        assert "errors" not in r.json()  # nothing about the body's fields
        # the body was not read: the server drops the rest and closes (advisor/api/limits.py)
        assert r.headers["connection"] == "close", (method, path)


def test_a_read_token_cannot_write(client: TestClient) -> None:
    r = client.post(
        "/v1/probe-reports",
        content=JUNK,
        headers={"Authorization": f"Bearer {READ}", "content-type": "application/json"},
    )
    assert r.status_code == 403, r.text


def test_with_the_token_the_body_is_checked(client: TestClient) -> None:
    r = client.post(
        "/v1/probe-reports",
        content=JUNK,
        headers={"Authorization": f"Bearer {WRITE}", "content-type": "application/json"},
    )
    assert r.status_code == 422, r.text
    assert "connection" not in r.headers  # the body was read: the connection is kept
    assert "connection" not in client.get("/healthz").headers
