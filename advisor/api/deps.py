"""Typed dependencies: the app state, the current catalog, and bearer-token authorisation.

All are `async def`: they do no I/O, and a plain `def` would cost a thread hop per request.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from advisor.api.state import AppState
from advisor.catalog import Catalog
from advisor.store import Store

_bearer = HTTPBearer(auto_error=False, description="A token from ADVISOR_API_TOKENS")


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


async def require_token(
    state: StateDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """401 without a bearer token, 403 with one that is not configured. Constant-time compare."""
    if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
        raise HTTPException(
            401,
            "this endpoint needs Authorization: Bearer <token>",
            headers={"WWW-Authenticate": "Bearer"},
        )
    given = credentials.credentials.encode()
    accepted = False
    for token in state.settings.api_tokens:  # every token compared: timing says nothing
        accepted |= hmac.compare_digest(given, token.get_secret_value().encode())
    if not accepted:
        raise HTTPException(403, "the bearer token is not accepted")


WriteAccess = Depends(require_token)
