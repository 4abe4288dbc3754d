"""Typed dependencies: the app state, the current catalog, bearer-token authorisation (write
tokens for writes, read tokens for the reads that name hosts, GPUs and processes), and the
Idempotency-Key header of the report uploads.

All are `async def`: they do no I/O, and a plain `def` would cost a thread hop per request.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Iterable
from typing import Annotated, Any

from fastapi import Depends, Header, HTTPException, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, SecretStr

from advisor.api.problems import MAX_FIELD_PROBLEMS
from advisor.api.state import AppState
from advisor.catalog import Catalog
from advisor.store import Store

_bearer = HTTPBearer(auto_error=False, description="A token from ADVISOR_API_TOKENS")
_read_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ReadToken",
    description="A token from ADVISOR_READ_TOKENS, or any token from ADVISOR_API_TOKENS. "
    "Required only when ADVISOR_READ_TOKENS is set; without it these reads are open and the "
    "service logs a warning at start-up.",
)
Credentials = HTTPAuthorizationCredentials | None


async def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.advisor
    return state


StateDep = Annotated[AppState, Depends(get_state)]


async def get_catalog(state: StateDep) -> Catalog:
    return state.catalog.catalog


async def get_store(state: StateDep) -> Store:
    return state.store


CatalogDep = Annotated[Catalog, Depends(get_catalog)]
StoreDep = Annotated[Store, Depends(get_store)]


def _authorise(credentials: Credentials, tokens: Iterable[SecretStr]) -> None:
    """401 without a bearer token, 403 with one that is not among `tokens`. Constant-time."""
    if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
        raise HTTPException(
            401,
            "this endpoint needs Authorization: Bearer <token>",
            headers={"WWW-Authenticate": "Bearer"},
        )
    given = credentials.credentials.encode()
    accepted = False
    for token in tokens:  # every token compared: timing says nothing
        accepted |= hmac.compare_digest(given, token.get_secret_value().encode())
    if not accepted:
        raise HTTPException(403, "the bearer token is not accepted")


async def require_token(
    state: StateDep, credentials: Annotated[Credentials, Depends(_bearer)]
) -> None:
    _authorise(credentials, state.settings.api_tokens)


async def require_read_token(
    state: StateDep, credentials: Annotated[Credentials, Depends(_read_bearer)]
) -> None:
    """Reads that name hosts, GPUs or processes: a read or a write token, once read tokens are
    configured; open (as before they existed) while ADVISOR_READ_TOKENS is empty."""
    settings = state.settings
    if settings.read_tokens:
        _authorise(credentials, (*settings.read_tokens, *settings.api_tokens))


async def presented_token(credentials: Annotated[Credentials, Depends(_bearer)]) -> str:
    """The bearer token of a request that passed require_token (which hosts it may report for:
    advisor.fleet.hosts.token_may_report)."""
    return credentials.credentials if credentials is not None else ""


WriteAccess = Depends(require_token)
PresentedToken = Annotated[str, Depends(presented_token)]
ReadAccess = Depends(require_read_token)

Guard = Callable[[Request], Awaitable[None]]


def early_guard(route: APIRoute) -> Guard | None:
    """The route's token check as a function of the bare request, for the route to run before
    it reads its body (FastAPI resolves dependencies after reading and parsing the body: an
    anonymous 1 MiB body once cost a second of CPU and answered a field-by-field 422 instead
    of a 401). None for a route without one. The dependency still runs afterwards, as declared
    (one more constant-time comparison)."""
    calls: set[Any] = set()
    pending: list[Dependant] = [route.dependant]
    while pending:
        dependant = pending.pop()
        calls.add(dependant.call)
        pending.extend(dependant.dependencies)
    check = (
        require_token
        if require_token in calls
        else require_read_token
        if require_read_token in calls
        else None
    )
    if check is None:
        return None
    bearer = _bearer if check is require_token else _read_bearer

    async def guard(request: Request) -> None:
        await check(await get_state(request), await bearer(request))

    return guard


# Probe and utilisation reports alike (advisor.store.base.idempotency_key says what it keys).
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9._~-]+$",
        description="Makes a retry safe: a report posted again with the same key is stored"
        " once (advisor probe and advisor monitor send a UUID made once per report). Without a"
        " key, the same report posted again is stored once.",
    ),
]


def stored_before(model: type[BaseModel]) -> dict[int | str, dict[str, Any]]:
    """The documented 200 of a report upload with IdempotencyKey: the report was stored before."""
    return {
        200: {
            "model": model,
            "description": "Stored before (the same report, with the same Idempotency-Key or"
            " without one): the report stored then; nothing is stored now",
        }
    }


async def known_query_only(request: Request) -> None:
    """A query parameter a /v1 operation does not declare is a 422 naming it, as an unknown body
    field is: `?limt=5` silently meaning the default would answer another question. The
    operational endpoints (/healthz, /readyz, /metrics) keep ignoring what probes and scrapers
    append."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not request.query_params:
        return
    if not route.path.startswith("/v1/"):
        return
    declared = _declared_query(route)
    unknown = [name for name in request.query_params if name not in declared]
    if unknown:
        raise RequestValidationError(
            [
                {
                    "type": "extra_forbidden",
                    "loc": ("query", name),
                    "msg": "Extra inputs are not permitted"
                    + (f"; declared: {', '.join(sorted(declared))}" if declared else ""),
                    "input": request.query_params[name],
                }
                for name in unknown[:MAX_FIELD_PROBLEMS]
            ]
        )


def _declared_query(route: APIRoute) -> frozenset[str]:
    """The query parameters of the operation and of every dependency it has (worked out on
    the route's first request and kept on it: routes are not hashable)."""
    known: frozenset[str] | None = route.__dict__.get("_advisor_query_params")
    if known is not None:
        return known
    names: set[str] = set()
    pending: list[Dependant] = [route.dependant]
    while pending:
        dependant = pending.pop()
        names.update(p.alias for p in dependant.query_params)
        pending.extend(dependant.dependencies)
    route.__dict__["_advisor_query_params"] = frozenset(names)
    return frozenset(names)
