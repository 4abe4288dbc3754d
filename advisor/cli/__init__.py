"""The `advisor` command line. Thin: parses flags, calls the core, renders tables or JSON.

Each command's module is imported only when that command runs (or for the top-level --help):
`advisor estimate` has no business importing the probe, the monitor or the review, and the
imports are most of a command's wall time.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import traceback
from typing import Annotated, Any

import typer

from advisor.cli.common import STATE, print_error
from advisor.collector import long_lived
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
    "compare": ("advisor.cli.compare_cmd", "compare_cmd"),
    "calibrate": ("advisor.cli.calibrate_cmd", "app"),
    "deploy": ("advisor.cli.deploy_cmd", "app"),
    "config": ("advisor.cli.config_cmd", "app"),
}


# Each command's line in the top-level --help, as its own module words it (its docstring's first
# paragraph, or the group's help=): the list is printed without importing seven modules (0.3 s
# of the 0.48 s `advisor --help` took). tests/test_cli_help.py holds them to the modules' own.
SUMMARIES: dict[str, str] = {
    "catalog": "Browse and validate the catalog.",
    "recommend": "Recommend hardware for a workload; exit 1 when nothing satisfies the "
    "constraints.",
    "probe": "Measure every GPU (matmul, transfers, overlap), the peer links, NCCL collectives "
    "and the health counters, and verify them against the catalog.",
    "monitor": "Sample GPU utilisation, memory, power and throttling; classify each GPU (idle, "
    "over_provisioned, under_provisioned, optimized).",
    "doctor": "Run CMD (or watch --pid, or every GPU with --node) and diagnose its use of the "
    "GPU: where its time goes; never used, idle reservation, input-, host-, sync- or "
    "transfer-bound, tensors made on the CPU, under-used; each finding with evidence, a fix and "
    "its price.",
    "serve": "Serve the HTTP API (settings: ADVISOR_DATABASE_URL, ADVISOR_API_TOKENS, ...).",
    "review": "Fleet review: inventory, measured vs expected, outliers, savings, cost per "
    "workload.",
    "estimate": "Every intermediate figure with its formula: memory per GPU, FLOPs, hours, cost.",
    "compare": "One workload on several instance types side by side (each column is `estimate`).",
    "calibrate": "Compare measured serving runs with the model.",
    "deploy": "Render Kubernetes manifests or Slurm scripts that run advisor probe.",
    "config": "Show the config file's defaults, which are in force and where each comes from.",
}


def _flags_without_metavar() -> None:
    """A flag takes no value, so its help line shows none: Typer's rich help would print a
    `<bool>` type beside every --json or --wide, as if it took one."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(TyperOption, "_advisor_flags", False):
        return  # a Typer without the hook (older or newer) prints its own help unchanged

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
    TyperOption._advisor_flags = True  # type: ignore[attr-defined]


class _Unchanged:
    """A parameter's coercion for a value of None, which typer's own (typer/_coercion.py
    RuntimeParam.coerce) returns unchanged for a parameter taking one value."""

    @staticmethod
    def coerce(value: Any, param: Any, ctx: Any) -> Any:
        return value


def _coerce_given_values_only() -> None:
    """Typer builds each option's coercion (a pydantic TypeAdapter, its schema and validator)
    when the command line is parsed, for an option left unset too, whose None it then returns
    unchanged: `advisor recommend` built 49 adapters to use 7 (about 2 ms of its start-up,
    benchmarks/bench_startup.py). Here an unset option (None, one value) is processed as typer
    processes it (its required check and callback run as before) with a coercion that returns
    the None, and its adapter is built when a value comes to coerce."""
    try:
        from typer.core import _TyperParameter
    except ImportError:  # a typer without that class (older ones): left as it is
        return
    original = getattr(_TyperParameter, "process_value", None)
    if original is None or getattr(_TyperParameter, "_advisor_lazy", False):
        return
    if "_runtime_param" not in getattr(_TyperParameter, "__annotations__", {}):
        return  # a typer without the lazily built coercion this relies on: left as it is

    def process_value(self: Any, ctx: Any, value: Any) -> Any:
        single = not (self.multiple or self.nargs == -1)  # several: typer makes None ()
        if value is not None or not single or self._runtime_param is not None:
            return original(self, ctx, value)
        self._runtime_param = _Unchanged
        try:
            return original(self, ctx, value)
        finally:
            self._runtime_param = None

    _TyperParameter.process_value = process_value  # type: ignore[method-assign]
    _TyperParameter._advisor_lazy = True  # type: ignore[attr-defined]


def build_app(only: str | None = None, listing: bool = False) -> typer.Typer:
    """The CLI with every command, or with `only` that one (the others are not imported). With
    `listing` (no known command on the line: the top-level help, or a misspelt command), each
    command is registered by name and summary alone, forwarding to main() if it ever runs."""
    _flags_without_metavar()
    _coerce_given_values_only()
    cli = typer.Typer(
        name="advisor",
        help="Compute-resource advisor: recommends hardware for a workload and verifies GPU "
        "machines. Global options may come before or after the command.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=True,  # --install-completion, --show-completion
    )
    cli.callback()(_global)
    if listing:
        # in the order Typer lists the built app's: commands, then groups (a Typer "app")
        for name in sorted(COMMANDS, key=lambda n: COMMANDS[n][1] == "app"):
            cli.command(
                name,
                help=SUMMARIES[name],
                add_help_option=False,
                context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
            )(_forwarder(name))
        return cli
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


