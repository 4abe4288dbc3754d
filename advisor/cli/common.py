"""State and helpers shared by the CLI commands."""

from __future__ import annotations

import contextlib
import json
import re
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from advisor.collector import long_lived
from advisor.errors import InputError
from advisor.outputs import write_json

if TYPE_CHECKING:  # rich is imported when something is printed through it, not for --json
    from rich.console import Console

    # the catalog's models are imported by the commands that load it, not by `advisor --help`
    # or `--version`, which import this module too
    from advisor.catalog import Catalog
    from advisor.report_client import ReportSender

# Options shared by the commands that produce a report (probe, monitor).
JsonReport = Annotated[bool, typer.Option("--json", "-j", help="Print the full report as JSON.")]
OutputFile = Annotated[Path | None, typer.Option(help="Also write the full JSON report here.")]
ReportTo = Annotated[
    str | None, typer.Option(help="Service URL to send the report to (retried, else spooled).")
]
Token = Annotated[
    str | None, typer.Option(envvar="ADVISOR_TOKEN", help="Bearer token for --report-to.")
]
SpoolDir = Annotated[
    Path | None, typer.Option(help="Where undelivered reports wait (env ADVISOR_SPOOL_DIR).")
]


class _State:
    """The global options of the command line running. A plain class, not a dataclass: every
    command (--help and --version too) imports this module, and a dataclass takes several times
    as long to make (its methods are compiled when the class is)."""

    def __init__(self) -> None:
        self.catalog_dir: str | None = None
        self.replace: bool | None = None
        self.debug = False
        # A command line run as its own process (advisor.cli.main from the console script): what
        # it imports and loads lives until it exits, so the collector is kept off it
        # (advisor/collector.py). Not when the CLI runs inside another program (tests, CliRunner).
        self.own_process = False


STATE = _State()


def esc(value: object) -> str:
    """Text to put inside a Rich markup string: Rich reads `[probe]` in `pip install
    'advisor[probe]'` as a tag and drops it, so every value printed beside markup goes
    through here (tests/test_cli_help.py renders the messages through the console)."""
    from rich.markup import escape

    return escape(str(value))


def print_error(text: str, code: int, as_json: bool, field: str | None = None) -> None:
    """The one way a command says it failed, on stderr: `error: TEXT` on one line, or with
    --json one JSON object {"error", "field", "exit_code"} (and "flag", the field's option)."""
    if as_json:
        body: dict[str, Any] = {"error": text, "field": field, "exit_code": code}
        if field is not None and not field.startswith("-"):
            from advisor.errors import flag_name

            body["flag"] = flag_name(field)
        sys.stderr.write(json.dumps(body) + "\n")
        return
    err_console().print(f"[bold red]error:[/] {esc(text)}", highlight=False, soft_wrap=True)


@cache
def err_console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


@cache
def console() -> Console:
    from rich.console import Console

    return Console()


def kept() -> contextlib.AbstractContextManager[None]:
    """Around building what the command process keeps: long_lived (advisor/collector.py) in the
    console script's own process, nothing when the CLI runs inside another program."""
    return long_lived() if STATE.own_process else contextlib.nullcontext()


def get_catalog() -> Catalog:
    from advisor.catalog.loading import catalog_cache_dir, load_catalog

    with kept():
        catalog = load_catalog(
            STATE.catalog_dir, replace=STATE.replace, cache_dir=catalog_cache_dir()
        )
    for warning in catalog.warnings:
        err_console().print(f"[yellow]warning:[/] {esc(warning)}", highlight=False)
    return catalog


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def save_report(output: Path, data: Any) -> bool:
    """Write the report to --output; False (and one line on stderr) when it cannot be written,
    so that the command still prints the report and then exits 2."""
    try:
        write_json(output, data)
    except OSError as exc:
        err_console().print(  # strerror: the temporary file's name would only confuse
            f"[bold red]error:[/] cannot write --output {esc(output)}: {esc(exc.strerror or exc)}",
            highlight=False,
            soft_wrap=True,
        )
        return False
    return True


def deliver(sender: ReportSender, data: dict[str, Any], who: str) -> None:
    """Send a report (retried, else spooled) and say what happened on stderr."""
    err = err_console()
    outcome = sender.send(data)
    for report_id in outcome.sent:
        err.print(
            f"{who}: report delivered to {sender.endpoint} (id {report_id})",
            highlight=False,
            markup=False,
        )
    for reason in outcome.rejected:
        err.print(
            f"[red]{who}: the service refused a report ({esc(reason)}); kept in "
            f"{esc(sender.spool / 'rejected')}[/]",
            highlight=False,
        )
    if outcome.spooled is not None:
        err.print(
            f"[yellow]{who}: could not deliver the report ({esc(outcome.error)}); saved to "
            f"{esc(outcome.spooled)}: the next run with --report-to sends it[/]",
            highlight=False,
        )
    elif outcome.pending:
        err.print(
            f"{who}: {outcome.pending} older report(s) still wait in {sender.spool}", markup=False
        )


_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
# a pattern string: compiled by re (and cached there) when first used, not at every start-up
_PART = r"(\d+(?:\.\d+)?)\s*(ms|min|s|m|h)?\s*"


def parse_duration(text: str, flag: str) -> float:
    """Seconds from '30s', '10m', '1h', '1h30m', '500ms' or a bare number of seconds."""
    compact = text.strip().lower()
    parts = list(re.finditer(_PART, compact))
    if not compact or "".join(p.group(0) for p in parts) != compact:
        raise InputError(f"{flag} {text!r} is not a duration: use e.g. 30s, 10m, 1h or 1h30m")
    if len(parts) > 1 and any(p.group(2) is None for p in parts):
        raise InputError(f"{flag} {text!r}: give a unit to every part (e.g. 1h30m)")
    seconds = sum(float(p.group(1)) * _UNIT_S[p.group(2) or "s"] for p in parts)
    if seconds <= 0:
        raise InputError(f"{flag} must be longer than zero, got {text!r}")
    return seconds
