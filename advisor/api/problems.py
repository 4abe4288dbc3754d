"""Errors as application/problem+json (RFC 9457), for every error the service returns."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path

from advisor.errors import AdvisorError, InputError, NotFoundError
from advisor.request import field_sentences
from advisor.store import StoreError, StoreUnreachable
from advisor.validation_errors import explain_errors

PROBLEM = "application/problem+json"
# An invalid body answers its first MAX_FIELD_PROBLEMS problems (with did-you-mean hints) and
# counts the rest: answering all of a body of 90,000 unknown keys takes 13 s and
# 6 MB.
MAX_FIELD_PROBLEMS = 20
MAX_TEXT = 200  # characters of one field name or message
# Retry-After of a storage failure other than an unreachable database (a full disk, a locked
# file): seconds, long enough for an operator to be paged, short enough not to lose reports.
STORE_RETRY_AFTER_S = 60


class CappedValidationError(RequestValidationError):
    """The first problems of an invalid body (advisor.api.strict_json), and how many there were
    in all."""

    def __init__(self, errors: list[dict[str, Any]], total: int) -> None:
        super().__init__(errors)
        self.total = total


class FieldProblem(BaseModel):
    field: str
    message: str


class Problem(BaseModel):
    """The body of every error response."""

    model_config = ConfigDict(extra="forbid")

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    errors: list[FieldProblem] | None = None


def problem_json(status: int, title: str, detail: str) -> bytes:
    """A Problem's bytes, for answers written below the app (body limit, the HTTP layer)."""
    return (
        Problem(title=title, status=status, detail=detail)
        .model_dump_json(exclude_none=True)
        .encode()
    )


def problem(
    status: int,
    title: str,
    detail: str,
    errors: list[FieldProblem] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = Problem(title=title, status=status, detail=detail, errors=errors)
    return JSONResponse(
        body.model_dump(exclude_none=True), status, headers=headers, media_type=PROBLEM
    )


def _body_model(request: Request) -> type[BaseModel] | None:
    """The model the route validates its body with: unknown-field hints come from its fields
    alone, not from every model the service knows."""
    route = request.scope.get("route")
    field = route.body_field if isinstance(route, APIRoute) else None
    annotation = field.field_info.annotation if field is not None else None
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def field_problems(
    errors: Sequence[Mapping[str, Any]], model: type[BaseModel] | None
) -> list[FieldProblem]:
    """FastAPI's validation errors, worded by the same formatter as the CLI and the loader."""
    located = [
        {**err, "loc": tuple(p for p in err.get("loc", ()) if p not in ("body", "query", "path"))}
        for err in errors
    ]
    return [
        FieldProblem(field=_clip(f), message=_clip(m))
        for f, m in explain_errors(located, model, dotted=True)
    ]


def _clip(text: str) -> str:
    """Field names and messages quote what the client sent, which may be a megabyte long."""
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def install(app: FastAPI) -> None:
    """Exception handlers: every error becomes a Problem."""

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        found = exc.errors()
        total = exc.total if isinstance(exc, CappedValidationError) else len(found)
        errors = field_problems(found[:MAX_FIELD_PROBLEMS], _body_model(request))
        detail = field_sentences([(e.field, e.message) for e in errors])
        if total > len(errors):
            detail += f" (and {total - len(errors)} more; {total} problems in all)"
        return problem(422, "Invalid request", detail, errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        title = {
            400: "Bad Request",
            401: "Unauthorized",
            403: "Forbidden",
            404: "Not Found",
            405: "Method Not Allowed",
            413: "Content Too Large",
        }.get(exc.status_code, "Error")
        if exc.status_code == 404 and (redirect := _without_slash(request)) is not None:
            return redirect
        headers = dict(exc.headers) if exc.headers else {}
        if exc.status_code == 405 and (allowed := allowed_methods(request)) is not None:
            headers["Allow"] = ", ".join(allowed)  # Starlette names the first route's only
        return problem(exc.status_code, title, str(exc.detail), headers=headers or None)

    @app.exception_handler(NotFoundError)
    async def _not_found(_: Request, exc: NotFoundError) -> JSONResponse:
        return problem(404, "Not Found", str(exc))

    @app.exception_handler(InputError)
    async def _input(_: Request, exc: InputError) -> JSONResponse:
        detail = str(exc)  # fields by their JSON names
        errors = [FieldProblem(field=exc.field, message=detail)] if exc.field else None
        return problem(422, "Invalid request", detail, errors)

    @app.exception_handler(StoreError)
    async def _store(_: Request, exc: StoreError) -> JSONResponse:
        retry = exc.retry_after_s if isinstance(exc, StoreUnreachable) else None
        # Retry-After counts whole seconds (RFC 9110): the breaker's wait, rounded up; any other
        # storage failure (a full disk) needs an operator: clients come back a minute later
        wait = max(math.ceil(retry), 1) if retry else STORE_RETRY_AFTER_S
        return problem(503, "Storage unavailable", str(exc), headers={"Retry-After": str(wait)})

    @app.exception_handler(AdvisorError)
    async def _advisor(_: Request, exc: AdvisorError) -> JSONResponse:
        return problem(500, "Internal error", str(exc))

    @app.exception_handler(Exception)
    async def _bug(_: Request, exc: Exception) -> JSONResponse:
        # A bug: Starlette logs the traceback after this answer; the client gets no internals.
        return problem(500, "Internal error", "the server failed on this request; see its log")


def _without_slash(request: Request) -> Response | None:
    """A 307 to the path without its trailing slash, when the contract has that path and
    method; its Location is the path alone (Starlette's own redirect built it from the client's
    Host header)."""
    path = request.url.path
    if len(path) <= 1 or not path.endswith("/"):
        return None
    methods = methods_at(request.app, path.rstrip("/"))
    if not methods or request.method not in methods:
        return None
    query = request.url.query
    return RedirectResponse(path.rstrip("/") + (f"?{query}" if query else ""), 307)


def allowed_methods(request: Request) -> list[str] | None:
    """Every method the contract lists at this path (GET and POST where both exist), and HEAD
    with GET (Starlette answers it); None for a path outside the contract."""
    return methods_at(request.app, request.url.path)


def methods_at(app: FastAPI, path: str) -> list[str] | None:
    """allowed_methods of `path`."""
    for template, item in app.openapi()["paths"].items():
        regex, _, _ = compile_path(template)
        if regex.match(path):
            methods = {m.upper() for m in item}
            return sorted(methods | ({"HEAD"} if "GET" in methods else set()))
    return None


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the problem responses a route can return."""
    text = {
        400: "Bad request",
        401: "Missing bearer token",
        403: "Token not accepted",
        404: "Not found",
        413: "Body too large",
        422: "Invalid request",
        429: "Too many requests from this client",
        503: "Unavailable",
    }
    return {
        c: {"description": text[c], "content": {PROBLEM: {"schema": PROBLEM_REF}}} for c in codes
    }


PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


def _is_problem(response: dict[str, Any]) -> bool:
    """An error response whose body is a Problem (not, say, /readyz's 503 Readiness body)."""
    content = response.get("content") or {}
    if PROBLEM in content:
        return True
    ref = str(content.get("application/json", {}).get("schema", {}).get("$ref", ""))
    return ref.endswith(("/HTTPValidationError", "/Problem")) or not content


def document(app: FastAPI) -> None:
    """Every error response in the contract is problem+json with the Problem schema (FastAPI
    would otherwise document its own 422 body and put extra responses under application/json)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schemas = spec.setdefault("components", {}).setdefault("schemas", {})
        problem_schema = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(problem_schema.pop("$defs", {}))
        schemas["Problem"] = problem_schema
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        for path in spec.get("paths", {}).values():
            for operation in path.values():
                for code, response in operation.get("responses", {}).items():
                    if str(code).startswith(("4", "5")) and _is_problem(response):
                        response["content"] = {PROBLEM: {"schema": PROBLEM_REF}}
        _bound_integers(spec)
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


def _bound_integers(node: Any) -> None:
    """Every integer in the contract within 64 bits, as advisor.api.strict_json enforces."""
    from advisor.api.strict_json import INT64_MAX, INT64_MIN

    pending = [node]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if item.get("type") == "integer":
                item["minimum"] = max(item.get("minimum", INT64_MIN), INT64_MIN)
                item["maximum"] = min(item.get("maximum", INT64_MAX), INT64_MAX)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
