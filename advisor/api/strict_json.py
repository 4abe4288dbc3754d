"""Request bodies as strict JSON (RFC 8259), parsed and checked (large ones off the event loop).

Python's json module accepts NaN, Infinity and -Infinity, and reads 1e309 as infinity: none of
them is JSON, and a stored NaN came back as null. Here they are a 422 that names the field.

The body is also validated against the route's model before FastAPI sees it, in a thread when
it is large: a body that fails answers only its first problems (MAX_FIELD_PROBLEMS) with their
total, so that a 1 MB body of 90,000 unknown keys costs the event loop nothing (validated there, it
would hold the loop for 13 s).

Before any of that, the body's shape is bounded (`_shape_problem`): at most MAX_JSON_DEPTH
nested arrays and objects and MAX_OBJECT_KEYS keys in one object, each a 422 naming the limit.
json.loads recurses in C and raised RecursionError (a 500 with a 10 KB traceback) at about 1,000
levels; no route's body is deeper than 10 (a probe report's NVLink error counters are 8). And an
object of the route's model is split into its known and unknown keys first: pydantic validates
the known ones and the unknown ones are counted and the first few named, so that a body of many
unknown keys costs a set lookup per key instead of a pydantic error each (twice: strict and lax).

And before the body is read at all, a guarded route checks its token (early_guard): an
anonymous client gets its 401 or 403 without costing a parse.

A route of DirectEngineRoute whose body parsed and validated here calls its endpoint itself,
past FastAPI's handler (see _direct_endpoint).
"""

from __future__ import annotations

import functools
import gc
import json
import math
from collections.abc import Callable, Coroutine, Iterable, Iterator
from functools import partial
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect

from advisor.api.deps import early_guard, known_query_only
from advisor.api.engine_queue import Turns, client_of
from advisor.api.problems import MAX_FIELD_PROBLEMS, CappedValidationError
from advisor.api.state import AppState

# Integers a body may hold: 64-bit signed, what every store column and client language takes
# (integers of 309 digits were accepted in several fields). A float field takes any finite
# number written with a fraction or an exponent.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_INT_DIGITS = 19  # digits of INT64_MAX: a longer token is out of range without parsing it
# Bodies up to this size are parsed and checked on the event loop: that costs tens of
# microseconds, less than the hop to a worker thread and back; larger ones go to a thread.
INLINE_MAX_BYTES = 16 * 1024
# Nested arrays and objects a body may have (the top-level value is depth 1): every route's body
# is 10 deep at most, and json.loads fails with RecursionError near 1,000.
MAX_JSON_DEPTH = 32
# Keys in one JSON object: the widest object a route takes is a model of about 50 fields or a
# counter map (NVLink errors per link), far below this.
MAX_OBJECT_KEYS = 1000


class NotJson:
    """A number token that JSON does not have (NaN, Infinity) or that no float can hold."""

    def __init__(self, token: str) -> None:
        self.token = token


def _float(token: str) -> float | int | NotJson:
    value = float(token)
    if not math.isfinite(value):
        return NotJson(token)
    # JSON has one number type: 7171.0 is the integer 7171 (JSON Schema says so too), and a
    # float field takes an int alike; beyond 64 bits it stays a float (no integer field
    # takes it)
    whole = value.is_integer() and INT64_MIN <= value <= INT64_MAX
    return int(value) if whole else value


def _int(token: str) -> int | NotJson:
    digits = len(token) - token.startswith("-")
    if digits > MAX_INT_DIGITS:
        return NotJson(f"{token[:20]}... ({digits} digits)")
    value = int(token)
    return value if INT64_MIN <= value <= INT64_MAX else NotJson(token)


def loads(body: bytes) -> Any:
    """json.loads that turns non-JSON and out-of-range numbers into a 422 naming each field."""
    found = False

    def constant(token: str) -> NotJson:
        nonlocal found
        found = True
        return NotJson(token)

    def number(parse: Callable[[str], Any]) -> Callable[[str], Any]:
        def checked(token: str) -> Any:
            nonlocal found
            value = parse(token)
            found = found or isinstance(value, NotJson)
            return value

        return checked

    try:
        value = json.loads(
            body, parse_constant=constant, parse_float=number(_float), parse_int=number(_int)
        )
    except RecursionError:  # nested far deeper than MAX_JSON_DEPTH: the C parser gave up
        raise CappedValidationError([_depth_error(())], 1) from None
    shape = _shape_problem(value)
    if shape is not None:
        raise CappedValidationError([shape], 1)
    if found:
        errors = [
            {
                "type": "finite_number",
                "loc": ("body", *loc),
                "msg": f"{bad.token} is not a number the service takes (finite, within the "
                "float range; an integer within 64 bits)",
                "input": bad.token,
            }
            for loc, bad in _not_json(value, ())
        ]
        raise CappedValidationError(errors[:MAX_FIELD_PROBLEMS], len(errors))
    return value


