"""A body's shape is bounded before any validation. Unbounded, deep nesting is a 500
(json.loads raises RecursionError, which the strict parser did not catch) and an object of 90,000
unknown keys costs about 1 s of server CPU (two pydantic passes building 90,000 errors each)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from advisor.api import create_app, strict_json
from advisor.api.settings import Settings
from advisor.api.strict_json import MAX_JSON_DEPTH, MAX_OBJECT_KEYS, _parse_and_check
from advisor.request import RecommendRequest

JSON = {"content-type": "application/json"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/b.db",
        api_tokens=("t",),  # type: ignore[arg-type]
        max_body_bytes=4 * 1024 * 1024,
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


def problem(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = r.json()
    return body


def test_the_limits_are_what_the_messages_say() -> None:
    assert (MAX_JSON_DEPTH, MAX_OBJECT_KEYS) == (32, 1000)


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_deep_arrays_are_a_422_naming_the_limit(client: TestClient, depth: int) -> None:
    body = problem(
        client.post("/v1/recommendations", content="[" * depth + "]" * depth, headers=JSON)
    )
    assert "nested deeper than 32 arrays and objects" in str(body["detail"]), body


def test_deep_objects_inside_a_report_are_a_422_at_the_place(client: TestClient) -> None:
    inner: object = 0
    for _ in range(40):
        inner = {"a": inner}
    r = client.post("/v1/recommendations", json={"workload": "fine_tuning", "memory_gb": inner})
    body = problem(r)
    errors = body["errors"]
    assert isinstance(errors, list) and len(errors) == 1
    # the 33rd level: the top object is level 1, memory_gb's object 2, memory_gb.a 3, ...,
    # memory_gb + 31 "a"s level 33
    assert errors[0]["field"] == "memory_gb" + ".a" * 31, errors
    assert "deeper than 32" in errors[0]["message"]


def test_depth_32_is_allowed_to_reach_validation(client: TestClient) -> None:
    inner: object = 0
    for _ in range(31):  # 31 objects under the top one: 32 levels
        inner = {"a": inner}
    body = problem(
        client.post("/v1/recommendations", json={"workload": "fine_tuning", "memory_gb": inner})
    )
    assert "deeper" not in str(body["detail"])  # the field's own error: not a number


def test_an_object_of_90000_keys_is_refused_by_its_size_before_validation(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused by its shape while parsing: no pydantic pass runs (the two it replaces took about
    1 s; benchmarks/attack_service.py times the refusal)."""

    def never(value: Any, model: Any) -> None:
        raise AssertionError("a 90,000-key body reached validation")

    monkeypatch.setattr(strict_json, "_validate", never)
    text = "{" + ",".join(f'"x{i:06d}":0' for i in range(90_000)) + "}"
    body = problem(client.post("/v1/recommendations", content=text, headers=JSON))
    assert "an object of 90000 keys: at most 1000" in str(body["detail"]), body


def test_unknown_keys_are_counted_and_the_first_named_cheaply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cheaply: pydantic validates the known keys alone, never the 999 unknown ones."""
    validated: list[set[str]] = []
    validate = strict_json._validate

    def recording(value: Any, model: Any) -> None:
        validated.append(set(value))
        validate(value, model)

    monkeypatch.setattr(strict_json, "_validate", recording)
    keys = {f"x{i:03d}": 0 for i in range(999)}
    raw = json.dumps(keys).encode()
    with pytest.raises(Exception) as caught:
        _parse_and_check(raw, RecommendRequest)
    errors = caught.value.errors()  # type: ignore[attr-defined]
    total = caught.value.total  # type: ignore[attr-defined]
    # the missing workload (pydantic, on the known keys alone) and 999 unknown ones
    assert total == 1000
    assert [e["loc"][1] for e in errors[:3]] == ["workload", "x000", "x001"]
    assert len(errors) == 20
    assert validated == [set()]  # one pass, over the known keys: none here


def test_an_unknown_key_beside_valid_ones_is_named_with_a_hint(client: TestClient) -> None:
    r = client.post("/v1/recommendations", json={"workload": "fine_tuning", "memory_gbb": 80})
    body = problem(r)
    errors = body["errors"]
    assert isinstance(errors, list) and [e["field"] for e in errors] == ["memory_gbb"]
    assert "memory_gb" in errors[0]["message"], errors  # did you mean
