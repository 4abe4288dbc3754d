"""The user's config file: defaults for any command's options, as a layer under the command line.

TOML at $ADVISOR_CONFIG, else `config.toml` in the user config directory (platformdirs: on Linux
$XDG_CONFIG_HOME/advisor, else ~/.config/advisor). `[defaults]` applies to every command that has
an option of that name; a table named after a command (`[recommend]`, `[catalog.instances]`)
applies to it alone and wins over `[defaults]`:

    [defaults]
    region = "us-east-1"
    server = "http://advisor.internal:8080"

    [recommend]
    objective = "performance"

Keys are option names, with dashes or underscores (`max-hourly-usd`). The file becomes each
command's Click `default_map`, so it works whatever way a command declares its options, and
Click's order holds: a flag on the command line wins, then the option's environment variable,
then this file, then the built-in default. A key no option of its command takes is an error
(exit 2) naming the valid ones.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from advisor.did_you_mean import unknown
from advisor.errors import InputError

DEFAULTS = "defaults"
Value = str | int | float | bool | list[Any]


def config_path() -> Path:
    """Where the config file is read from (it need not exist)."""
    explicit = os.environ.get("ADVISOR_CONFIG")
    if explicit:
        return Path(explicit)
    from platformdirs import user_config_path

    return user_config_path("advisor", appauthor=False) / "config.toml"


class ConfigFile(NamedTuple):
    """A NamedTuple, not a frozen dataclass: every command imports this module, and a dataclass
    takes several times as long to make (its methods are compiled when the class is)."""

    path: Path
    # section ("defaults", "recommend", "catalog.instances") -> option name -> value
    sections: dict[str, dict[str, Value]]


def read_config(path: Path | None = None) -> ConfigFile | None:
    """The config file, or None when there is none. A file that is not TOML, or not tables of
    values, is an InputError naming the file."""
    path = path or config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"config file {path}: {exc.strerror or exc}") from None
    import tomllib  # here: without a config file (most runs) nothing is parsed

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"config file {path}: not TOML: {exc}") from None
    sections: dict[str, dict[str, Value]] = {}
    for name, table in _tables(data):
        if not isinstance(table, dict):
            raise InputError(f"config file {path}: [{name}] must be a table of option = value")
        sections[name] = {_key(k): v for k, v in table.items() if not isinstance(v, dict)}
    return ConfigFile(path, sections)


def _tables(data: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Each table with its dotted name; a table of tables (`[catalog]` holding `instances`) is
    a command group, its values those of the group itself."""
    for name, value in data.items():
        dotted = f"{prefix}{name}"
        if not isinstance(value, dict):
            raise InputError(
                f"config file: {dotted} = ... stands outside a table: put it under [defaults]"
            )
        yield dotted, value
        yield from _tables({k: v for k, v in value.items() if isinstance(v, dict)}, f"{dotted}.")


def _key(name: str) -> str:
    return name.replace("-", "_")


# Commands and parameters are Typer's (its own copy of Click): read by their attributes.
Command = Any
Parameter = Any


def commands(root: Command, prefix: str = "") -> Iterator[tuple[str, Command]]:
    """Every command under `root` by dotted path ("recommend", "catalog.instances")."""
    subcommands = getattr(root, "commands", None)
    if subcommands:
        for name, sub in sorted(subcommands.items()):
            path = f"{prefix}{name}"
            yield path, sub
            yield from commands(sub, f"{path}.")


def option_names(command: Command) -> dict[str, Parameter]:
    """A command's options by the names a config key may use: each long flag without its
    dashes (`format` for --format, `max_hourly_usd`), and the parameter's own name."""
    names: dict[str, Parameter] = {}
    for param in command.params:
        if param.param_type_name != "option" or not param.name:
            continue
        names[param.name] = param
        for opt in param.opts:
            if opt.startswith("--"):
                names[_key(opt[2:])] = param
    return names


def _flags(names: dict[str, Parameter]) -> list[str]:
    return sorted({max(p.opts, key=len).lstrip("-") for p in names.values()})


def apply_config(root: Command, config: ConfigFile) -> None:
    """Each command under `root` gets its defaults from the file as its own Click default_map
    (set in its context_settings, not through the root's map, where the `catalog` command's
    table would be read as the global --catalog option's default): `[defaults]` where the
    command has the option, then the command's own table over it. Tables naming a command that
    `root` does not hold are left alone (the CLI builds only the command that runs); a key its
    command does not take is an InputError."""
    general = config.sections.get(DEFAULTS, {})
    for path, command in commands(root):
        names = option_names(command)
        own = config.sections.get(path, {})
        for key in own:
            if key not in names:
                raise InputError(
                    f"config file {config.path}: [{path}] "
                    + unknown("option", key.replace("_", "-"), _flags(names))
                )
        chosen = {k: v for k, v in general.items() if k in names} | own
        values = {names[k].name: v for k, v in chosen.items()}
        if values:
            command.context_settings = {**command.context_settings, "default_map": values}


def check_all(root: Command, config: ConfigFile) -> None:
    """Every table names a command and every key an option of it (the whole CLI is built):
    what `advisor config show` checks."""
    built = dict(commands(root))
    for section in config.sections:
        if section != DEFAULTS and section not in built:
            raise InputError(
                f"config file {config.path}: " + unknown("command table", section, built)
            )
    every = {n: p for command in built.values() for n, p in option_names(command).items()}
    for key in config.sections.get(DEFAULTS, {}):
        if key not in every:
            raise InputError(
                f"config file {config.path}: [defaults] "
                + unknown("option", key.replace("_", "-"), _flags(every))
            )
    apply_config(root, config)
