"""The `advisor` command line. Thin: parses flags, calls the core, renders tables or JSON.

Each command's module is imported only when that command runs (or for the top-level --help):
`advisor estimate` has no business importing the probe, the monitor or the review, and the
imports are most of a command's wall time.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import Annotated, Any

import typer

from advisor.cli.common import STATE, err_console
from advisor.errors import AdvisorError, InputError, flag_name

# Global options, accepted before or after the command: main() moves them in front of it.
GLOBAL_FLAGS = frozenset({"--debug", "--no-debug", "--replace-catalog", "--no-replace-catalog"})
GLOBAL_WITH_VALUE = frozenset({"--catalog"})
GLOBAL_NOTE = "Global options --catalog DIR, --replace-catalog and --debug work here too."

# command name -> (module, attribute): a function, or a Typer app for a command group
COMMANDS: dict[str, tuple[str, str]] = {
    "catalog": ("advisor.cli.catalog_cmd", "app"),
    "recommend": ("advisor.cli.recommend_cmd", "recommend"),
    "probe": ("advisor.cli.probe_cmd", "probe"),
    "monitor": ("advisor.cli.monitor_cmd", "monitor"),
    "doctor": ("advisor.cli.doctor_cmd", "doctor"),
    "serve": ("advisor.cli.serve_cmd", "serve"),
    "review": ("advisor.cli.review_cmd", "review"),
    "estimate": ("advisor.cli.estimate_cmd", "estimate_cmd"),
}


def build_app(only: str | None = None) -> typer.Typer:
    """The CLI with every command, or with `only` that one (the others are not imported)."""
    cli = typer.Typer(
        name="advisor",
        help="Compute-resource advisor: recommends hardware for a workload and verifies GPU "
        "machines. Global options may come before or after the command.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    cli.callback()(_global)
    for name, (module, attribute) in COMMANDS.items():
        if only is not None and name != only:
            continue
        target = getattr(importlib.import_module(module), attribute)
        if isinstance(target, typer.Typer):
            cli.add_typer(target, name=name)
            infos = target.registered_commands
        else:
            cli.command(name)(target)
            infos = cli.registered_commands[-1:]
        for info in infos:
            info.epilog = info.epilog or GLOBAL_NOTE  # each command's --help says so
    return cli


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


def _command(args: list[str]) -> str | None:
    """The command `args` (globals hoisted) run, if it is a known one."""
    for i, arg in enumerate(args):
        if arg in GLOBAL_WITH_VALUE:
            continue
        if arg.startswith("-") or (i and args[i - 1] in GLOBAL_WITH_VALUE):
            continue
        return arg if arg in COMMANDS else None
    return None


def main(argv: list[str] | None = None) -> None:
    args = hoist_globals(sys.argv[1:] if argv is None else argv)
    try:
        build_app(_command(args))(args=args, prog_name="advisor")
    except AdvisorError as exc:  # bad input, a bad catalog, a bad setting: all exit 2
        _fail(exc, 2)


def _fail(exc: Exception, code: int) -> None:
    if STATE.debug:
        traceback.print_exc()
    text = exc.render(flag_name) if isinstance(exc, InputError) else str(exc)
    err_console().print(f"[bold red]error:[/] {text}", highlight=False, soft_wrap=True)
    sys.exit(code)


def __getattr__(name: str) -> Any:
    """`advisor.cli.app`: the whole CLI, built on first use (tests and docs tools use it)."""
    if name == "app":
        globals()["app"] = build_app()
        return globals()["app"]
    raise AttributeError(name)
