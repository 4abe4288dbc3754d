"""Help that is true. Messages are text, not Rich markup (a `[probe]` stays); every
choice flag names the same valid values in --help and in its error; --help in groups, with no
option name cut at 60 or 80 columns."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from advisor import cli, load_catalog
from advisor.cli import common
from advisor.errors import InputError
from probes.errors import INSTALL_PROBE_EXTRA
from tests.test_probe_cli import BLOCK_TORCH


def run(*args: str, columns: str = "80") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": columns}
    return subprocess.run(
        [sys.executable, "-m", "advisor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def words(text: str) -> str:
    return " ".join(text.split())


MARKUP_LIKE = [
    INSTALL_PROBE_EXTRA,  # "pip install 'advisor[probe]' (from a clone: pip install -e '.[probe]')"
    "a [bold]literal[/bold] and [/] and [red]",
    "path C:\\reports\\[x]",
]


@pytest.mark.parametrize("text", MARKUP_LIKE)
def test_error_messages_render_as_text(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """The CLI's one error printer (advisor.cli._fail), through a real Console."""
    buf = io.StringIO()
    console = Console(file=buf, width=200, color_system=None)
    monkeypatch.setattr(common, "err_console", lambda: console)
    with pytest.raises(SystemExit) as exit_info:
        cli._fail(InputError(text), 2)
    assert exit_info.value.code == 2
    assert buf.getvalue() == f"error: {text}\n"


@pytest.mark.parametrize("text", MARKUP_LIKE)
def test_escaped_text_survives_the_console(text: str) -> None:
    """common.esc, which every message printed beside markup goes through."""
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None).print(f"[yellow]warning:[/] {common.esc(text)}")
    assert buf.getvalue() == f"warning: {text}\n"


def test_the_probes_install_hint_prints_whole(tmp_path: Path) -> None:
    """The issue's case: without torch the table output said `pip install 'advisor'`."""
    p = subprocess.run(
        [sys.executable, "-c", BLOCK_TORCH, "probe"],
        capture_output=True,
        text=True,
        env={**os.environ, "ADVISOR_PROBE_LOCK_DIR": str(tmp_path), "COLUMNS": "200"},
        timeout=60,
    )
    assert p.returncode == 3, p.stderr
    assert "pip install 'advisor[probe]'" in p.stdout + p.stderr
    assert "pip install -e '.[probe]'" in p.stdout + p.stderr


def test_a_bracketed_id_in_an_error_is_kept() -> None:
    p = run("catalog", "show", "h100[sxm]")
    assert p.returncode == 2
    assert "h100[sxm]" in p.stderr


# (command, flag, a bad value): the error's "valid: ..." list is the set --help names.
CHOICES = [
    (["recommend", "--workload", "fine_tuning"], "--purchase", "lease"),
    (["recommend", "--workload", "fine_tuning"], "--objective", "fastest"),
    (["recommend", "--workload", "fine_tuning"], "--precision", "fp2"),
    (["recommend", "--workload", "fine_tuning"], "--method", "dora"),
    (["recommend"], "--workload", "training"),
    (["recommend", "--workload", "fine_tuning"], "--format", "xml"),
]


def _help_of(command: list[str], flag: str) -> str:
    """The help text of one option: from its name to the next option's line."""
    text = run(command[0], "--help", columns="200").stdout
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.search(rf"\s{flag}\s", line))
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if re.search(r"│\s+(\*\s+)?--", line) or "╰" in line:
            break
        block.append(line)
    return words(" ".join(line.strip("│ ") for line in block))


@pytest.mark.parametrize(("command", "flag", "bad"), CHOICES, ids=[c[1] for c in CHOICES])
def test_help_and_error_name_the_same_values(command: list[str], flag: str, bad: str) -> None:
    p = run(*command, flag, bad)
    assert p.returncode == 2, p.stderr
    err = words(p.stderr)
    m = re.search(r"valid: (.*)$", err) or re.search(r"not one of (.*?)(?: \(see|$)", err)
    assert m, err
    valid = [v.strip(" '.") for v in re.split(r",|\bor\b", m.group(1)) if v.strip(" '.")]
    described = _help_of(command, flag)
    named = set(re.findall(r"[a-z][a-z0-9_]+", described))
    assert set(valid) <= named, (flag, valid, described)
    assert len(valid) >= 2