def _depth_error(loc: tuple[int | str, ...]) -> dict[str, Any]:
    return {
        "type": "json_depth",
        "loc": ("body", *loc),
        "msg": f"nested deeper than {MAX_JSON_DEPTH} arrays and objects (the service's limit)",
        "input": None,
    }


def _shape_problem(value: Any) -> dict[str, Any] | None:
    """The first place where `value` is nested deeper than MAX_JSON_DEPTH or an object has more
    than MAX_OBJECT_KEYS keys, as a validation error; None when neither. Iterative (a stack, no
    recursion), and it stops at the first object too wide, before looking inside it."""
    pending: list[tuple[Any, int, tuple[int | str, ...]]] = [(value, 1, ())]
    while pending:
        item, depth, loc = pending.pop()
        if depth > MAX_JSON_DEPTH:
            return _depth_error(loc)
        if isinstance(item, dict):
            if len(item) > MAX_OBJECT_KEYS:
                return {
                    "type": "json_object_keys",
                    "loc": ("body", *loc),
                    "msg": f"an object of {len(item)} keys: at most {MAX_OBJECT_KEYS} (the "
                    "service's limit)",
                    "input": None,
                }
            children: Iterable[tuple[int | str, Any]] = item.items()
        elif isinstance(item, list):
            children = enumerate(item)
        else:
            continue
        for key, child in children:
            if isinstance(child, dict | list):
                pending.append((child, depth + 1, (*loc, key)))
    return None


