"""`advisor config ...`: the config file's defaults, what is in force and where it comes from."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from advisor.cli.common import console, emit_json
from advisor.cli.config_file import check_all, config_path, in_force, read_config
from advisor.cli.tables import Column, print_table

app = typer.Typer(
    help="Show the config file's defaults, which are in force and where each comes from.",
    no_args_is_help=True,
)

JsonOpt = Annotated[bool, typer.Option("--json", "-j", help="Print JSON for tools.")]
SECRET_WORDS = ("TOKEN", "PASSWORD", "SECRET")


@app.command("show")
def show(json_out: JsonOpt = False) -> None:
    """The config file's path, each default it sets per command with its source (a flag on the
    command line still wins over both), and the ADVISOR_* environment in force."""
    from typer.main import get_command

    from advisor.cli import build_app

    path = config_path()
    config = read_config(path)
    rows = []
    if config is not None:
        root = get_command(build_app())
        check_all(root, config)
        rows = in_force(root, config)
    environment = {
        k: _shown(k, v) for k, v in sorted(os.environ.items()) if k.startswith("ADVISOR_")
    }
    if json_out:
        emit_json(
            {
                "config_file": str(path),
                "exists": config is not None,
                "defaults": [
                    {"command": r.command, "option": r.option, "value": r.value, "source": r.source}
                    for r in rows
                ],
                "environment": environment,
            }
        )
        return
    out = console()
    state = "" if config is not None else " (none: built-in defaults apply)"
    typer.echo(f"config file: {path}{state}")
    if rows:
        columns = [
            Column("command", key=True),
            Column("option", key=True),
            Column("value", key=True),
            Column("from", drop_rank=1),
        ]
        cells = [[r.command, r.option, str(r.value), r.source] for r in rows]
        print_table(out, f"{len(rows)} default(s) in force", columns, cells)
    for name, value in environment.items():
        typer.echo(f"environment: {name}={value}")


@app.command("path")
def path_cmd() -> None:
    """Print where the config file is read from ($ADVISOR_CONFIG, else the user config dir)."""
    typer.echo(str(config_path()))


def _shown(name: str, value: str) -> str:
    return "(set, not shown)" if any(w in name for w in SECRET_WORDS) else value
