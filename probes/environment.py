"""Finds out whether a GPU can be measured here, and what the machine says about itself.

Every reason the GPU path cannot run becomes a Diagnosis with a stable code:
cuda_visible_devices_empty, torch_missing, torch_without_cuda, nvml_bindings_missing,
nvml_library_missing, driver_not_loaded, nvml_error, no_device, cuda_runtime_missing.
"""

from __future__ import annotations

import importlib
import os
import platform
import socket
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from probes.errors import INSTALL_PROBE_EXTRA, EnvironmentProblem
from probes.nvml import Nvml
from probes.report import Diagnosis, GpuInventory, Inventory

HIDING_VALUES = {"", "-1", "none", "nodevfiles", "void"}


@dataclass
class Environment:
    inventory: Inventory
    diagnosis: list[Diagnosis] = field(default_factory=list)
    torch: Any = None  # the torch module, when importable
    gpu_usable: bool = False
    nvml_handle: Any = None  # NVML's handle of the measured GPU, for sampling under load


def import_torch() -> Any:
    with warnings.catch_warnings():  # CPU wheels warn at import when numpy is absent
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        return importlib.import_module("torch")


def inspect(
    device: int,
    nvml: Nvml,
    torch_loader: Callable[[], Any] = import_torch,
    environ: dict[str, str] | None = None,
) -> Environment:
    env_vars = dict(os.environ) if environ is None else environ
    cvd = env_vars.get("CUDA_VISIBLE_DEVICES")
    inv = Inventory(
        hostname=socket.gethostname(),
        python=platform.python_version(),
        cuda_visible_devices=cvd,
        cpu_count=os.cpu_count(),
    )
    found = Environment(inventory=inv)
    diag = found.diagnosis
    if cvd is not None and cvd.strip().lower() in HIDING_VALUES:
        diag.append(
            Diagnosis(
                code="cuda_visible_devices_empty",
                message=f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU from CUDA",
            )
        )
    try:
        torch = torch_loader()
    except ImportError as exc:
        message = f"PyTorch is not installed ({exc}); {INSTALL_PROBE_EXTRA}"
        diag.append(Diagnosis(code="torch_missing", message=message))
        torch = None
    found.torch = torch
    if torch is not None:
        inv.torch_version = str(torch.__version__)
        inv.cuda_runtime_version = torch.version.cuda
        if torch.version.cuda is None:
            diag.append(
                Diagnosis(
                    code="torch_without_cuda",
                    message=f"torch {torch.__version__} is a CPU-only build "
                    "(torch.version.cuda is None)",
                )
            )

    nvml_ok = _inspect_nvml(device, nvml, inv, diag)
    torch_cuda = torch is not None and torch.version.cuda is not None
    if torch_cuda and not diag:
        found.nvml_handle = _inspect_cuda(device, torch, nvml if nvml_ok else None, inv, diag)
    found.gpu_usable = not diag
    return found


def _inspect_nvml(device: int, nvml: Nvml, inv: Inventory, diag: list[Diagnosis]) -> bool:
    try:
        inv.driver_version = nvml.driver_version()
        inv.cuda_driver_version = nvml.cuda_driver_version()
        inv.device_count = nvml.device_count()
    except EnvironmentProblem as exc:
        diag.append(Diagnosis(code=exc.code, message=str(exc)))
        return False
    if inv.device_count == 0:
        diag.append(Diagnosis(code="no_device", message="the driver sees no NVIDIA GPU"))
        return False
    return True


def _inspect_cuda(
    device: int, torch: Any, nvml: Nvml | None, inv: Inventory, diag: list[Diagnosis]
) -> Any:
    """Fills inv.gpu; returns the NVML handle of the device (None if NVML cannot see it)."""
    if not torch.cuda.is_available():
        reason = "torch.cuda.is_available() is False"
        try:
            torch.cuda.init()
        except Exception as exc:  # torch's message names the cause (driver too old, ...)
            reason = str(exc).strip().splitlines()[0]
        diag.append(
            Diagnosis(
                code="cuda_runtime_missing",
                message=f"the CUDA runtime cannot use the GPU: {reason}",
            )
        )
        return
    count = torch.cuda.device_count()
    if not 0 <= device < count:
        diag.append(
            Diagnosis(
                code="no_device", message=f"--device {device} but CUDA sees {count} device(s)"
            )
        )
        return
    props = torch.cuda.get_device_properties(device)
    handle = nvml_handle(device, props, nvml)
    gpu = nvml.inventory(handle) if nvml and handle is not None else GpuInventory()
    if gpu.processes is not None:  # the probe's own CUDA context is no competitor
        gpu.processes = [p for p in gpu.processes if p.pid != os.getpid()]
    gpu.compute_capability = f"{props.major}.{props.minor}"
    gpu.multiprocessors = props.multi_processor_count
    if gpu.name is None:
        gpu.name = props.name
    inv.gpu = gpu
    return handle


def nvml_handle(device: int, props: Any, nvml: Nvml | None) -> Any:
    """NVML's handle for the CUDA device: by UUID, since CUDA_VISIBLE_DEVICES renumbers."""
    if nvml is None:
        return None
    uuid = getattr(props, "uuid", None)
    handle = nvml.handle_by_uuid(f"GPU-{uuid}") if uuid is not None else None
    if handle is None:
        try:
            handle = nvml.handle(device)
        except EnvironmentProblem:
            return None
    return handle


def gpu_key(env: Environment, device: int) -> str:
    gpu = env.inventory.gpu
    return gpu.uuid if gpu is not None and gpu.uuid else f"index{device}"
