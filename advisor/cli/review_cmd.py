"""`advisor review`: the capacity-planning review of a fleet, as one self-contained HTML page."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from advisor.cli.common import emit_json, err_console, get_catalog
from advisor.did_you_mean import unknown
from advisor.errors import InputError
from advisor.http_client import HttpClient, service_url
from advisor.outputs import check_output_path, write_atomically


def review(
    server: Annotated[
        str | None,
        typer.Option(help="Service URL to read probe and utilisation reports from."),
    ] = None,
    reports: Annotated[
        Path | None,
        typer.Option(help="Directory of report *.json files (probe and utilisation reports)."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(help="Where to write the HTML page (default review.html)."),
    ] = None,
    catalog_region: Annotated[
        str | None,
        typer.Option(
            help="Price suggestions and workload costs in this region (default: the current "
            "price's region for suggestions, each instance type's cheapest for costs)."
        ),
    ] = None,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json", "-j", help="Print the review's figures as JSON (HTML only with --output)."
        ),
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(envvar="ADVISOR_TOKEN", help="Bearer token for --server, if it needs one."),
    ] = None,
) -> None:
    """Fleet review: inventory, measured vs expected, outliers, savings, cost per workload."""
    from advisor.review import build_review, from_dir, from_server, render_html

    if (server is None) == (reports is None):
        raise InputError("give exactly one of --server URL or --reports DIR")
    if server is not None:
        service_url(server, "--server")
    target = output or (None if json_out else Path("review.html"))
    if target is not None:
        check_output_path(target)
    catalog = get_catalog()
    if catalog_region is not None and catalog_region not in catalog.regions:
        raise InputError(unknown("--catalog-region", catalog_region, catalog.regions))
    started = time.perf_counter()
    if server is not None and not json_out and target is not None:
        page = _served_page(server, token, catalog_region)
        if page is not None:  # the service builds it from its store: no report crosses the wire
            write_atomically(target, page)
            err_console().print(
                f"wrote {target} as served by {server} ({time.perf_counter() - started:.1f} s)",
                highlight=False,
                markup=False,
            )
            return
    data = from_dir(reports) if reports is not None else from_server(str(server), token)
    result = build_review(data, catalog, catalog_region)
    if target is not None:
        write_atomically(target, render_html(result))
    if json_out:
        emit_json(result.to_dict())
    inv = result.inventory
    where = f"wrote {target}: " if target is not None else ""
    err_console().print(
        f"{where}{inv.reports:,} probe reports from {inv.hosts:,} hosts, "
        f"{inv.usage_reports:,} utilisation reports, {len(result.outliers):,} outlier rows, "
        f"{len(result.savings):,} GPUs to downsize ({time.perf_counter() - started:.1f} s)",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


def _served_page(server: str, token: str | None, region: str | None) -> str | None:
    """GET /v1/review; None when the service has no such route (an older version)."""
    with HttpClient(server, token, timeout_s=120) as client:
        reply = client.get("/v1/review", {"region": region} if region else None)
    if reply.status == 404:
        return None
    if reply.status in (401, 403):  # the service guards the review with ADVISOR_READ_TOKENS
        given = "the token given is not accepted" if token else "it needs a token"
        raise InputError(
            f"--server: GET /v1/review answered HTTP {reply.status}: {given} "
            "(--token or ADVISOR_TOKEN: one of the service's read or write tokens)"
        )
    if reply.status != 200:
        raise InputError(f"--server: GET /v1/review answered HTTP {reply.status}")
    return reply.content.decode("utf-8", errors="replace")
