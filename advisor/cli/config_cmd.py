"""`advisor config ...`: the config file's defaults, what is in force and where it comes from."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated

import typer

from advisor.cli.common import console, emit_json
from advisor.cli.config_file import (
    DEFAULTS,
    Command,
    ConfigFile,
    Parameter,
    Value,
    check_all,
    commands,
    config_path,
    option_names,
    read_config,
)
from advisor.cli.tables import Column, print_table

app = typer.Typer(
    help="Show the config file's defaults, which are in force and where each comes from.",
    no_args_is_help=True,
)

JsonOpt = Annotated[bool, typer.Option("--json", "-j", help="Print JSON for tools.")]
SECRET_WORDS = ("TOKEN", "PASSWORD", "SECRET")
SECRET_KEYS = ("token", "password", "secret")  # a config key's: shown as set, never its value


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


@dataclass(frozen=True)
class InForce:
    command: str
    option: str  # the flag, e.g. --region
    value: Value
    source: str  # "config file [recommend]", "environment ADVISOR_TOKEN (wins over the file)"


def in_force(root: Command, config: ConfigFile) -> list[InForce]:
    """Per command and option the file sets, the value in force and where it comes from: the
    option's environment variable when set (it wins), else the file's table."""
    rows = []
    own_tables = config.sections
    for path, command in commands(root):
        names = option_names(command)
        for key in sorted(set(own_tables.get(DEFAULTS, {})) | set(own_tables.get(path, {}))):
            param = names.get(key)
            if param is None:
                continue
            table = path if key in own_tables.get(path, {}) else DEFAULTS
            value = own_tables[table][key]
            source = f"config file [{table}]"
            envvar = _set_envvar(param)
            if envvar is not None:
                value, source = os.environ[envvar], f"environment {envvar} (wins over the file)"
            flag = max(param.opts, key=len)
            if any(word in key for word in SECRET_KEYS):
                value = "(set, not shown)"
            rows.append(InForce(path.replace(".", " "), flag, value, source))
    return rows


def _set_envvar(param: Parameter) -> str | None:
    names = param.envvar if isinstance(param.envvar, list | tuple) else [param.envvar]
    return next((n for n in names if n and n in os.environ), None)
