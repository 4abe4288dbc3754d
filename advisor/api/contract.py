"""The contract names the loaded catalog's ids: enums in the OpenAPI document.

Workloads, regions, providers, model presets, accelerator and instance type ids are data, so a
client (or schemathesis) reading the document knows which values the service accepts; the live
/openapi.json states the catalog the service loaded, openapi.yaml the shipped one.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI

from advisor.api.state import CatalogHolder
from advisor.catalog import Catalog

# (component schema, property) -> which catalog ids it takes
BODY_FIELDS = {
    ("RecommendRequest", "workload"): "workloads",
    ("RecommendRequest", "model"): "models",
    ("RecommendRequest", "region"): "regions",
    ("RecommendRequest", "provider"): "providers",
    ("EstimateRequest", "workload"): "workloads",
    ("EstimateRequest", "model"): "models",
    ("EstimateRequest", "region"): "regions",
    ("EstimateRequest", "instance_type"): "gpu_instance_types",  # estimates are for GPUs
    ("EstimateRequest", "accelerator"): "accelerators",
}
# (path, parameter) -> which catalog ids it takes
PARAMETERS = {
    ("/v1/accelerators/{accelerator_id}", "accelerator_id"): "accelerators",
    ("/v1/instance-types/{instance_type_id}", "instance_type_id"): "instance_types",
    ("/v1/instance-types", "provider"): "providers",
    ("/v1/instance-types", "region"): "regions",
    ("/v1/instance-types", "accelerator"): "accelerators",
    ("/v1/review", "region"): "regions",
}


def catalog_ids(catalog: Catalog) -> dict[str, list[str]]:
    return {
        "workloads": sorted(catalog.workloads),
        "models": sorted(catalog.models),
        "regions": sorted(catalog.regions),
        "providers": sorted(catalog.providers),
        "accelerators": sorted(catalog.accelerators),
        "instance_types": sorted(catalog.instance_types),
        "gpu_instance_types": sorted(
            i.id for i in catalog.instance_types.values() if i.accelerator is not None
        ),
    }


def state_catalog(spec: dict[str, Any], catalog: Catalog) -> None:
    """Put the catalog's ids into `spec` as enums, in place, and the rules that follow from its
    workload profiles: only workloads sized from a model take a model (estimates need one)."""
    ids = catalog_ids(catalog)
    schemas = spec.get("components", {}).get("schemas", {})
    for (component, prop), kind in BODY_FIELDS.items():
        _enum(schemas[component]["properties"][prop], ids[kind])
    unsized = sorted(w for w, p in catalog.workloads.items() if p.sizing == "none")
    sized = sorted(set(catalog.workloads) - set(unsized))
    _enum(schemas["EstimateRequest"]["properties"]["workload"], sized)
    recommend = schemas["RecommendRequest"]
    recommend.setdefault("allOf", []).append(
        {
            "if": {"required": ["workload"], "properties": {"workload": {"enum": unsized}}},
            "then": {
                "not": {
                    "anyOf": [
                        _given("model", "string"),
                        _given("params_b", "number"),
                        _given("hf_config", "object"),
                    ]
                }
            },
        }
    )
    for path, item in spec.get("paths", {}).items():
        for operation in item.values():
            for param in operation.get("parameters", []):
                takes = PARAMETERS.get((path, param["name"]))
                if takes is not None:
                    _enum(param["schema"], ids[takes])


# The scheme of the reads that name hosts (advisor.api.deps._read_bearer).
READ_SCHEME = "ReadToken"


def optional_read_token(spec: dict[str, Any]) -> None:
    """The reads guarded by READ_SCHEME need a token only when ADVISOR_READ_TOKENS is set: their
    security says so, in place, with the empty requirement beside the token (OpenAPI's "or no
    credentials"). Stated as required, a client of an open deployment (read tokens unset) would
    be told to send a token it has none of, and schemathesis would call the open read a hole."""
    for item in spec.get("paths", {}).values():
        for operation in item.values():
            security = operation.get("security")
            if security and {READ_SCHEME: []} in security and {} not in security:
                security.append({})


def _given(name: str, kind: str) -> dict[str, Any]:
    return {"required": [name], "properties": {name: {"type": kind}}}


def _enum(schema: dict[str, Any], values: list[str]) -> None:
    """The enum goes on the string branch (a nullable field is anyOf [string, null])."""
    for branch in schema.get("anyOf", [schema]):
        if branch.get("type") == "string":
            branch["enum"] = values
            for key in ("minLength", "maxLength", "pattern"):  # the enum says it all
                branch.pop(key, None)


def install(app: FastAPI, holder: CatalogHolder) -> None:
    """/openapi.json states the catalog loaded now (rebuilt after a reload)."""
    build = app.openapi
    built: dict[int, dict[str, Any]] = {}

    def openapi() -> dict[str, Any]:
        generation = holder.generation
        if generation not in built:
            app.openapi_schema = None  # the generic document, built again
            spec = copy.deepcopy(build())
            state_catalog(spec, holder.catalog)
            optional_read_token(spec)
            built.clear()
            built[generation] = spec
        app.openapi_schema = built[generation]
        return built[generation]

    app.openapi = openapi  # type: ignore[method-assign]
