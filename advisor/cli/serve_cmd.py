"""`advisor serve`: the HTTP API under uvicorn. fastapi is imported here only, lazily."""

from __future__ import annotations

import contextlib
import logging
from typing import Annotated

import typer


def serve(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port to bind (0: any free port, printed).")
    ] = 8080,
    access_log: Annotated[bool, typer.Option(help="Log every request (never headers).")] = True,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error")] = "info",
) -> None:
    """Serve the HTTP API (settings: ADVISOR_DATABASE_URL, ADVISOR_API_TOKENS, ...)."""
    import uvicorn

    from advisor.api import create_app

    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = create_app()  # settings, catalog and database are checked before the port opens
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        access_log=access_log,
        log_level=log_level,
        timeout_graceful_shutdown=5,
    )
    sock = config.bind_socket()  # bound here so that the port printed is the one in use
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"advisor serve: listening on http://{shown}:{sock.getsockname()[1]}", err=True)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is a normal stop, as in uvicorn.run
        uvicorn.Server(config).run(sockets=[sock])