def _not_json(
    value: Any, loc: tuple[int | str, ...]
) -> Iterator[tuple[tuple[int | str, ...], NotJson]]:
    if isinstance(value, NotJson):
        yield loc, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _not_json(item, (*loc, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _not_json(item, (*loc, i))


def _is_json(content_type: str | None) -> bool:
    media = (content_type or "application/json").partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


# Kept per model (the routes' few body models): worked out on every request, it was a few
# percent of a small body's CPU.
@functools.cache
def _known_fields(model: type[BaseModel]) -> frozenset[str] | None:
    """The keys `model` takes, when it refuses every other key and names its fields plainly (no
    aliases); None otherwise (pydantic alone then says what is unknown)."""
    if model.model_config.get("extra") != "forbid":
        return None
    fields = model.model_fields
    if any(f.alias or f.validation_alias for f in fields.values()):
        return None
    return frozenset(fields)


def _unknown_key_errors(unknown: list[str], total_before: int) -> list[dict[str, Any]]:
    """pydantic's extra_forbidden errors for the first unknown keys (those that still fit in
    MAX_FIELD_PROBLEMS after `total_before` other problems)."""
    room = max(MAX_FIELD_PROBLEMS - total_before, 0)
    return [
        {"type": "extra_forbidden", "loc": ("body", key), "msg": "Extra inputs are not permitted"}
        for key in unknown[:room]
    ]


def _parse_and_check(body: bytes, model: type[BaseModel] | None) -> Any:
    """The body's value, or the route's model validated from it (FastAPI takes the instance as
    it is: a large body is not validated a second time, on the event loop)."""
    value = loads(body)
    if model is not None:
        known = _known_fields(model)
        if known is not None and isinstance(value, dict):
            unknown = [key for key in value if key not in known]
            if unknown:
                try:
                    _validate({k: v for k, v in value.items() if k in known}, model)
                except CappedValidationError as exc:
                    errors = list(exc.errors())
                    raise CappedValidationError(
                        errors + _unknown_key_errors(unknown, len(errors)),
                        exc.total + len(unknown),
                    ) from None
                raise CappedValidationError(_unknown_key_errors(unknown, 0), len(unknown))
        return _validate(value, model)
    return value


def _validate(value: Any, model: type[BaseModel]) -> BaseModel:
    """`value` against `model` in strict mode; CappedValidationError with the first problems."""
    try:
        # strict: JSON types as the contract states them (false is not a number, "1.5" is
        # not a number)
        return model.model_validate_json(json.dumps(value), strict=True)
    except ValidationError as strict:
        try:  # a body that lax validation refuses too gets its words (the CLI's)
            model.model_validate(value)
        except ValidationError as lax:
            raise _capped(lax) from None
        raise _capped(strict) from None


def _capped(exc: ValidationError) -> CappedValidationError:
    gc.disable()  # 90,000 error dicts: the collector would triple the time
    try:
        errors = exc.errors(include_url=False)[:MAX_FIELD_PROBLEMS]
    finally:
        gc.enable()
    return CappedValidationError(
        [{**e, "loc": ("body", *e["loc"])} for e in errors], exc.error_count()
    )


def _parsing(request: Request) -> Turns:
    """Large bodies are parsed on one thread: parsing holds the interpreter, so more threads
    parse no faster and take it from the event loop (32 clients posting 1 MB bodies at once made
    /healthz wait seconds). Clients take it by turns, as they take the engine's (AppState)."""
    state: AppState = request.app.state.advisor
    return state.parsing


class StrictJSONRoute(APIRoute):
    """A route whose JSON body is parsed strictly and checked in a thread (see the module)."""

    # a route that may run the engine refuses a client at its bound of engine work before it
    # reads the body (advisor/api/engine_queue.py EngineQueue.admit)
    engine_admits = False
    # the endpoint is called with the validated body, past FastAPI's handler (DirectEngineRoute)
    direct = False

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        annotation = self.body_field.field_info.annotation if self.body_field else None
        model = (
            annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel)
            else None
        )

        guard = early_guard(self)
        direct = _direct_endpoint(self) if self.direct else None

        async def strict(request: Request) -> Response:
            if guard is not None:  # 401/403 before a byte of the body is read
                await guard(request)
            if self.engine_admits:  # 429/503 before the body is read
                state: AppState = request.app.state.advisor
                await state.engine.admit_before_body(client_of(request))
            if self.body_field is not None and _is_json(request.headers.get("content-type")):
                try:
                    body = await request.body()
                except ClientDisconnect:  # gone, or cut off by the body limit (413 sent)
                    return Response(status_code=400)
                if body:
                    try:
                        parsed = (
                            _parse_and_check(body, model)
                            if len(body) <= INLINE_MAX_BYTES
                            else await _parsing(request).on_thread(
                                client_of(request), partial(_parse_and_check, body, model)
                            )
                        )
                    except ValueError:
                        pass  # not JSON at all: FastAPI parses it again and words the error
                    else:
                        if direct is not None and _plain_app(request.app):
                            if request.scope.get("query_string"):  # else none to refuse
                                await known_query_only(request)  # the app's one dependency
                            return await direct(request, parsed)
                        request._json = parsed  # FastAPI reads it instead of parsing again
            return await handler(request)

        return strict


class EngineRoute(StrictJSONRoute):
    """A strict-JSON route that may run the engine: a client at its bound of engine work is
    refused before its body is read (advisor/api/engine_queue.py)."""

    engine_admits = True


class DirectEngineRoute(EngineRoute):
    """An engine route whose endpoint takes its body and the request alone and returns its
    Response: called directly once the body is validated (_direct_endpoint)."""

    direct = True


Direct = Callable[[Request, Any], Coroutine[Any, Any, Response]]


def _direct_endpoint(route: APIRoute) -> Direct | None:
    """The route's endpoint as a call of (request, validated body). FastAPI's handler, for an
    endpoint of that shape, resolves no dependency but the app's and returns the endpoint's
    Response as it is; resolving it cost about 30 us a request, a tenth of a distinct
    recommendation's CPU (benchmarks/results/service-ratio-2026-12-05d.txt). The route's
    shape is checked when it is built, and the app's at each request (_plain_app): any other
    falls back to FastAPI's handler, as does a FastAPI whose Dependant lacks a field read here
    (None). tests/test_api.py holds the two paths to the same answers."""
    d = route.dependant
    try:
        others = (d.path_params, d.query_params, d.header_params, d.cookie_params, d.dependencies)
        body = [p.name for p in d.body_params]
        special = (
            d.response_param_name,
            d.background_tasks_param_name,
            d.security_scopes_param_name,
        )
    except AttributeError:  # another FastAPI's Dependant: its own handler, as for any route
        return None
    if any(others) or len(body) != 1 or d.request_param_name is None or any(special):
        raise TypeError(f"{route.path}: a direct route takes its body and the request alone")
    endpoint, body_name, request_name = route.endpoint, body[0], d.request_param_name

    async def call(request: Request, value: Any) -> Response:
        response: Response = await endpoint(**{body_name: value, request_name: request})
        return response

    return call


def _plain_app(app: Any) -> bool:
    """Whether the app resolves, for a direct route, only known_query_only: no other app-wide
    dependency and no override (the tests' overrides go through FastAPI's handler)."""
    return not app.dependency_overrides and all(
        d.dependency is known_query_only for d in app.router.dependencies
    )
