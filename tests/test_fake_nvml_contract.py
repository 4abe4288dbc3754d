"""tests/fake_nvml.py against the real nvidia-ml-py (`pynvml`), by introspection only: NVML itself
is never called (no GPU here). A fake that drifts from the library lets every probe test pass
while the probe breaks on a real machine; these checks fail first.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import tokenize
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import probes.job_sampler
import probes.nvml
from tests import fake_nvml
from tests.fake_nvml import FakeNvmlLib, h200

pynvml: ModuleType = pytest.importorskip("pynvml")  # nvidia-ml-py, in requirements-dev.txt

FAKE_SOURCE = Path(fake_nvml.__file__).read_text()
PROBE_SOURCE = (
    Path(probes.nvml.__file__).read_text() + Path(probes.job_sampler.__file__).read_text()
)
FAKE_FUNCTIONS = sorted(n for n in vars(FakeNvmlLib) if n.startswith("nvml"))
# Names the probe reaches for only when the newer one is missing (older nvidia-ml-py)
FALLBACKS = {"nvmlDeviceGetCurrentClocksThrottleReasons"}


def positional(fn: Any, skip_self: bool) -> tuple[int, int]:
    """(required, total) positional parameters of a function."""
    params = list(inspect.signature(fn).parameters.values())[1 if skip_self else 0 :]
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    usable = [p for p in params if p.kind in kinds]
    required = [p for p in usable if p.default is inspect.Parameter.empty]
    return len(required), len(usable)


def test_the_fake_implements_functions_of_the_real_library() -> None:
    assert len(FAKE_FUNCTIONS) >= 25  # the listing itself found the fake's functions
    missing = [name for name in FAKE_FUNCTIONS if not callable(getattr(pynvml, name, None))]
    assert not missing, f"not in nvidia-ml-py {pynvml.__name__}: {missing}"


@pytest.mark.parametrize("name", FAKE_FUNCTIONS)
def test_signatures_are_compatible(name: str) -> None:
    """Every call the fake accepts (positionally, as probes.nvml calls) the real one accepts."""
    fake_required, fake_total = positional(getattr(FakeNvmlLib, name), skip_self=True)
    real_required, real_total = positional(getattr(pynvml, name), skip_self=False)
    assert fake_required == fake_total, f"{name}: the fake has optional parameters"
    assert real_required <= fake_required <= real_total, (
        f"{name}: fake takes {fake_required}, real takes {real_required}..{real_total}"
    )


def test_constants_equal_the_real_ones() -> None:
    fake = FakeNvmlLib()
    names = [n for n in dir(fake) if n.startswith("NVML_")]
    assert {"NVML_CLOCK_SM", "NVML_GPM_METRIC_SM_UTIL", "NVML_PCIE_UTIL_RX_BYTES"} <= set(names)
    for name in names:
        assert getattr(fake, name) == getattr(pynvml, name), name
    # the module's error codes are the NVML_ERROR_* of the same name
    for name in ("NOT_SUPPORTED", "LIBRARY_NOT_FOUND", "DRIVER_NOT_LOADED"):
        assert getattr(fake_nvml, name) == getattr(pynvml, f"NVML_ERROR_{name}"), name


def literal_error_codes() -> list[tuple[int, str]]:
    """(code, name in the trailing comment) of every `NVMLError(<int>)  # NAME` in the fake."""
    comments = {
        tok.start[0]: tok.string.lstrip("# ").split()[0]
        for tok in tokenize.generate_tokens(io.StringIO(FAKE_SOURCE).readline)
        if tok.type == tokenize.COMMENT
    }
    found = []
    for node in ast.walk(ast.parse(FAKE_SOURCE)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "NVMLError"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.append((int(node.args[0].value), comments.get(node.lineno, "?")))
    return found


def test_error_codes_written_as_numbers_are_the_named_nvml_errors() -> None:
    codes = literal_error_codes()
    assert {name for _, name in codes} >= {"UNINITIALIZED", "INVALID_ARGUMENT", "NOT_FOUND"}
    for code, name in codes:
        assert code == getattr(pynvml, f"NVML_ERROR_{name}", None), (code, name)


def test_the_probes_own_error_codes_are_nvmls() -> None:
    # probes.nvml tells "NVML missing" from other failures by these codes; the fake uses the same
    # numbers, so only the real library can show them wrong.
    assert probes.nvml._LIBRARY_NOT_FOUND == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    assert probes.nvml._DRIVER_NOT_LOADED == pynvml.NVML_ERROR_DRIVER_NOT_LOADED


def test_errors_carry_their_code_like_the_real_ones() -> None:
    for code in (pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_LIBRARY_NOT_FOUND):
        real, fake = pynvml.NVMLError(code), fake_nvml.NVMLError(code)
        assert isinstance(real, pynvml.NVMLError) and isinstance(real, Exception)
        assert real.value == fake.value == code
    assert FakeNvmlLib().NVMLError is fake_nvml.NVMLError  # caught as lib.NVMLError


def struct_fields(struct: Any) -> set[str]:
    return {name for name, *_ in struct._fields_}


def test_returned_structures_have_the_real_field_names() -> None:
    lib = FakeNvmlLib(devices=[h200(processes=[{"pid": 7, "used": 1 << 30}])])
    lib.nvmlInit()
    memory = vars(lib.nvmlDeviceGetMemoryInfo(0))
    assert set(memory) <= struct_fields(pynvml.c_nvmlMemory_t)
    util = vars(lib.nvmlDeviceGetUtilizationRates(0))
    assert set(util) <= struct_fields(pynvml.c_nvmlUtilization_t)
    (process,) = lib.nvmlDeviceGetComputeRunningProcesses(0)
    assert set(vars(process)) <= struct_fields(pynvml.c_nvmlProcessInfo_t)


def called_library_functions() -> set[str]:
    """Every nvml* name probes/nvml.py calls on its library: attributes and getattr strings."""
    names = set(re.findall(r"\blib\.(nvml\w+)", PROBE_SOURCE))
    names |= set(re.findall(r"getattr\(\s*lib,\s*\"(nvml\w+)\"", PROBE_SOURCE))
    return names


def test_the_gpm_request_has_the_real_field_names() -> None:
    request = FakeNvmlLib().c_nvmlGpmMetricsGet_t()
    assert set(vars(request)) == struct_fields(pynvml.c_nvmlGpmMetricsGet_t)
    assert set(vars(request.metrics[0])) <= struct_fields(pynvml.c_nvmlGpmMetric_t)
    assert len(request.metrics) == len(pynvml.c_nvmlGpmMetricsGet_t().metrics)


def test_every_function_the_probe_calls_is_real_and_faked() -> None:
    called = called_library_functions()
    assert len(called) >= 20 and "nvmlDeviceGetMemoryInfo" in called
    unreal = sorted(n for n in called if not callable(getattr(pynvml, n, None)))
    assert not unreal, f"probes/nvml.py calls what nvidia-ml-py does not have: {unreal}"
    assert called - set(FAKE_FUNCTIONS) == FALLBACKS, "the fake misses a function the probe calls"


def camel(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


def test_throttle_reason_bits_are_nvmls() -> None:
    for bit, name in probes.nvml.THROTTLE_BITS.items():
        assert getattr(pynvml, f"nvmlClocksEventReason{camel(name)}") == bit, name
