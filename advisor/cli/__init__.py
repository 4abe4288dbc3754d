"""The `advisor` command line. Thin: parses flags, calls the core, renders tables or JSON."""

from __future__ import annotations

import os
import sys
import traceback
from typing import Annotated

import typer

from advisor.cli import (
    catalog_cmd,
    estimate_cmd,
    monitor_cmd,
    probe_cmd,
    recommend_cmd,
    review_cmd,
    serve_cmd,
)
from advisor.cli.common import STATE, err_console
from advisor.errors import AdvisorError

app = typer.Typer(
    name="advisor",
    help="Compute-resource advisor: recommends hardware for a workload and verifies GPU machines.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(catalog_cmd.app, name="catalog")
app.command("recommend")(recommend_cmd.recommend)
app.command("probe")(probe_cmd.probe)
app.command("monitor")(monitor_cmd.monitor)
app.command("serve")(serve_cmd.serve)
app.command("review")(review_cmd.review)
app.command("estimate")(estimate_cmd.estimate_cmd)


@app.callback()
def _global(
    catalog: Annotated[
        str | None,
        typer.Option(
            "--catalog",
            help="Catalog directory extending the shipped one (env ADVISOR_CATALOG).",
        ),
    ] = None,
    replace_catalog: Annotated[
        bool,
        typer.Option(help="Use --catalog alone instead of extending the shipped catalog."),
    ] = False,
    debug: Annotated[bool, typer.Option(help="Show tracebacks on errors.")] = False,
) -> None:
    STATE.catalog_dir = catalog
    STATE.replace = True if replace_catalog else None
    STATE.debug = debug or os.environ.get("ADVISOR_DEBUG") == "1"


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, prog_name="advisor")
    except AdvisorError as exc:  # bad input, a bad catalog, a bad setting: all exit 2
        _fail(exc, 2)


def _fail(exc: Exception, code: int) -> None:
    if STATE.debug:
        traceback.print_exc()
    err_console().print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
    sys.exit(code)
