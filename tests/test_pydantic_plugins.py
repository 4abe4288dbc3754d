"""advisor/pydantic_plugins.py: pydantic's plugin discovery skipped only where it would find
none; an installed plugin still runs under the console script."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from advisor import pydantic_plugins

RECOMMEND = ["recommend", "--workload", "high_throughput_inference", "--memory-gb", "20", "--json"]


def _dist(root: Path, name: str, entry_points: str | None) -> None:
    info = root / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points)


def test_the_scan_agrees_with_importlib_metadata_here() -> None:
    declared = bool(importlib.metadata.entry_points(group="pydantic"))
    assert pydantic_plugins._no_plugin_declared(sys.path) is not declared


def test_a_declared_plugin_is_seen(tmp_path: Path) -> None:
    _dist(tmp_path, "other", "[console_scripts]\nother = other:main\n")
    _dist(tmp_path, "bare", None)
    assert pydantic_plugins._no_plugin_declared([str(tmp_path)])
    _dist(tmp_path, "plug", "[console_scripts]\nx = y:z\n\n  [pydantic]  \nplug = plug:plugin\n")
    assert not pydantic_plugins._no_plugin_declared([str(tmp_path)])
    found = [
        ep
        for d in importlib.metadata.distributions(path=[str(tmp_path)])
        for ep in d.entry_points
        if ep.group == "pydantic"
    ]
    assert [ep.value for ep in found] == ["plug:plugin"]  # importlib.metadata reads it so too


def test_what_the_scan_cannot_read_is_left_to_pydantic(tmp_path: Path) -> None:
    archive = tmp_path / "packages.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("plug-1.0.dist-info/entry_points.txt", "[pydantic]\nplug = plug:plugin\n")
    assert not pydantic_plugins._no_plugin_declared([str(archive)])
    assert not pydantic_plugins._no_plugin_declared([str(tmp_path / "x.egg")])
    assert pydantic_plugins._no_plugin_declared([str(tmp_path / "missing")])


PLUGIN = """
from pathlib import Path


class Plugin:
    def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind, config,
                             plugin_settings):
        with open(Path(__file__).with_name("seen.txt"), "a") as f:
            f.write(schema_type_path.name + "\\n")
        return None, None, None


plugin = Plugin()
"""


def _console_script(pythonpath: str, check: str) -> subprocess.CompletedProcess[str]:
    """`advisor recommend ...` as the console script runs it (its own process), then `check`."""
    code = (
        "import sys\n"
        f"sys.argv = ['advisor', *{RECOMMEND!r}]\n"
        "from advisor.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"{check}\n"
    )
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )


def test_an_installed_plugin_still_runs(tmp_path: Path) -> None:
    """A distribution declaring a `pydantic` entry point: pydantic's own loader finds it and
    the plugin sees the request being validated."""
    _dist(tmp_path, "plug", "[pydantic]\nplug = plug:plugin\n")
    (tmp_path / "plug.py").write_text(PLUGIN)
    repo = str(Path(__file__).resolve().parents[1])
    p = _console_script(
        f"{tmp_path}{os.pathsep}{repo}",
        "sys.stderr.write(repr('importlib.metadata' in sys.modules))",
    )
    assert p.stderr.strip().endswith("True"), p.stderr
    seen = (tmp_path / "seen.txt").read_text().split()
    assert "RecommendRequest" in seen


def test_without_plugins_the_console_script_skips_the_scan() -> None:
    if importlib.metadata.entry_points(group="pydantic"):
        return  # an environment with a plugin: covered above
    repo = str(Path(__file__).resolve().parents[1])
    p = _console_script(
        repo,
        "from pydantic.plugin._loader import get_plugins\n"
        "loaded = [m for m in ('importlib.metadata', 'csv') if m in sys.modules]\n"
        "sys.stderr.write(repr((loaded, list(get_plugins()))))",
    )
    # csv too: importlib.metadata brought it, and advisor/cli/tables.py imports it for
    # --format csv alone
    assert p.stderr.strip().endswith("([], [])"), p.stderr
    assert '"recommendations"' in p.stdout
