"""`advisor serve`: the HTTP API under uvicorn. fastapi is imported here only, lazily.

The port is bound here, before uvicorn starts, so that a port in use (or one this user may not
bind) is bad usage: exit 2 with one line, instead of uvicorn's log and exit 1.
"""

from __future__ import annotations

import contextlib
import logging
import logging.config
import socket
from enum import StrEnum
from typing import Annotated, Any

import typer

from advisor.errors import InputError


class LogFormat(StrEnum):
    text = "text"
    json = "json"


def serve(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port to bind (0: any free port, printed).")
    ] = 8080,
    access_log: Annotated[bool, typer.Option(help="Log every request (never headers).")] = True,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error")] = "info",
    log_format: Annotated[
        LogFormat, typer.Option(help="text, or json: one JSON object per line, for collectors.")
    ] = LogFormat.text,
) -> None:
    """Serve the HTTP API (settings: ADVISOR_DATABASE_URL, ADVISOR_API_TOKENS, ...)."""
    from advisor.api import create_app
    from advisor.api.server import uvicorn_config
    from advisor.api.settings import Settings

    options: dict[str, Any] = {}
    if log_format is LogFormat.json:
        from advisor.cli.json_logs import logging_config

        options["log_config"] = logging_config(log_level)
        logging.config.dictConfig(options["log_config"])
    else:
        logging.basicConfig(
            level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    settings = Settings.from_env()
    app = create_app(settings)  # settings, catalog and database are checked before the port opens
    sock = listen_socket(host, port)
    bound_port = sock.getsockname()[1]
    config = uvicorn_config(
        app,
        settings,
        host=host,
        port=bound_port,
        access_log=access_log,
        log_level=log_level,
        **options,
    )
    shown = f"[{host}]" if ":" in host else host
    line = f"advisor serve: listening on http://{shown}:{bound_port}"
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is a normal stop, as in uvicorn.run
        _announcing(config, line).run(sockets=[sock])


def _announcing(config: Any, line: str) -> Any:
    """uvicorn's server that prints `line` once start-up is complete: the lifespan has run and
    the socket listens. Printed earlier, a client that connected on it would be refused.
    Always printed, whatever the log level: tests and benchmarks read the port from it.
    (uvicorn is imported here, not at the top: every other command would pay for it.)"""
    import uvicorn

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and not self.should_exit:
                typer.echo(line, err=True)

    return Announcing(config)


def listen_socket(host: str, port: int) -> socket.socket:
    """A bound TCP socket for host:port (uvicorn listens on it); InputError when it cannot be."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise InputError(f"--host {host!r}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock
