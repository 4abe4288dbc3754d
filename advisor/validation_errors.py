"""pydantic validation errors as (field path, sentence with a hint): the one formatter that
catalog loading, the CLI and the HTTP API all word bad fields with."""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from advisor.did_you_mean import did_you_mean


def explain_validation(exc: ValidationError, model: type[BaseModel]) -> list[tuple[str, str]]:
    """pydantic errors → (field path, sentence with a hint). Shared with request validation."""
    return explain_errors(exc.errors(), model)


def explain_errors(
    errors: Iterable[Mapping[str, Any]], model: type[BaseModel] | None, dotted: bool = False
) -> list[tuple[str, str]]:
    """pydantic error dicts (ValidationError.errors(), or FastAPI's with the "body" prefix
    already stripped from each loc) → (field path, sentence). Hints for unknown fields come from
    `model`'s own fields (the nested model the location points into), never from other models.
    Paths read `prices[0].purchase`; with `dotted` (the HTTP API's `field`), `prices.0.purchase`.
    """
    out = []
    for err in errors:
        loc = tuple(err["loc"])
        path = ".".join(str(p) for p in loc) if dotted else _format_loc(loc)
        out.append((path or "(entry)", _sentence(err, loc, path, model)))
    return out


def _sentence(
    err: Mapping[str, Any], loc: tuple[int | str, ...], path: str, model: type[BaseModel] | None
) -> str:
    kind = err["type"]
    value = err.get("input")
    if kind == "extra_forbidden":
        owner = _model_at(model, loc[:-1]) if model is not None else None
        hint = did_you_mean(str(loc[-1]), owner.model_fields) if owner else ""
        return f"unknown field{hint}"
    if kind in ("enum", "literal_error"):
        expected = re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected", "")))
        hint = did_you_mean(str(value), expected) if isinstance(value, str) else ""
        return f"{value!r} is not valid{hint}; valid: {', '.join(expected)}"
    if kind == "finite_number":
        nan = isinstance(value, float) and math.isnan(value)
        what = "not a number" if nan else "not a finite number"
        return f"{value!r} is {what}: give a number"
    if kind in ("float_parsing", "int_parsing", "float_type", "int_type"):
        msg = f"{err['msg']}, got {value!r}"
        if isinstance(value, str) and re.search(r"\d", value):
            msg += " (give a plain number: the unit is in the field name)"
        return msg
    if kind in ("less_than_equal", "less_than") and path.rsplit(".", maxsplit=1)[-1] not in (
        "gen",
    ):
        return f"{err['msg']}, got {value!r}: is the unit right? (the field name says it)"
    msg = str(err["msg"])
    if value is not None and not isinstance(value, dict | list):
        msg += f", got {value!r}"
    return msg


def _format_loc(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The nested model class that the location points into (to suggest its field names)."""
    current: type[BaseModel] | None = model
    for part in loc:
        if isinstance(part, int) or current is None:
            continue
        info = current.model_fields.get(part)
        current = _find_model(info.annotation) if info else None
    return current


def _find_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is not None:
        for arg in typing.get_args(annotation):
            found = _find_model(arg)
            if found:
                return found
    return None
