"""Service settings, read from the environment once and validated at start-up."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from advisor.errors import InputError
from advisor.perf.calibration import MIN_FLEET_REPORTS
from advisor.validation_errors import explain_validation

ENV = {
    "database_url": "ADVISOR_DATABASE_URL",
    "api_tokens": "ADVISOR_API_TOKENS",
    "read_tokens": "ADVISOR_READ_TOKENS",
    "catalog_dir": "ADVISOR_CATALOG",
    "catalog_mode": "ADVISOR_CATALOG_MODE",
    "max_body_bytes": "ADVISOR_MAX_BODY_BYTES",
    "min_fleet_reports": "ADVISOR_MIN_FLEET_REPORTS",
}


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    database_url: Annotated[str, Field(min_length=1)] = "sqlite:///advisor.db"
    api_tokens: tuple[SecretStr, ...] = ()  # never printed: SecretStr hides them in reprs
    # Guard the reads that name hosts, GPUs and processes; empty: those reads are open.
    read_tokens: tuple[SecretStr, ...] = ()
    catalog_dir: str | None = None
    catalog_mode: Annotated[str, Field(pattern="^(extend|replace)$")] = "extend"
    max_body_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = 1024 * 1024
    min_fleet_reports: Annotated[int, Field(ge=1)] = MIN_FLEET_REPORTS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        raw: dict[str, object] = {}
        for field, var in ENV.items():
            value = environ.get(var)
            if value is None or value == "":
                continue
            if field in ("api_tokens", "read_tokens"):
                raw[field] = tuple(t.strip() for t in value.split(",") if t.strip())
            else:
                raw[field] = value
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{ENV.get(f.split('.')[0].split('[')[0], f)}: {m}"
                for f, m in explain_validation(exc, cls)
            )
            raise InputError(f"invalid service settings: {problems}") from None
