"""Request bodies as strict JSON (RFC 8259), parsed and checked (large ones off the event loop).

Python's json module accepts NaN, Infinity and -Infinity, and reads 1e309 as infinity: none of
them is JSON, and a stored NaN came back as null. Here they are a 422 that names the field.

The body is also validated against the route's model before FastAPI sees it, in a thread when
it is large: a body that fails answers only its first problems (MAX_FIELD_PROBLEMS) with their
total, so that a 1 MB body of 90,000 unknown keys costs the event loop nothing (it once held it
for 13 s).
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from advisor.api.problems import MAX_FIELD_PROBLEMS, CappedValidationError

MAX_INT_DIGITS = 309  # an integer with more digits is beyond every float: no field takes it
# Bodies up to this size are parsed and checked on the event loop: that costs tens of
# microseconds, less than the hop to a worker thread and back; larger ones go to a thread.
INLINE_MAX_BYTES = 16 * 1024


class NotJson:
    """A number token that JSON does not have (NaN, Infinity) or that no float can hold."""

    def __init__(self, token: str) -> None:
        self.token = token


def _float(token: str) -> float | int | NotJson:
    value = float(token)
    if not math.isfinite(value):
        return NotJson(token)
    # JSON has one number type: 7171.0 is the integer 7171 (JSON Schema says so too), and a
    # float field takes an int alike
    return int(value) if value.is_integer() else value


def _int(token: str) -> int | NotJson:
    digits = len(token) - token.startswith("-")
    return int(token) if digits <= MAX_INT_DIGITS else NotJson(f"{token[:20]}... ({digits} digits)")


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

    value = json.loads(
        body, parse_constant=constant, parse_float=number(_float), parse_int=number(_int)
    )
    if found:
        errors = [
            {
                "type": "finite_number",
                "loc": ("body", *loc),
                "msg": f"{bad.token} is not a JSON number (finite, within the float range)",
                "input": bad.token,
            }
            for loc, bad in _not_json(value, ())
        ]
        raise CappedValidationError(errors[:MAX_FIELD_PROBLEMS], len(errors))
    return value


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


def _parse_and_check(body: bytes, model: type[BaseModel] | None) -> Any:
    value = loads(body)
    if model is not None:
        try:
            # strict: JSON types as the contract states them (false is not a number, "1.5" is
            # not a number); FastAPI validates the same value again, in its lax mode, after this
            model.model_validate_json(json.dumps(value), strict=True)
        except ValidationError as strict:
            try:  # a body that lax validation refuses too gets its words (the CLI's)
                model.model_validate(value)
            except ValidationError as lax:
                raise _capped(lax) from None
            raise _capped(strict) from None
    return value


def _capped(exc: ValidationError) -> CappedValidationError:
    gc.disable()  # 90,000 error dicts: the collector would triple the time
    try:
        errors = exc.errors(include_url=False)[:MAX_FIELD_PROBLEMS]
    finally:
        gc.enable()
    return CappedValidationError(
        [{**e, "loc": ("body", *e["loc"])} for e in errors], exc.error_count()
    )


class StrictJSONRoute(APIRoute):
    """A route whose JSON body is parsed strictly and checked in a thread (see the module)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        annotation = self.body_field.field_info.annotation if self.body_field else None
        model = (
            annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel)
            else None
        )

        async def strict(request: Request) -> Response:
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
                            else await run_in_threadpool(_parse_and_check, body, model)
                        )
                    except ValueError:
                        pass  # not JSON at all: FastAPI parses it again and words the error
                    else:
                        request._json = parsed  # FastAPI reads it instead of parsing again
            return await handler(request)

        return strict
