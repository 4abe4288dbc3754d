"""Service settings: the one object that configures `advisor serve`, read from ADVISOR_*
environment variables by pydantic-settings and validated at start-up (a bad value stops the
service before the port opens, naming the variable)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Annotated, Any

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from advisor.catalog.settings import CatalogSettings
from advisor.errors import InputError
from advisor.perf.calibration import MIN_FLEET_REPORTS
from advisor.validation_errors import explain_validation

PREFIX = "ADVISOR_"
# The environment that `Settings.from_env` reads (os.environ unless a mapping is given).
_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar(
    "advisor_settings_environ", default=None
)


class _Environ(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping (os.environ by default), so
    that a Dockerfile's ENV lines or a test's dict are validated exactly as the real environment."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {k.lower(): v for k, v in self._environ.items() if v != ""}


class Settings(BaseSettings, CatalogSettings):
    """Defaults are safe for one host: SQLite next to the working directory, no write tokens,
    1 MiB bodies, and connection limits that keep file descriptors and memory bounded. The
    catalog's settings are CatalogSettings' fields, read here through pydantic-settings."""

    model_config = SettingsConfigDict(
        env_prefix=PREFIX,
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        allow_inf_nan=False,
    )

    database_url: Annotated[str, Field(min_length=1)] = "sqlite:///advisor.db"
    # Comma-separated in the environment; never printed (SecretStr hides them in reprs).
    api_tokens: Annotated[tuple[SecretStr, ...], NoDecode] = ()
    # A write token bound to the hosts it may report for: JSON {"<token>": ["gpu-*.dc1", ...]}
    # (shell globs over normalised host names, advisor.fleet.hosts); a token not named here
    # reports for any host. Secret like the tokens (never printed).
    token_hosts: Annotated[dict[str, tuple[str, ...]], Field(repr=False)] = {}
    # Guard the reads that name hosts, GPUs and processes; empty: those reads are open.
    read_tokens: Annotated[tuple[SecretStr, ...], NoDecode] = ()
    max_body_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = 1024 * 1024
    min_fleet_reports: Annotated[int, Field(ge=1)] = MIN_FLEET_REPORTS
    # PostgreSQL: seconds to make a connection and to wait for a free pooled one (libpq counts
    # whole seconds, at least 2). A database that is down costs the first request this long.
    database_timeout_s: Annotated[float, Field(ge=1, le=60)] = 2.0
    # Once the database is seen unreachable, every request is answered 503 at once (Retry-After)
    # for this long, then one request tries it again (advisor.store.guard).
    database_retry_s: Annotated[float, Field(gt=0, le=600)] = 2.0
    # Seconds the fleet's calibration and the review page are reused before the store is read
    # again for reports that other processes (other replicas on one PostgreSQL) stored; reports
    # this process stores refresh them at once.
    fleet_refresh_s: Annotated[float, Field(gt=0, le=86_400)] = 60.0
    # uvicorn (advisor/api/server.py): an idle keep-alive connection is closed after
    # keep_alive_s; a request whose head has not fully arrived header_timeout_s after its first
    # byte, or whose body has not body_timeout_s after its head, or either not request_timeout_s
    # after its first byte, is answered 408 and dropped; connections
    # beyond max_connections + reserved_connections are answered 503 and closed at once (each
    # open connection holds a file descriptor and buffers).
    keep_alive_s: Annotated[int, Field(ge=1, le=3600)] = 5
    request_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    # A connection that has sent no byte this long after it opened is closed (quietly):
    # otherwise 1,200 such sockets would hold the whole cap for request_timeout_s. A client on any
    # network sends its request within milliseconds of connecting.
    idle_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 5.0
    # 1,100 sockets that each sent one byte once held the cap for the whole request timeout: a
    # request line and headers come in one packet from any client, a 1 MiB body in well under
    # 15 s on any link the fleet uses.
    header_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 5.0
    body_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 15.0
    # At max_connections, a request (head or body) silent this long is closed (408) to make
    # room for a new connection when no idle connection can.
    stalled_request_s: Annotated[float, Field(gt=0, le=3600)] = 1.0
    max_connections: Annotated[int, Field(ge=1, le=1_000_000)] = 1000
    # Accepted beyond max_connections for GET /healthz and /readyz alone (other paths on them
    # are a 503): liveness and readiness probes still answer while slow clients hold the cap.
    reserved_connections: Annotated[int, Field(ge=0, le=10_000)] = 20
    # Open connections one client may hold (its idlest makes room, else a 503): an IPv4
    # address, or an IPv6 /64 (one host owns a whole /64). On by default (slow clients from one
    # address cannot fill the cap); behind a proxy or load balancer every client has the proxy's
    # address: raise it there, or 0 for no cap.
    max_connections_per_client: Annotated[int, Field(ge=0, le=1_000_000)] = 64
    # Sized recommendations and estimates (tens of ms to a second of CPU each) run one at a
    # time on the engine's thread (advisor/api/engine_queue.py): one client (counted as the
    # connection cap counts it) may have this many waiting or running, beyond that a 429
    # (0: no bound; behind a proxy every client is the proxy, as above); all clients together
    # engine_max_queued, beyond that a 503.
    engine_max_per_client: Annotated[int, Field(ge=0, le=1_000_000)] = 2
    engine_max_queued: Annotated[int, Field(ge=1, le=1_000_000)] = 64
    # The request line plus headers (bytes), complete or not: larger is a 400 before any route.
    max_header_bytes: Annotated[int, Field(ge=1024, le=1024 * 1024)] = 16 * 1024

    @field_validator("api_tokens", "read_tokens", mode="before")
    @classmethod
    def _split_tokens(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(t.strip() for t in value.split(",") if t.strip())
        return value

    @model_validator(mode="after")
    def _bound_tokens_exist(self) -> Settings:
        known = {t.get_secret_value() for t in self.api_tokens}
        unknown = sum(1 for token in self.token_hosts if token not in known)
        if unknown:
            raise ValueError(
                f"token_hosts binds {unknown} token(s) that ADVISOR_API_TOKENS does not list"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Arguments first, then the environment; no .env or secrets files: one place to look.
        return init_settings, _Environ(settings_cls, _ENVIRON.get() or os.environ)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings from `environ` (default os.environ); InputError naming each bad
        variable."""
        token = _ENVIRON.set(environ if environ is not None else os.environ)
        try:
            return cls()
        except ValidationError as exc:
            problems = "; ".join(
                f"{ENV.get(f.split('.')[0].split('[')[0], f)}: {m}"
                for f, m in explain_validation(exc, cls)
            )
            raise InputError(f"invalid service settings: {problems}") from None
        finally:
            _ENVIRON.reset(token)


def _env_name(name: str, info: FieldInfo) -> str:
    alias = info.validation_alias
    return alias if isinstance(alias, str) else PREFIX + name.upper()


ENV = {name: _env_name(name, info) for name, info in Settings.model_fields.items()}
