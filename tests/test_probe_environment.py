"""probes.environment.inspect: every diagnosis code, with fakes at the NVML and torch seams."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import pytest

from probes.environment import Environment, gpu_key, inspect
from probes.nvml import Nvml
from tests.fake_nvml import FakeNvmlLib, h200
from tests.probe_fakes import H200_PROPS, fake_torch

MIB = 1024 * 1024


def loader(torch: Any) -> Callable[[], Any]:
    return lambda: torch


def no_torch() -> Any:
    raise ImportError("No module named 'torch'")


def run_inspect(
    *,
    lib: Any = None,
    torch: Any = None,
    torch_loader: Callable[[], Any] | None = None,
    environ: dict[str, str] | None = None,
    device: int = 0,
) -> Environment:
    nvml = Nvml(lib if lib is not None else FakeNvmlLib())
    return inspect(
        device,
        nvml,
        torch_loader=torch_loader or loader(torch if torch is not None else fake_torch()),
        environ=environ if environ is not None else {},
    )


def codes(env: Environment) -> list[str]:
    return [d.code for d in env.diagnosis]


# (case guarded, inspect keyword arguments, the diagnosis codes expected, exactly and in order)
DIAGNOSES: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "an empty CUDA_VISIBLE_DEVICES hides every GPU",
        dict(environ={"CUDA_VISIBLE_DEVICES": ""}),
        ["cuda_visible_devices_empty"],
    ),
    (
        "CUDA_VISIBLE_DEVICES=-1 hides every GPU",
        dict(environ={"CUDA_VISIBLE_DEVICES": "-1"}),
        ["cuda_visible_devices_empty"],
    ),
    (
        "CUDA_VISIBLE_DEVICES=NoDevFiles (any case, padded) hides every GPU",
        dict(environ={"CUDA_VISIBLE_DEVICES": " NoDevFiles "}),
        ["cuda_visible_devices_empty"],
    ),
    ("torch not importable", dict(torch_loader=no_torch), ["torch_missing"]),
    ("a CPU-only torch build", dict(torch=fake_torch(None)), ["torch_without_cuda"]),
    (
        "NVML library not found (NVML_ERROR_LIBRARY_NOT_FOUND = 12)",
        dict(lib=FakeNvmlLib(init_error=12)),
        ["nvml_library_missing"],
    ),
    (
        "driver installed but not loaded (NVML_ERROR_DRIVER_NOT_LOADED = 9)",
        dict(lib=FakeNvmlLib(init_error=9)),
        ["driver_not_loaded"],
    ),
    (
        "any other nvmlInit failure",
        dict(lib=FakeNvmlLib(init_error=999)),
        ["nvml_error"],
    ),
    (
        "NVML cannot count devices",
        dict(lib=FakeNvmlLib(unsupported={"nvmlDeviceGetCount"})),
        ["nvml_error"],
    ),
    ("the driver sees no GPU", dict(lib=FakeNvmlLib(devices=[])), ["no_device"]),
    (
        "torch with CUDA but the runtime cannot use the GPU",
        dict(torch=fake_torch(available=False, init_error="Found no NVIDIA driver on your system")),
        ["cuda_runtime_missing"],
    ),
    ("--device beyond what CUDA sees", dict(device=3), ["no_device"]),
    (
        "every independent problem is reported, in order",
        dict(
            environ={"CUDA_VISIBLE_DEVICES": ""},
            torch=fake_torch(None),
            lib=FakeNvmlLib(init_error=12),
        ),
        ["cuda_visible_devices_empty", "torch_without_cuda", "nvml_library_missing"],
    ),
    ("a healthy machine", dict(), []),
    (
        "CUDA_VISIBLE_DEVICES naming a GPU hides nothing",
        dict(environ={"CUDA_VISIBLE_DEVICES": "0"}),
        [],
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "expected"), [(k, e) for _, k, e in DIAGNOSES], ids=[c for c, _, _ in DIAGNOSES]
)
def test_diagnosis_codes(kwargs: dict[str, Any], expected: list[str]) -> None:
    env = run_inspect(**kwargs)
    assert codes(env) == expected
    assert env.gpu_usable is (expected == [])
    assert (env.inventory.gpu is not None) is (expected == [])


def test_nvml_bindings_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    env = inspect(0, Nvml(), torch_loader=loader(fake_torch()), environ={})
    assert codes(env) == ["nvml_bindings_missing"]
    assert "nvidia-ml-py" in env.diagnosis[0].message
    assert "pip install 'advisor[probe]'" in env.diagnosis[0].message


def test_messages_name_the_cause() -> None:
    env = run_inspect(environ={"CUDA_VISIBLE_DEVICES": "-1"})
    assert env.diagnosis[0].message == "CUDA_VISIBLE_DEVICES='-1' hides every GPU from CUDA"
    env = run_inspect(torch_loader=no_torch)
    assert env.diagnosis[0].message == (
        "PyTorch is not installed (No module named 'torch'); install the probe extra: "
        "pip install 'advisor[probe]' (from a clone: pip install -e '.[probe]')"
    )
    assert env.torch is None and env.inventory.torch_version is None
    env = run_inspect(torch=fake_torch(None))
    assert "2.11.0+cpu is a CPU-only build" in env.diagnosis[0].message
    assert env.inventory.torch_version == "2.11.0+cpu"
    assert env.inventory.cuda_runtime_version is None
    env = run_inspect(device=3)
    assert env.diagnosis[0].message == "--device 3 but CUDA sees 1 device(s)"


def test_cuda_runtime_missing_carries_torchs_reason() -> None:
    torch = fake_torch(available=False, init_error="Found no NVIDIA driver on your system.\nMore")
    env = run_inspect(torch=torch)
    assert codes(env) == ["cuda_runtime_missing"]
    assert env.diagnosis[0].message == (
        "the CUDA runtime cannot use the GPU: Found no NVIDIA driver on your system."
    )
    assert env.inventory.gpu is None and env.nvml_handle is None


def test_cuda_runtime_missing_without_a_reason_from_torch() -> None:
    env = run_inspect(torch=fake_torch(available=False))  # cuda.init() does not raise
    assert env.diagnosis[0].message.endswith("torch.cuda.is_available() is False")


def test_healthy_machine_fills_the_inventory_from_nvml_and_torch() -> None:
    mine, other = os.getpid(), os.getpid() + 100_000
    procs = [
        {"pid": mine, "used": 512 * MIB, "name": "python"},
        {"pid": other, "used": 1024 * MIB, "name": "trainer"},
    ]
    env = run_inspect(lib=FakeNvmlLib(devices=[h200(processes=procs)]))
    assert env.diagnosis == [] and env.gpu_usable is True
    assert env.nvml_handle == 0
    inv = env.inventory
    assert (inv.driver_version, inv.cuda_driver_version, inv.device_count) == (
        "580.159.04",
        "13.0",
        1,
    )
    assert (inv.torch_version, inv.cuda_runtime_version) == ("2.11.0+cu130", "13.0")
    gpu = inv.gpu
    assert gpu is not None
    assert gpu.name == "NVIDIA H200" and gpu.uuid == "GPU-00000000-fake-h200" and gpu.index == 0
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max) == (
        5,
        5,
        16,
        16,
    )
    assert gpu.ecc_enabled is True and gpu.mig_enabled is False
    assert gpu.memory_total_mib == pytest.approx(150_754_820_096 / MIB)
    assert gpu.memory_used_mib == pytest.approx(754_820_096 / MIB)
    assert (gpu.power_limit_w, gpu.power_default_limit_w, gpu.power_draw_w) == (700.0, 700.0, 95.0)
    assert (gpu.clock_sm_mhz, gpu.clock_sm_max_mhz, gpu.clock_mem_mhz) == (1980, 1980, 3201)
    assert gpu.temperature_c == 35 and gpu.throttle_reasons == ["gpu_idle"]
    assert gpu.compute_capability == "9.0" and gpu.multiprocessors == 132
    # the probe's own CUDA context is no competitor; the other process is kept
    assert gpu.processes is not None
    assert [(p.pid, p.name, p.used_memory_mib) for p in gpu.processes] == [
        (other, "trainer", 1024.0)
    ]
    assert gpu_key(env, 0) == "GPU-00000000-fake-h200"


def test_nvml_handle_follows_the_uuid_not_the_cuda_index() -> None:
    # CUDA_VISIBLE_DEVICES=1: CUDA's device 0 is NVML's device 1
    lib = FakeNvmlLib(
        devices=[
            h200(uuid="GPU-other", name="NVIDIA H100 80GB HBM3"),
            h200(uuid="GPU-00000000-fake-h200"),
        ]
    )
    env = run_inspect(lib=lib, environ={"CUDA_VISIBLE_DEVICES": "1"})
    assert env.nvml_handle == 1
    assert env.inventory.gpu is not None
    assert env.inventory.gpu.index == 1 and env.inventory.gpu.name == "NVIDIA H200"


def test_unknown_uuid_falls_back_to_the_index() -> None:
    lib = FakeNvmlLib(devices=[h200(uuid="GPU-something-else")])
    env = run_inspect(lib=lib)
    assert env.nvml_handle == 0 and env.inventory.gpu is not None
    assert env.inventory.gpu.uuid == "GPU-something-else"


def test_nvml_name_missing_takes_torchs_name() -> None:
    env = run_inspect(lib=FakeNvmlLib(unsupported={"nvmlDeviceGetName"}))
    assert env.inventory.gpu is not None and env.inventory.gpu.name == H200_PROPS.name


UNSUPPORTED = {
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetPowerManagementDefaultLimit",
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetTemperature",
}


def test_not_supported_is_a_value_not_a_crash() -> None:
    env = run_inspect(lib=FakeNvmlLib(unsupported=UNSUPPORTED))
    assert env.diagnosis == [] and env.gpu_usable is True
    inv, gpu = env.inventory, env.inventory.gpu
    assert inv.driver_version is None and inv.cuda_driver_version is None
    assert gpu is not None
    none_fields = (
        "memory_total_mib",
        "memory_free_mib",
        "memory_used_mib",
        "power_draw_w",
        "power_default_limit_w",
        "ecc_enabled",
        "mig_enabled",
        "throttle_reasons",
        "utilization_gpu_pct",
        "utilization_memory_pct",
        "processes",
        "pcie_gen_current",
        "temperature_c",
    )
    assert {f: getattr(gpu, f) for f in none_fields} == dict.fromkeys(none_fields)
    # what is supported is still read
    assert gpu.name == "NVIDIA H200" and gpu.power_limit_w == 700.0 and gpu.pcie_gen_max == 5


def test_nvml_is_not_touched_before_the_first_query() -> None:
    lib = FakeNvmlLib()
    nvml = Nvml(lib)
    assert lib.initialised is False
    assert nvml.device_count() == 1 and lib.initialised is True
    nvml.shutdown()
    assert lib.initialised is False


# (case guarded, throttle bits, decoded reasons)
THROTTLE = [
    ("no bits", 0x0, []),
    ("idle only", 0x1, ["gpu_idle"]),
    ("power cap and thermal", 0x4 | 0x40, ["sw_power_cap", "hw_thermal_slowdown"]),
    ("unknown bits are ignored", 0x200 | 0x8, ["hw_slowdown"]),
]


@pytest.mark.parametrize(
    ("bits", "reasons"), [(b, r) for _, b, r in THROTTLE], ids=[c for c, _, _ in THROTTLE]
)
def test_throttle_bits_are_decoded(bits: int, reasons: list[str]) -> None:
    nvml = Nvml(FakeNvmlLib(devices=[h200(throttle=bits)]))
    assert nvml.inventory(nvml.handle(0)).throttle_reasons == reasons
