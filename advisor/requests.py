"""Turning outside input (CLI flags, HTTP bodies) into validated request models."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from advisor.errors import InputError
from advisor.loader import explain_validation
from advisor.workload import Workload


def parse_workload(data: dict[str, Any]) -> Workload:
    """Validate a workload request; errors become one InputError line naming each bad field."""
    try:
        return Workload.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{f}: {m}" for f, m in explain_validation(exc, Workload))
        raise InputError(f"invalid request: {problems}") from None
