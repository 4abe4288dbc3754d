"""Turning outside input (CLI flags, HTTP bodies) into validated request models."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from advisor.errors import InputError
from advisor.loader import explain_validation
from advisor.workload import Workload

M = TypeVar("M", bound=BaseModel)


def parse_request(model: type[M], data: dict[str, Any]) -> M:
    """Validate a request; errors become one InputError line naming each bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{f}: {m}" for f, m in explain_validation(exc, model))
        raise InputError(f"invalid request: {problems}") from None


def parse_workload(data: dict[str, Any]) -> Workload:
    return parse_request(Workload, data)
