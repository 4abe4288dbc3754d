"""Without nvidia-ml-py (a base install, no probe extra) every NVML query ends in the
EnvironmentProblem that carries the install hint, never in an AttributeError from an `except`
clause naming the library's NVMLError before the library is there; and the CLI commands that
read NVML exit 3 with the hint, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes.errors import INSTALL_PROBE_EXTRA, EnvironmentProblem
from probes.nvml import Nvml

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_bindings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError


@pytest.mark.parametrize(
    "query",
    [
        lambda n: n.device_count(),
        lambda n: n.handle(0),
        lambda n: n.soft(len, "x"),
        lambda n: n.driver_version(),
    ],
    ids=["device_count", "handle", "soft", "driver_version"],
)
def test_each_query_raises_the_install_hint(no_bindings: None, query: object) -> None:
    with pytest.raises(EnvironmentProblem) as raised:
        query(Nvml())  # type: ignore[operator]
    assert raised.value.code == "nvml_bindings_missing"
    assert INSTALL_PROBE_EXTRA in str(raised.value)


# sitecustomize on the path of the child: pynvml and torch unimportable, as on a base install
BLOCK = "import sys\nsys.modules['pynvml'] = None\nsys.modules['torch'] = None\n"


@pytest.mark.parametrize(
    "args",
    [
        ["doctor", "--", sys.executable, "-c", "pass"],
        ["probe", "--health-check"],
        ["probe"],
        ["probe", "--ops", "--quick"],
    ],
    ids=["doctor", "probe-health-check", "probe", "probe-ops"],
)
def test_commands_without_the_extra_exit_3_with_the_hint(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "sitecustomize.py").write_text(BLOCK)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        "ADVISOR_PROBE_LOCK_DIR": str(tmp_path / "locks"),
    }
    p = subprocess.run(
        [sys.executable, "-m", "advisor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    assert "pip install" in (p.stdout + p.stderr)
