"""What anyone may ask without a token costs little and reads the store at most once a second:
filtered catalog listings from entries encoded once per catalog, /readyz and /metrics sharing
one reading of the store, the server's paths worked out once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from advisor.api import create_app
from advisor.api.public_text import Redactor
from advisor.api.routes.catalog import _encode_all
from advisor.api.state import Recent
from advisor.catalog import list_accelerators, list_instance_types, load_catalog
from advisor.catalog.models import Accelerator, InstanceType
from advisor.catalog.queries import region_matches
from advisor.store import StoreUnreachable
from tests.test_api import settings

TYPES = TypeAdapter(list[InstanceType])
ACCELERATORS = TypeAdapter(list[Accelerator])


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with TestClient(create_app(settings(tmp_path_factory.mktemp("anon")))) as c:
        yield c


@pytest.mark.parametrize(
    "query",
    [
        {"provider": "aws"},
        {"region": "us-east-1"},  # narrowed to one region's prices: copies of the entries
        {"region": "europe-west4"},
        {"accelerator": "h100-sxm"},
        {"min_gpus": 8, "max_hourly_usd": 60},  # narrowed to the budget's prices
        {"provider": "gcp", "max_hourly_usd": 5},
        {"max_hourly_usd": 0.5},
    ],
)
def test_filtered_instance_types_are_the_bytes_of_their_list(
    client: TestClient, query: dict[str, Any]
) -> None:
    """The answer is what pydantic makes of the filtered list as one array, byte for byte: the
    entries (and the narrowed ones' prices) joined from their kept JSON change nothing."""
    catalog = load_catalog()
    expected = TYPES.dump_json(list_instance_types(catalog, **query))
    got = client.get("/v1/instance-types", params=query)
    assert got.status_code == 200 and got.headers["content-type"] == "application/json"
    assert got.content == expected
    assert json.loads(got.content), query  # none of the filters is empty here


@pytest.mark.parametrize("query", [{"vendor": "nvidia"}, {"form_factor": "edge"}])
def test_filtered_accelerators_are_the_bytes_of_their_list(
    client: TestClient, query: dict[str, Any]
) -> None:
    expected = ACCELERATORS.dump_json(list_accelerators(load_catalog(), **query))
    got = client.get("/v1/accelerators", params=query)
    assert got.status_code == 200 and got.content == expected and json.loads(got.content)


def test_every_shipped_instance_type_is_kept_in_parts_around_its_prices() -> None:
    """A listing narrowed to some prices is put together from parts: none of the shipped
    entries falls back to being encoded for each request."""
    encoded = _encode_all("instance_types", load_catalog())
    assert encoded and all(e.head and e.tail for e in encoded.values())
    assert all(len(e.prices) == len(e.entry.prices) for e in encoded.values())


@pytest.mark.parametrize(
    "spec", ["us-east-1", "us-east-1,eu-west-1", "europe-*", "us-*,asia-east1", "nowhere"]
)
def test_the_region_filter_admits_what_region_matches_admits(spec: str) -> None:
    """Narrowed by the set of regions the filter admits, worked out once: the same prices as
    asking region_matches of each."""
    catalog = load_catalog()
    by_hand = []
    for it in sorted(catalog.instance_types.values(), key=lambda i: (i.provider, i.id)):
        prices = tuple(p for p in it.prices if region_matches(spec, p.region))
        if prices:
            by_hand.append((it.id, prices))
    found = [(it.id, it.prices) for it in list_instance_types(catalog, region=spec)]
    assert found == by_hand
    assert found or spec == "nowhere"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_reading_is_shared_within_its_interval_and_a_failure_never_kept() -> None:
    clock, values, fail = Clock(), iter(range(10)), [False]

    def read() -> int:
        if fail[0]:
            raise StoreUnreachable("down")
        return next(values)

    recent = Recent(read, interval_s=1.0, clock=clock)
    assert [recent.get(), recent.get()] == [0, 0]
    clock.now += 0.99
    assert recent.get() == 0
    clock.now += 0.01  # a second after the reading
    assert recent.get() == 1
    clock.now += 1.0
    fail[0] = True
    for _ in range(2):  # each caller reads again: the failure was not kept
        with pytest.raises(StoreUnreachable):
            recent.get()
    fail[0] = False
    assert recent.get() == 2 and recent.readings == 3


def test_readyz_and_metrics_floods_read_the_store_once(client: TestClient) -> None:
    """Twenty /readyz and twenty /metrics within a second: one ping and one count of the store
    (before: one statement each, and a database connection each from the service's pool)."""
    store = client.app.state.advisor.store  # type: ignore[attr-defined]
    calls = {"ping": 0, "count": 0}
    ping, count = store.ping, store.count

    def counted(name: str, fn: Any) -> Any:
        def call() -> Any:
            calls[name] += 1
            return fn()

        return call

    state = client.app.state.advisor  # type: ignore[attr-defined]
    clock = Clock()
    state.ping = Recent(counted("ping", ping), clock=clock)
    state.report_count = Recent(counted("count", count), clock=clock)
    for _ in range(20):
        assert client.get("/readyz").json()["database"]["status"] == "ok"
        assert "advisor_probe_reports_in_store 0.0" in client.get("/metrics").text
    assert calls == {"ping": 1, "count": 1}
    clock.now += 1.0
    client.get("/readyz")
    client.get("/metrics")
    assert calls == {"ping": 2, "count": 2}


def test_the_redactor_names_known_directories_and_shortens_other_paths(tmp_path: Path) -> None:
    """Every spelling of a known directory (as given, absolute, resolved through a link) by its
    name, a subdirectory before its parent; any other absolute path by its last component."""
    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    redact = Redactor.of({"ADVISOR_CATALOG": str(tmp_path / "link"), "sub": str(real / "sub")})
    text = f"{real}/a.yaml: bad; {tmp_path}/link/b.yaml; {real}/sub/c.yaml; /etc/x/secret.yaml"
    assert redact(text) == (
        "ADVISOR_CATALOG/a.yaml: bad; ADVISOR_CATALOG/b.yaml; sub/c.yaml; secret.yaml"
    )
