"""`advisor serve`: the HTTP API under uvicorn. fastapi is imported here only, lazily."""

from __future__ import annotations

import logging
from typing import Annotated

import typer


def serve(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to bind.")] = 8080,
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
    uvicorn.run(
        app,
        host=host,
        port=port,
        access_log=access_log,
        log_level=log_level,
        timeout_graceful_shutdown=5,
    )
