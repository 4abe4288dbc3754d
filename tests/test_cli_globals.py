"""Global options (--debug, --catalog, --replace-catalog) work after the command as before it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from advisor.cli import hoist_globals, main

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["recommend", "--workload", "x", "--debug"],
            ["--debug", "recommend", "--workload", "x"],
        ),
        (
            ["catalog", "accelerators", "--catalog", "d", "--replace-catalog", "--json"],
            ["--catalog", "d", "--replace-catalog", "catalog", "accelerators", "--json"],
        ),
        (["--debug", "probe", "--catalog=d"], ["--debug", "--catalog=d", "probe"]),
        # where arguments end, nothing moves; a --catalog without its value is left to the parser
        (["show", "--", "--debug"], ["show", "--", "--debug"]),
        (["recommend", "--catalog"], ["recommend", "--catalog"]),
        # look-alikes are the command's own options
        (["review", "--catalog-region", "r"], ["review", "--catalog-region", "r"]),
    ],
)
def test_hoist_globals(argv: list[str], expected: list[str]) -> None:
    assert hoist_globals(argv) == expected


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ADVISOR_DEBUG", "ADVISOR_CATALOG", "ADVISOR_CATALOG_MODE"):
        monkeypatch.delenv(var, raising=False)


def _exit_code(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    return int(caught.value.code or 0)


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_after_the_command_shows_the_traceback(
    where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["recommend", "--workload", "nope"]
    argv = ["--debug", *command] if where == "before" else [*command, "--debug"]
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "error: unknown workload 'nope'" in err


def test_without_debug_one_line_and_no_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_code(["recommend", "--workload", "nope"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("error: unknown workload 'nope'")


@pytest.fixture
def one_gpu_catalog(tmp_path: Path) -> Path:
    """A catalog directory holding one accelerator (the shipped H100 SXM under another id) and
    the shipped workload profiles, which every catalog needs."""
    shipped = yaml.safe_load((REPO / "catalog" / "accelerators.yaml").read_text())
    h100 = next(a for a in shipped["accelerators"] if a["id"] == "h100-sxm")
    mine = {**h100, "id": "lab-h100", "name": "Lab H100", "no_instance_reason": "a lab GPU"}
    (tmp_path / "accelerators.yaml").write_text(yaml.safe_dump({"accelerators": [mine]}))
    (tmp_path / "workloads.yaml").write_text((REPO / "catalog" / "workloads.yaml").read_text())
    return tmp_path


@pytest.mark.parametrize("where", ["before", "after"])
def test_catalog_after_the_command(
    where: str, one_gpu_catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    globals_ = ["--catalog", str(one_gpu_catalog), "--replace-catalog"]
    command = ["catalog", "accelerators", "--json"]
    argv = [*globals_, *command] if where == "before" else [*command, *globals_]
    assert _exit_code(argv) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [a["id"] for a in listed] == ["lab-h100"]  # the directory alone: --replace-catalog
