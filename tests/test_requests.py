"""Request models: each endpoint accepts exactly its own fields, hints come from that request's
fields only, the CLI and the API word a bad field the same way, and `purchase: any` means either
purchase option in the CLI, in estimates and in the API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.catalog import Catalog
from advisor.errors import InputError
from advisor.planning.estimate import estimate
from advisor.request import EstimateRequest, RecommendRequest, parse_request
from tests.factories import load_mini, mini_catalog_data, write_catalog

# The mini catalog's big8 prices (tests/factories.py), written out: on demand $98/h in
# us-east-1 and $110/h in eu-west-1, spot $40/h in us-east-1.
BIG8_ON_DEMAND_USD = 98.0
BIG8_SPOT_USD = 40.0


def _sized_fine_tuning(data: dict[str, Any]) -> None:
    for w in data["workloads"]:
        if w["id"] == "fine_tuning":
            w["sizing"] = "training"


@pytest.fixture(scope="module")
def catalog_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = mini_catalog_data()
    _sized_fine_tuning(data)
    return write_catalog(tmp_path_factory.mktemp("requests") / "cat", data)


@pytest.fixture(scope="module")
def mini_sized(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return load_mini(tmp_path_factory.mktemp("mini"), _sized_fine_tuning)


@pytest.fixture
def client(tmp_path: Path, catalog_dir: Path) -> Iterator[TestClient]:
    s = Settings(
        database_url=f"sqlite:///{tmp_path}/api.db",
        catalog_dir=str(catalog_dir),
        catalog_mode="replace",
    )
    with TestClient(create_app(s)) as c:
        yield c


def _errors(response: Any) -> list[tuple[str, str]]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    return [(e["field"], e["message"]) for e in response.json()["errors"]]


# Fields each request must refuse, with the hint that must (or must not) come with it.
ESTIMATE_ONLY_REFUSES = ["max_hourly_usd", "power_budget_w", "limit", "objective", "memory_gb"]


@pytest.mark.parametrize("field", ESTIMATE_ONLY_REFUSES)
def test_estimates_refuse_recommendation_fields(client: TestClient, field: str) -> None:
    body = {"workload": "fine_tuning", "params_b": 1, "instance_type": "big8", field: 1}
    assert _errors(client.post("/v1/estimates", json=body)) == [(field, "unknown field")]


@pytest.mark.parametrize("field", ["instance_type", "accelerator", "gpus_per_node"])
def test_recommendations_refuse_estimate_fields(client: TestClient, field: str) -> None:
    body = {"workload": "fine_tuning", field: "x"}
    assert _errors(client.post("/v1/recommendations", json=body)) == [(field, "unknown field")]


@pytest.mark.parametrize(
    ("path", "typo", "hint"),
    [
        # a probe report's field is no hint for a recommendation typo
        ("/v1/recommendations", "verdikt", ""),
        ("/v1/recommendations", "memry_gb", " (did you mean 'memory_gb'?)"),
        # memory_gb is not an estimate field, so it is no hint there
        ("/v1/estimates", "memry_gb", ""),
        ("/v1/estimates", "instance_typ", " (did you mean 'instance_type'?)"),
    ],
)
def test_unknown_field_hints_come_from_that_request(
    client: TestClient, path: str, typo: str, hint: str
) -> None:
    body = {"workload": "fine_tuning", "params_b": 1, typo: 1}
    if path.endswith("estimates"):
        body["instance_type"] = "big8"
    assert _errors(client.post(path, json=body)) == [(typo, f"unknown field{hint}")]


BAD_BODIES = [
    {"workload": "fine_tuning", "memory_gb": "80GB"},
    {"workload": "fine_tuning", "power_budget_w": -5},
    {"workload": "fine_tuning", "purchase": "yearly"},
    {"workload": "fine_tuning", "memry_gb": 80},
    {"memory_gb": 80},
]


@pytest.mark.parametrize("body", BAD_BODIES, ids=[str(sorted(b)) for b in BAD_BODIES])
def test_cli_and_api_word_a_bad_field_the_same(client: TestClient, body: dict[str, Any]) -> None:
    (field, message) = _errors(client.post("/v1/recommendations", json=body))[0]
    with pytest.raises(InputError) as raised:
        parse_request(RecommendRequest, body)
    assert f"{field}: {message}" in str(raised.value)
    # and the sentence names the field's problem, not just a type code
    assert field in {*body, "workload"} and len(message) > len("Field required") - 1


def test_a_unit_in_a_number_gets_the_unit_hint(client: TestClient) -> None:
    body = {"workload": "fine_tuning", "memory_gb": "80GB"}
    ((field, message),) = _errors(client.post("/v1/recommendations", json=body))
    assert field == "memory_gb" and "the unit is in the field name" in message


# --- purchase: one rule (missing = on_demand; "any" or null = either) ---------------------


@pytest.mark.parametrize(
    ("purchase", "hourly_usd"),
    [(None, BIG8_SPOT_USD), ("any", BIG8_SPOT_USD), ("spot", BIG8_SPOT_USD)],
)
def test_estimate_purchase_any_takes_the_cheapest_option(
    mini_sized: Catalog, purchase: str | None, hourly_usd: float
) -> None:
    # 1B parameters fit one 8 x 80 GB node: the hourly price is one node's.
    req = EstimateRequest(
        workload="fine_tuning",
        params_b=1,
        tokens=1e9,
        instance_type="big8",
        purchase=purchase,  # type: ignore[arg-type]
    )
    assert _field(estimate(mini_sized, req), "hourly_usd") == hourly_usd


def test_estimate_purchase_defaults_to_on_demand(mini_sized: Catalog) -> None:
    req = EstimateRequest(workload="fine_tuning", params_b=1, tokens=1e9, instance_type="big8")
    assert _field(estimate(mini_sized, req), "hourly_usd") == BIG8_ON_DEMAND_USD


def _field(result: object, name: str) -> Any:
    return result[name] if isinstance(result, dict) else getattr(result, name)


# big8 is the only instance with the 900 GB/s link: its cheapest offering of either kind is spot.
NVSWITCH = {"workload": "fine_tuning", "memory_gb": 80, "interconnect_gb_s": 900}


@pytest.mark.parametrize(
    ("purchase", "expected"),
    [
        ("any", ("spot", BIG8_SPOT_USD)),
        (None, ("spot", BIG8_SPOT_USD)),
        ("on_demand", ("on_demand", BIG8_ON_DEMAND_USD)),
    ],
)
def test_api_purchase_any_means_either(
    client: TestClient, purchase: str | None, expected: tuple[str, float]
) -> None:
    r = client.post("/v1/recommendations", json={**NVSWITCH, "purchase": purchase})
    assert r.status_code == 200, r.text
    top = r.json()["recommendations"][0]
    assert (top["purchase"], top["hourly_usd"]) == expected


def test_api_leaving_purchase_out_means_on_demand(client: TestClient) -> None:
    top = client.post("/v1/recommendations", json=NVSWITCH).json()["recommendations"][0]
    assert (top["purchase"], top["hourly_usd"]) == ("on_demand", BIG8_ON_DEMAND_USD)


def _cli(catalog_dir: Path, *args: str) -> Any:
    env = {**os.environ, "COLUMNS": "200", "ADVISOR_MAX_PRICE_AGE_DAYS": "3650"}
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "advisor",
            "--catalog",
            str(catalog_dir),
            "--replace-catalog",
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_cli_purchase_any_means_either_in_recommend_and_estimate(catalog_dir: Path) -> None:
    rec = _cli(catalog_dir, "recommend", "--workload", "fine_tuning", "--memory-gb", "80",
               "--interconnect-gb-s", "900", "--purchase", "any", "--json")  # fmt: skip
    top = rec["recommendations"][0]
    assert (top["purchase"], top["hourly_usd"]) == ("spot", BIG8_SPOT_USD)
    est = _cli(catalog_dir, "estimate", "--workload", "fine_tuning", "--params-b", "1",
               "--tokens", "1e9", "--instance-type", "big8", "--purchase", "any", "--json")  # fmt: skip
    assert est["hourly_usd"] == BIG8_SPOT_USD


@pytest.mark.parametrize("path", ["/v1/estimates", "/v1/recommendations"])
def test_a_cross_field_rule_of_the_model_names_its_field_in_http(
    client: TestClient, path: str
) -> None:
    """One output token has no inter-token latency: the model's rule, the same field the CLI
    names --max-itl-ms, here by its JSON key."""
    body: dict[str, Any] = {"workload": "fine_tuning", "params_b": 1, "output_tokens": 1}
    body |= (
        {"max_itl_ms": 20, "instance_type": "big8"} if "estimates" in path else {"max_itl_ms": 20}
    )
    assert _errors(client.post(path, json=body)) == [
        (
            "max_itl_ms",
            "one output token has no inter-token latency; drop it or raise output_tokens, got 20",
        )
    ]