def _print_version(value: bool) -> None:
    if value:
        from advisor import __version__

        typer.echo(f"advisor {__version__}")
        sys.exit(0)


def _forwarder(name: str) -> Any:
    def forward(ctx: typer.Context) -> None:
        main([name, *ctx.args])  # the command itself, built as `advisor NAME ...` builds it

    return forward


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
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            is_eager=True,
            callback=_print_version,
            help="Print advisor's version and exit.",
        ),
    ] = False,
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


def wants_json(args: list[str]) -> bool:
    """Whether the command line asks for JSON (--json, -j, --format json): its errors are then
    JSON too, so that a tool reading the output never has to parse a sentence."""
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg in ("--json", "-j", "--format=json", "-fjson"):
            return True
        if arg in ("--format", "-f") and i + 1 < len(args) and args[i + 1] == "json":
            return True
    return False


def main(argv: list[str] | None = None) -> None:
    STATE.own_process = argv is None  # the console script: this process is the command
    args = hoist_globals(sys.argv[1:] if argv is None else argv)
    if args in (["--version"], ["-V"]):  # answered without importing a command (0.4 s -> 0.1)
        _print_version(True)
    as_json = wants_json(args)
    try:
        # standalone_mode=False: usage errors come here, to be worded as every other bad input
        # (one line, or JSON), not in Click's framed panel
        command = _command(args)
        completing = COMPLETE_VAR in os.environ  # the shell asks: every command's options
        with long_lived() if STATE.own_process else contextlib.nullcontext():
            app = build_app(
                None if completing else command, listing=command is None and not completing
            )
        code = _run(app, args)
    except AdvisorError as exc:  # bad input, a bad catalog, a bad setting: all exit 2
        _fail(exc, 2, as_json)
    except typer.TyperException as exc:  # Typer's own Click: unknown option, missing value, ...
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            # a bare `advisor` or `advisor catalog`: Typer's rich help printed the help while
            # the error was made (get_help renders it); exit as Click does
            sys.exit(exc.exit_code)
        _fail(UsageProblem(exc), exc.exit_code, as_json)
    except typer.Abort:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


COMPLETE_VAR = "_ADVISOR_COMPLETE"


def _run(app: typer.Typer, args: list[str]) -> Any:
    """Run the built CLI with the config file's defaults (advisor.cli.config_file) as each
    command's Click default_map: under the flags and environment variables, over the built-in
    defaults."""
    from typer.main import get_command

    from advisor.cli.config_file import apply_config, read_config

    root = get_command(app)
    config = read_config()
    if config is not None:
        apply_config(root, config)
    return root(args=args, prog_name="advisor", standalone_mode=False)


class UsageProblem(InputError):
    """A Click usage error, as advisor words bad input: the option it concerns is its field."""

    def __init__(self, exc: typer.TyperException) -> None:
        text = _with_hint(exc, exc.format_message())
        param = getattr(exc, "param", None)
        flag = None
        if param is not None and getattr(param, "opts", None):
            flag = max(param.opts, key=len)
        elif getattr(exc, "option_name", None):
            flag = exc.option_name  # type: ignore[attr-defined]
        super().__init__(text, field=flag)
        self.flag = flag
        ctx = getattr(exc, "ctx", None)
        self.hint = (
            f"see 'advisor {ctx.command_path.partition(' ')[2]} --help'".replace("  ", " ")
            if ctx is not None
            else None
        )


# a pattern string: compiled by re (and cached there) when first used, not at every start-up
_NOT_ONE_OF = r"'(?P<word>[^']*)' is not one of (?P<choices>('[^']*'(, )?)+)"


def _with_hint(exc: typer.TyperException, text: str) -> str:
    """Click's message with advisor's did-you-mean where Click gives none: a value outside an
    option's choices, an option the command does not have."""
    from advisor.did_you_mean import did_you_mean

    if "did you mean" in text.lower() or "possible options" in text.lower():
        return text
    found = re.search(_NOT_ONE_OF, text)
    if found:
        choices = re.findall(r"'([^']*)'", found.group("choices"))
        return text.rstrip(".") + did_you_mean(found.group("word"), choices)
    option = getattr(exc, "option_name", None)
    ctx = getattr(exc, "ctx", None)
    if option and option.startswith("--") and ctx is not None:
        known = {o[2:] for p in ctx.command.params for o in (*p.opts, *p.secondary_opts)}
        hint = did_you_mean(option[2:], sorted(o for o in known if not o.startswith("-")))
        return text.rstrip(".") + hint.replace("'", "'--", 1).replace(", '", ", '--")
    return text


def _fail(exc: Exception, code: int, as_json: bool = False) -> None:
    if STATE.debug:
        traceback.print_exc()
    text = exc.render(flag_name) if isinstance(exc, InputError) else str(exc)
    if isinstance(exc, UsageProblem) and exc.hint:
        text = f"{text.rstrip('.')} ({exc.hint})"
    print_error(text, code, as_json, getattr(exc, "field", None))
    sys.exit(code)


def __getattr__(name: str) -> Any:
    """`advisor.cli.app`: the whole CLI, built on first use (tests and docs tools use it)."""
    if name == "app":
        globals()["app"] = build_app()
        return globals()["app"]
    raise AttributeError(name)
