"""Catalog listing and lookup."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
from advisor.catalog.models import Accelerator, FormFactor, InstanceType, Price
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
) -> Response:
    if form_factor is None and vendor is None:
        return _unfiltered("accelerators", catalog, lambda: list_accelerators(catalog))
    return _listing("accelerators", catalog, list_accelerators(catalog, form_factor, vendor))


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
) -> Response:
    for kind, value, valid in (
        ("provider", provider, catalog.providers),
        ("region", region, catalog.regions),
        ("accelerator", accelerator, catalog.accelerators),
    ):
        if value is not None and value not in valid:
            raise InputError(unknown(kind, value, valid))
    if (provider, region, accelerator, min_gpus, max_hourly_usd) == (None,) * 5:
        return _unfiltered("instance_types", catalog, lambda: list_instance_types(catalog))
    found = list_instance_types(catalog, provider, region, accelerator, min_gpus, max_hourly_usd)
    return _listing("instance_types", catalog, found)


ACCELERATOR, INSTANCE_TYPE, PRICE = (
    TypeAdapter(Accelerator),
    TypeAdapter(InstanceType),
    TypeAdapter(Price),
)


def _unfiltered(name: str, catalog: Catalog, listing: Callable[[], list[Any]]) -> Response:
    """An unfiltered listing, joined once per catalog (the instance types' 1.3 MB took 12 ms
    of CPU to encode for every request)."""
    body = built_for(catalog, name, lambda: _joined(name, catalog, listing()))
    return Response(body, media_type="application/json")


def _listing(name: str, catalog: Catalog, items: list[Any]) -> Response:
    """A filtered listing: its entries' JSON, each encoded once per catalog, joined. Encoded for
    each request, one provider's listing cost 1.35 ms of server CPU, eight /healthz answers, and
    any client may ask with every filter in turn (benchmarks/anonymous_reads.sh)."""
    return Response(_joined(name, catalog, items), media_type="application/json")


def _joined(name: str, catalog: Catalog, items: list[Any]) -> bytes:
    """`items` as the JSON array the list's own encoding gives: "[", the entries' JSON joined
    by ",", "]" (pydantic writes no space between them), each entry's parts encoded once per
    catalog (_Encoded)."""
    encoded = built_for(catalog, f"{name} entries", lambda: _encode_all(name, catalog))
    return b"[" + b",".join(_entry_json(encoded, item) for item in items) + b"]"


@dataclass(frozen=True, slots=True)
class _Encoded:
    """One catalog entry's JSON, and for an instance type the parts of it around its prices and
    each price's own JSON: a listing filtered by region or budget narrows an entry to some of
    its prices (a copy of it: queries.list_instance_types), which is then the same bytes as
    head + those prices' JSON + tail."""

    entry: Any
    whole: bytes
    head: bytes = b""
    tail: bytes = b""
    prices: Mapping[int, bytes] = field(default_factory=dict)  # by the Price object's id()


_PRICES_EMPTY = b'"prices":[]'


def _encode_all(name: str, catalog: Catalog) -> dict[str, _Encoded]:
    if name == "accelerators":
        return {k: _Encoded(a, ACCELERATOR.dump_json(a)) for k, a in catalog.accelerators.items()}
    return {key: _encode_instance_type(it) for key, it in catalog.instance_types.items()}


def _encode_instance_type(it: InstanceType) -> _Encoded:
    """The entry whole, and the parts around its prices where they put the whole together
    again (else a narrowed copy is encoded as it comes: no head kept)."""
    whole = INSTANCE_TYPE.dump_json(it)
    empty = INSTANCE_TYPE.dump_json(it.model_copy(update={"prices": ()}))
    head, found, tail = empty.partition(_PRICES_EMPTY)
    head, tail = head + b'"prices":[', b"]" + tail
    prices = {id(price): PRICE.dump_json(price) for price in it.prices}
    if not found or head + b",".join(prices[id(p)] for p in it.prices) + tail != whole:
        return _Encoded(it, whole)
    return _Encoded(it, whole, head, tail, prices)


def _entry_json(encoded: Mapping[str, _Encoded], item: Any) -> bytes:
    """An entry's JSON from its kept parts: the whole for the catalog's own object, the parts
    around the prices for a copy narrowed to some of its prices."""
    kept = encoded[item.id]
    if item is kept.entry:
        return kept.whole
    if not kept.head:
        return INSTANCE_TYPE.dump_json(item)
    return kept.head + b",".join(kept.prices[id(price)] for price in item.prices) + kept.tail


@router.get(
    "/instance-types/{instance_type_id}",
    operation_id="getInstanceType",
    response_model=InstanceType,
    responses=responses(404, 422),
)
def instance_type(catalog: CatalogDep, instance_type_id: PathId) -> InstanceType:
    return get_instance_type(catalog, instance_type_id)
