"""The docs' own checks: an example whose output differs from the page is reported, and the
generated references list every command and route."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import yaml

REPO = Path(__file__).resolve().parents[1]


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_an_example_that_drifted_is_reported(tmp_path: Path) -> None:
    examples = _script("docs_examples")
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n```console\n$ advisor catalog workloads --format csv\nid,job\n```\n\n"
        "```sh\nadvisor probe\n```\n"
    )
    found = examples.examples(page)
    assert [e.command for e in found] == ["advisor catalog workloads --format csv"]
    real = examples.run(found[0].command, tmp_path)
    assert real.splitlines()[0].startswith("id,job,objective") and real != found[0].shown
    # the same page with the real output passes
    page.write_text(f"```console\n$ advisor catalog workloads --format csv\n{real}\n```\n")
    again = examples.examples(page)[0]
    assert examples.run(again.command, tmp_path) == examples._tidy(again.shown)


def test_references_cover_every_command_and_route() -> None:
    reference = _script("docs_reference")
    cli = reference.cli_page()
    for command in ("recommend", "estimate", "catalog regions", "config show", "serve"):
        assert f"## `advisor {command}`" in cli, command
    assert "`--log-format`" in cli and "`--workload`, `-w`" in cli
    http = reference.http_page()
    spec = yaml.safe_load((REPO / "openapi.yaml").read_text())
    for route, methods in spec["paths"].items():
        for method in methods:
            assert f"## `{method.upper()} {route}`" in http