def test_purchase_error_names_any() -> None:
    """ "any" is valid (on demand or spot), so the error names it beside the purchase options."""
    p = run("recommend", "--workload", "fine_tuning", "--purchase", "lease")
    assert (
        "valid: on_demand, spot, reserved, reserved_1y, reserved_3y, capacity_block, any"
        in p.stderr
    )


def test_objective_help_names_all_six() -> None:
    described = _help_of(["recommend"], "--objective")
    for name in (
        "cheapest",
        "performance",
        "price_performance",
        "cost_to_completion",
        "time",
        "cost_per_million_tokens",
    ):
        assert name in described.replace(",", " ").split(), described


def test_workload_help_names_the_shipped_workloads() -> None:
    described = _help_of(["recommend"], "--workload")
    named = set(re.findall(r"[a-z]+(?:_[a-z]+)+", described))
    assert named == set(load_catalog().workloads), described


@pytest.mark.parametrize("columns", ["80", "120"])
@pytest.mark.parametrize("command", ["recommend", "estimate"])
def test_help_is_grouped_and_cuts_no_option_name(command: str, columns: str) -> None:
    """At 80 columns and wider. (At 60, Typer's help table still shortens the longest option
    names, such as --include-flagged-prices: its column widths are Typer's own.)"""
    p = run(command, "--help", columns=columns)
    assert p.returncode == 0, p.stderr
    assert "…" not in p.stdout, p.stdout
    for panel in ("What runs", "Constraints", "Serving (inference)", "Training", "Output"):
        if command == "estimate" and panel == "Constraints":
            continue
        assert f"─ {panel} " in p.stdout, panel
    # every long option of the command appears whole
    wide = run(command, "--help", columns="250").stdout
    names = set(re.findall(r"--[a-z][a-z0-9-]+", wide))
    assert len(names) > 20
    shown = set(re.findall(r"--[a-z][a-z0-9-]+", p.stdout))
    assert names <= shown, names - shown


def test_the_top_level_help_lists_what_each_command_says_of_itself() -> None:
    """`advisor --help` lists the commands from advisor.cli.SUMMARIES without importing them:
    each summary is the first paragraph of the command's own help, and the listing reads as the
    fully built app's (words compared: the built one keeps the docstrings' line breaks)."""
    from advisor.cli import COMMANDS, SUMMARIES, build_app

    full = build_app()
    helps = {info.name: info.callback.__doc__ for info in full.registered_commands}
    helps |= {group.name: group.typer_instance.info.help for group in full.registered_groups}
    assert set(helps) == set(COMMANDS) == set(SUMMARIES)
    for name, text in helps.items():
        first = words(str(text).split("\n\n")[0])
        assert words(SUMMARIES[name]) == first, name

    def listing(text: str) -> str:
        return words(text.split("Commands")[1].replace("│", " ").replace("╰", " ").strip("─╮ "))

    lazy = run("--help").stdout
    built = subprocess.run(
        [sys.executable, "-c", "from advisor.cli import build_app; build_app()(['--help'])"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
        timeout=60,
    ).stdout
    assert listing(lazy) == listing(built)


def test_a_typer_without_the_type_hook_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """Typer 0.27 (the GPU machines' image) has no TyperOption.display_type_rich, which the
    flags' help wraps on 0.29: the CLI then builds without wrapping anything (it raised
    AttributeError before any command ran)."""
    from typer.core import TyperOption

    for cls in TyperOption.__mro__:  # (0.29 defines it on TyperOption and its base)
        if "display_type_rich" in vars(cls):
            monkeypatch.delattr(cls, "display_type_rich")
    monkeypatch.setattr(TyperOption, "_advisor_flags", False, raising=False)
    cli._flags_without_metavar()
    assert not hasattr(TyperOption, "display_type_rich")
    assert TyperOption._advisor_flags is False  # type: ignore[attr-defined]
