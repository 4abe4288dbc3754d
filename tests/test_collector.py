"""The collector kept off what a command process keeps (advisor/collector.py): the imports and
the catalog frozen in the console-script process, nothing frozen when the CLI runs inside
another program, and the counted pause that the review's readers share."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import weakref
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor import collector
from advisor.cli import app, main
from advisor.collector import freeze_kept, gc_paused, long_lived

PROBE = (
    "import atexit, gc, sys\n"
    "sys.argv = ['advisor', 'catalog', 'gpus', 'h100', '--json']\n"
    "atexit.register(lambda: print('frozen', gc.get_freeze_count(), gc.isenabled(),"
    " file=sys.stderr))\n"
    "from advisor.cli import main\n"
    "main()\n"
)


def test_a_command_process_freezes_its_imports_and_catalog() -> None:
    # The console script's main(): the command modules and the catalog are frozen (about
    # 50,000 objects; none without the freeze), and collection is on again for the command's
    # own work.
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    words = done.stderr.split()
    frozen, enabled = int(words[words.index("frozen") + 1]), words[words.index("frozen") + 2]
    assert frozen > 10_000 and enabled == "True"


def test_the_console_script_imports_the_command_line_frozen() -> None:
    # `python -m advisor` and the console script (pyproject.toml) import advisor.cli with the
    # collector paused, then freeze it: --version exits before any command is built, so what is
    # frozen is the import alone (nothing without the pause), and collection is on after it.
    probe = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count(), gc.isenabled(),"
        " file=sys.stderr))\n"
        "sys.argv = ['advisor', '--version']\n"
        "from advisor.__main__ import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    words = done.stderr.split()
    frozen, enabled = int(words[words.index("frozen") + 1]), words[words.index("frozen") + 2]
    assert frozen > 10_000 and enabled == "True"
    scripts = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert 'advisor = "advisor.__main__:main"' in scripts


def test_the_cli_inside_another_program_freezes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    # main() given its arguments (a program calling the CLI) and the Typer app under CliRunner
    before = gc.get_freeze_count()
    with pytest.raises(SystemExit) as exited:
        main(["catalog", "gpus", "h100", "--json"])
    assert exited.value.code == 0, capsys.readouterr().err
    result = CliRunner().invoke(app, ["catalog", "gpus", "h100", "--json"])
    assert result.exit_code == 0, result.output
    with pytest.raises(SystemExit) as exited:  # builds its request validator and the index kept()
        main(["recommend", "--workload", "fine_tuning", "--memory-gb", "80", "--json"])
    assert exited.value.code == 0, capsys.readouterr().err
    assert gc.get_freeze_count() == before and gc.isenabled()


def test_long_lived_freezes_what_it_built_and_resumes_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(collector, "_freezing", False)  # restored after: tests freeze nothing
    assert gc.isenabled()
    with long_lived():
        assert not gc.isenabled()
        built = [[i] for i in range(1000)]
    try:
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(built)
        assert collector._freezing
    finally:
        gc.unfreeze()  # this test process keeps collecting its own objects


def _tracked(obj: object) -> bool:
    """Whether a collection walks `obj` (frozen objects are in no generation)."""
    return any(o is obj for o in gc.get_objects())


def test_freeze_kept_does_nothing_where_the_process_does_not_freeze() -> None:
    kept = [[1]]
    before = gc.get_freeze_count()
    freeze_kept()
    assert gc.get_freeze_count() == before and _tracked(kept)


def test_freeze_kept_collects_the_garbage_made_since_and_freezes_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(collector, "_freezing", True)
    kept: list[object] = [[i] for i in range(10)]
    cycle: list[object] = []
    cycle.append(cycle)
    gone = weakref.ref(_Node(cycle))  # a cycle nothing refers to: garbage, not frozen
    try:
        freeze_kept()
        assert gone() is None
        assert not _tracked(kept) and not _tracked(kept[0])
    finally:
        gc.unfreeze()


class _Node:
    def __init__(self, payload: object) -> None:
        self.me = self
        self.payload = payload


def test_the_service_freezes_its_catalog_at_start_and_after_a_reload(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """In a process that freezes what it keeps (the console script's `advisor serve`), the
    service's start-up and each catalog reload leave the catalog out of every collection."""
    from fastapi.testclient import TestClient

    from advisor.api import create_app
    from advisor.api.settings import Settings

    monkeypatch.setattr(collector, "_freezing", True)
    settings = Settings(database_url=f"sqlite:///{tmp_path}/c.db", api_tokens=("t",))  # type: ignore[arg-type]
    try:
        app = create_app(settings)
        with TestClient(app):
            holder = app.state.advisor.catalog
            assert not _tracked(holder.catalog.accelerators)
            assert holder.reload()
            assert not _tracked(holder.catalog.accelerators)
    finally:
        gc.unfreeze()


def test_the_pause_is_counted_across_threads() -> None:
    # Two readers overlap: collection resumes only when the last leaves.
    first_in, second_out = threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with gc_paused():
            first_in.set()
            second_out.wait(10)
            seen.append(gc.isenabled())  # the second has left, this one is still inside

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(10)
    with gc_paused():
        pass
    second_out.set()
    thread.join(10)
    assert seen == [False] and gc.isenabled()
