"""The command line of a request: each field of a request model (advisor/request.py) becomes a
Typer option, its flag, short flag, --help line and panel read from the field's Cli mark; the
command's own options (output, --server) are written beside them in the command."""

from __future__ import annotations

import enum
import inspect
import json
import types
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from advisor.errors import InputError, field_name, flag_name
from advisor.request import OUTPUT, PANELS, Cli

if TYPE_CHECKING:  # imported with --server alone: most runs never calibrate from a fleet
    from advisor.perf.calibration import Calibration

JsonOut = Annotated[
    bool, typer.Option("--json", "-j", rich_help_panel=OUTPUT, help="Print JSON for tools.")
]
Server = Annotated[
    str | None,
    typer.Option(
        rich_help_panel=OUTPUT,
        envvar="ADVISOR_SERVER",
        help="Service URL: calibrate efficiency from its fleet.",
    ),
]

# The name of a command function's parameter that receives the request's fields.
FIELDS = "fields"


def cli_mark(info: FieldInfo) -> Cli | None:
    """A request field's command-line declaration, if it has one."""
    return next((m for m in info.metadata if isinstance(m, Cli)), None)


def _cli_type(annotation: Any) -> tuple[type, bool]:
    """The type the command line reads a field as, and whether None is among its values: a
    choice (a Literal or an enum) is read as a word, which the model then checks, so that its
    error is the one the HTTP API gives."""
    args = get_args(annotation)
    optional = get_origin(annotation) in (Union, types.UnionType) and type(None) in args
    base = next((a for a in args if a is not type(None)), annotation) if optional else annotation
    if get_origin(base) is Literal or (isinstance(base, type) and issubclass(base, enum.Enum)):
        return str, optional
    return base, optional


def _option(name: str, info: FieldInfo, mark: Cli) -> inspect.Parameter:
    """The Typer option of one request field: --name-with-dashes (the one rule errors name a
    field by, errors.flag_name), the short flag, help and panel of its Cli mark, its default."""
    kind, optional = _cli_type(info.annotation)
    if mark.json_file or mark.trace_file:  # the option names a file; run() reads it
        kind, optional = str, True
    flag = flag_name(name)
    if kind is bool and optional:  # unset means "as needed": both words are offered
        flag = f"{flag}/--no-{flag[2:]}"
    decls = [flag, mark.short] if mark.short else [flag]
    default = info.default.value if isinstance(info.default, enum.Enum) else info.default
    if info.is_required():
        default = inspect.Parameter.empty
    option = typer.Option(*decls, rich_help_panel=mark.panel, help=mark.help)
    cli_type = kind | None if optional else kind
    annotation = Annotated[cli_type, option]  # type: ignore[valid-type]
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


def read_json_file(field: str, path: str) -> Any:
    """A JSON file's content for a request field; InputError (exit 2) naming the field when it
    cannot be read or parsed."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{field_name(field)}: cannot read {path}: {e}", field=field) from None
    except json.JSONDecodeError as e:
        raise InputError(
            f"{field_name(field)}: {path} is not JSON (line {e.lineno}, column {e.colno}: {e.msg})",
            field=field,
        ) from None


def read_trace_file(field: str, path: str) -> list[dict[str, Any]]:
    """A trace file's rows for a request field (advisor/perf/trace_file.py reads and checks
    them, naming a bad row's line); InputError (exit 2) naming the field when it cannot be
    read."""
    from advisor.perf.trace_file import read_trace

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{field_name(field)}: cannot read {path}: {e}", field=field) from None
    return [
        {"arrival_s": r.arrival_s, "input_tokens": r.input_tokens, "output_tokens": r.output_tokens}
        for r in read_trace(text)
    ]


def _panel(p: inspect.Parameter) -> int:
    """Where an option's --help panel stands in PANELS (an option without one: last)."""
    for meta in get_args(p.annotation)[1:]:
        where = getattr(meta, "rich_help_panel", None)
        if where in PANELS:
            return PANELS.index(where)
    return len(PANELS)


def request_options(model: type[BaseModel]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A command whose options are `model`'s fields (each with a Cli mark) beside the command's
    own: the command function takes the fields given as one dict, `fields`, and its own
    options as usual. --help lists them panel by panel (PANELS), each in the model's order."""

    def wrap(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != FIELDS]
        fields = [
            _option(name, info, mark)
            for name, info in model.model_fields.items()
            if (mark := cli_mark(info)) is not None
        ]
        names = {p.name for p in fields}
        files = {n for n, i in model.model_fields.items() if (m := cli_mark(i)) and m.json_file}
        traces = {n for n, i in model.model_fields.items() if (m := cli_mark(i)) and m.trace_file}
        if names & {p.name for p in own}:
            raise TypeError(f"{command.__name__}: an option is also a field of {model.__name__}")
        ordered = sorted(
            [*fields, *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own)], key=_panel
        )

        def run(**given: Any) -> None:
            request = {name: given.pop(name) for name in names}
            for name in files:
                if request[name] is not None:
                    path = Path(request[name])
                    request[name] = content = read_json_file(name, request[name])
                    if isinstance(content, dict):  # named by its folder (a checkpoint) or file
                        named = path.resolve().parent.name if path.stem == "config" else path.stem
                        content.setdefault("_name_or_path", named)
            for name in traces:
                if request[name] is not None:
                    request[name] = read_trace_file(name, request[name])
            command(**{FIELDS: request}, **given)

        run.__name__, run.__doc__ = command.__name__, command.__doc__
        run.__signature__ = inspect.Signature(ordered)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in ordered}
        return run

    return wrap


def fleet_from_server(url: str | None) -> dict[str, Calibration] | None:
    """The fleet's calibration from a running service, or None without --server."""
    if not url:
        return None
    from advisor.http_client import HttpClient  # only with --server: most runs never call one
    from advisor.perf.calibration import calibrations

    with HttpClient(url) as client:
        reply = client.get("/v1/fleet/summary")
    summaries = reply.json() if reply.status == 200 else None
    if not isinstance(summaries, list):
        raise InputError(f"--server: GET {reply.url} answered HTTP {reply.status}, not a summary")
    return calibrations(summaries)
