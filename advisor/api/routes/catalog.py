"""Catalog listing and lookup."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response
from pydantic import TypeAdapter

from advisor.api.deps import CatalogDep
from advisor.api.problems import responses
from advisor.api.state import built_for
from advisor.catalog import (
    Catalog,
    get_accelerator,
    get_instance_type,
    list_accelerators,
    list_instance_types,
)
from advisor.catalog.models import Accelerator, FormFactor, InstanceType
from advisor.did_you_mean import unknown
from advisor.errors import InputError
from advisor.request import ID_MAX_CHARS

router = APIRouter(prefix="/v1", tags=["catalog"])

# An id in the path is bounded as a request's ids are: an unknown one is compared with every
# known id for a "did you mean", which over a 16 kB id (the header limit) costs twice an answer.
PathId = Annotated[str, Path(max_length=ID_MAX_CHARS)]


@router.get(
    "/accelerators",
    operation_id="listAccelerators",
    response_model=list[Accelerator],
    responses=responses(422),
)
def accelerators(
    catalog: CatalogDep,
    form_factor: FormFactor | None = None,
    vendor: Annotated[str | None, Query(max_length=100)] = None,
) -> list[Accelerator] | Response:
    if form_factor is None and vendor is None:
        return _unfiltered("accelerators", catalog, lambda: list_accelerators(catalog))
    return list_accelerators(catalog, form_factor, vendor)


@router.get(
    "/accelerators/{accelerator_id}",
    operation_id="getAccelerator",
    response_model=Accelerator,
    responses=responses(404, 422),
)
def accelerator(catalog: CatalogDep, accelerator_id: PathId) -> Accelerator:
    return get_accelerator(catalog, accelerator_id)


@router.get(
    "/instance-types",
    operation_id="listInstanceTypes",
    response_model=list[InstanceType],
    responses=responses(422),
)
def instance_types(
    catalog: CatalogDep,
    provider: Annotated[str | None, Query(max_length=100)] = None,
    region: Annotated[str | None, Query(max_length=100)] = None,
    accelerator: Annotated[str | None, Query(max_length=100)] = None,
    min_gpus: Annotated[int | None, Query(ge=0, le=4096)] = None,
    max_hourly_usd: Annotated[float | None, Query(ge=0, le=100000)] = None,
) -> list[InstanceType] | Response:
    for kind, value, valid in (
        ("provider", provider, catalog.providers),
        ("region", region, catalog.regions),
        ("accelerator", accelerator, catalog.accelerators),
    ):
        if value is not None and value not in valid:
            raise InputError(unknown(kind, value, valid))
    if (provider, region, accelerator, min_gpus, max_hourly_usd) == (None,) * 5:
        return _unfiltered("instance_types", catalog, lambda: list_instance_types(catalog))
    return list_instance_types(catalog, provider, region, accelerator, min_gpus, max_hourly_usd)


_LISTS: dict[str, TypeAdapter[Any]] = {
    "accelerators": TypeAdapter(list[Accelerator]),
    "instance_types": TypeAdapter(list[InstanceType]),
}


def _unfiltered(name: str, catalog: Catalog, listing: Callable[[], list[Any]]) -> Response:
    """An unfiltered listing, encoded once per catalog (the instance types' 1.3 MB took 12 ms
    of CPU to encode for every request)."""
    body = built_for(catalog, name, lambda: _LISTS[name].dump_json(listing()))
    return Response(body, media_type="application/json")


@router.get(
    "/instance-types/{instance_type_id}",
    operation_id="getInstanceType",
    response_model=InstanceType,
    responses=responses(404, 422),
)
def instance_type(catalog: CatalogDep, instance_type_id: PathId) -> InstanceType:
    return get_instance_type(catalog, instance_type_id)
