"""What a service can be started on: real databases only; the test double is not shipped."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from advisor.api import create_app
from advisor.api.openapi import spec
from advisor.api.settings import Settings
from advisor.store import StoreError, open_store


@pytest.mark.parametrize("url", ["memory://", "mysql://db/x"])
def test_only_sqlite_and_postgresql_urls_open_a_store(url: str) -> None:
    scheme = url.split(":", 1)[0]
    with pytest.raises(StoreError) as caught:
        open_store(url)
    assert str(caught.value) == (
        f"unsupported database URL {scheme!r}: use sqlite:///PATH or postgresql://..."
    )


def test_a_service_cannot_start_on_the_test_double() -> None:
    with pytest.raises(StoreError, match="unsupported database URL 'memory'"):
        create_app(Settings(database_url="memory://"))


def test_the_in_memory_store_is_not_in_the_package() -> None:
    assert importlib.util.find_spec("advisor.store.memory") is None
    assert importlib.util.find_spec("tests.memory_store") is not None


def test_generating_the_spec_writes_no_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ADVISOR_DATABASE_URL", raising=False)
    paths = spec()["paths"]
    assert "/v1/probe-reports" in paths and "/readyz" in paths
    assert list(tmp_path.iterdir()) == []


def test_the_first_request_of_a_route_with_a_body_logs_no_pydantic_warning(
    tmp_path: Path,
) -> None:
    """FastAPI gives a body parameter its name as an alias, which pydantic ignores in a type
    adapter and warns of when it builds one: at the first validation, after FastAPI's own filter
    for it. The service's log showed it at the first request of each route with a body; no
    other warning is hidden."""
    import asyncio
    import warnings

    import httpx
    from pydantic.warnings import UnsupportedFieldAttributeWarning

    from advisor.api import create_app
    from advisor.api.settings import Settings

    async def first_requests(app: Any) -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            posted = [
                await client.post("/v1/recommendations", json={"workload": "fine_tuning"}),
                await client.post("/v1/estimates", json={"workload": "fine_tuning"}),
            ]
        return [r.status_code for r in posted]

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        app = create_app(Settings(database_url=f"sqlite:///{tmp_path}/w.db"))  # type: ignore[arg-type]
        codes = asyncio.run(first_requests(app))
        warnings.warn("a warning of another kind", UnsupportedFieldAttributeWarning, stacklevel=1)
    app.state.advisor.store.close()
    assert codes[0] == 200 and codes[1] in (200, 422), codes
    shown = [
        str(w.message) for w in seen if issubclass(w.category, UnsupportedFieldAttributeWarning)
    ]
    assert shown == ["a warning of another kind"], shown
