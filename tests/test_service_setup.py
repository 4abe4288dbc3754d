"""What a service can be started on: real databases only; the test double is not shipped."""

from __future__ import annotations

import importlib.util
from pathlib import Path

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
