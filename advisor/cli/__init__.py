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

# Global options, accepted before or after the command: main() moves them in front of it.
GLOBAL_FLAGS = frozenset({"--debug", "--no-debug", "--replace-catalog", "--no-replace-catalog"})
GLOBAL_WITH_VALUE = frozenset({"--catalog"})
GLOBAL_NOTE = "Global options --catalog DIR, --replace-catalog and --debug work here too."

app = typer.Typer(
    name="advisor",
    help="Compute-resource advisor: recommends hardware for a workload and verifies GPU machines. "
    "Global options may come before or after the command.",
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
for _info in [*app.registered_commands, *catalog_cmd.app.registered_commands]:
    _info.epilog = _info.epilog or GLOBAL_NOTE  # each command's --help says so


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


def hoist_globals(argv: list[str]) -> list[str]:
    """The global options in `argv`, wherever they stand, moved to the front (in their order),
    so that `advisor recommend ... --debug` means `advisor --debug recommend ...`. Nothing after
    a bare `--` moves: that is where arguments end."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest += argv[i:]
            break
        if arg in GLOBAL_FLAGS or (arg.partition("=")[0] in GLOBAL_WITH_VALUE and "=" in arg):
            front.append(arg)
        elif arg in GLOBAL_WITH_VALUE and i + 1 < len(argv):
            front += argv[i : i + 2]
            i += 1
        else:
            rest.append(arg)
        i += 1
    return front + rest


def main(argv: list[str] | None = None) -> None:
    args = hoist_globals(sys.argv[1:] if argv is None else argv)
    try:
        app(args=args, prog_name="advisor")
    except AdvisorError as exc:  # bad input, a bad catalog, a bad setting: all exit 2
        _fail(exc, 2)


def _fail(exc: Exception, code: int) -> None:
    if STATE.debug:
        traceback.print_exc()
    err_console().print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
    sys.exit(code)
