"""The catalog's settings, one class for both interfaces: the CLI reads them from the
environment (CatalogSettings.from_env), the service's Settings inherits them and reads them
through pydantic-settings. Either way the variables are ADVISOR_CATALOG, ADVISOR_CATALOG_MODE
and ADVISOR_MAX_PRICE_AGE_DAYS, validated by the fields below."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from advisor.errors import InputError

DEFAULT_MAX_PRICE_AGE_DAYS = 365
PREFIX = "ADVISOR_"


def shipped_catalog_dir() -> Path:
    """The catalog inside the installed package, or the checkout's catalog/ in development."""
    package = Path(__file__).resolve().parents[1]  # advisor/
    packaged = package / "_catalog_data"
    return packaged if packaged.is_dir() else package.parent / "catalog"


class CatalogSettings(BaseModel):
    # defer_build: the validator is built when a variable is set (from_env) or the service's
    # Settings reads them; a command with none set never builds it (start-up,
    # benchmarks/bench_startup.py)
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)

    # a directory extending (or, with catalog_mode replace, replacing) the shipped catalog
    catalog_dir: Annotated[str | None, Field(validation_alias="ADVISOR_CATALOG")] = None
    catalog_mode: Literal["extend", "replace"] = "extend"
    # prices older than this many days count as stale
    max_price_age_days: Annotated[int, Field(ge=0)] = DEFAULT_MAX_PRICE_AGE_DAYS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> CatalogSettings:
        """The catalog variables of `environ` (unset or empty: the default); InputError naming
        the variable of a bad value."""
        given = {
            name: environ[env]
            for name, env in catalog_env_names().items()
            if environ.get(env, "") != ""
        }
        if not given and cls is CatalogSettings:
            return cls.model_construct()  # the defaults, as validating nothing gives them
        try:
            return cls.model_validate(given)
        except ValidationError as exc:
            first = exc.errors()[0]
            env = catalog_env_names()[str(first["loc"][0])]
            raise InputError(f"{env}={environ[env]!r}: {first['msg']}") from None

    def directories(self) -> list[Path]:
        """The directories to read, in order: the shipped one unless replaced, then the user's."""
        if self.catalog_dir is None:
            if self.catalog_mode == "replace":
                raise InputError(
                    "replacing the shipped catalog needs a catalog directory (--catalog or "
                    "ADVISOR_CATALOG)"
                )
            return [shipped_catalog_dir()]
        path = Path(self.catalog_dir)
        if not path.is_dir():
            raise InputError(
                f"catalog directory {str(path)!r} does not exist or is not a directory"
            )
        return [path] if self.catalog_mode == "replace" else [shipped_catalog_dir(), path]


def catalog_env_names() -> dict[str, str]:
    """Each catalog setting's environment variable."""
    return {
        name: str(info.validation_alias or PREFIX + name.upper())
        for name, info in CatalogSettings.model_fields.items()
    }
