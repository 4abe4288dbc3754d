"""The real adapters (NVML, CUDA through torch) on a machine with a GPU; skipped elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu


def test_real_nvml_inventory() -> None:
    from probes.nvml import Nvml

    nvml = Nvml()
    assert nvml.device_count() >= 1
    gpu = nvml.inventory(nvml.handle(0))
    assert gpu.name and gpu.uuid and gpu.memory_total_mib
    assert gpu.pcie_gen_max is not None and gpu.power_limit_w
    assert nvml.driver_version()
    nvml.shutdown()


def test_real_measurements_run_and_are_plausible() -> None:
    from probes.probe import run_probe

    run = run_probe("quick", 0, only={"matmul_bf16", "h2d_pinned", "d2d", "stream_overlap"})
    assert not run.diagnosis
    by_name = {m.name: m for m in run.measurements}
    assert all(m.error is None for m in by_name.values()), [m.error for m in by_name.values()]
    assert by_name["matmul_bf16"].value and by_name["matmul_bf16"].value > 10
    assert by_name["h2d_pinned"].value and by_name["h2d_pinned"].value > 1
    assert 0 < (by_name["stream_overlap"].value or 0) <= 1.05
    assert run.inventory.under_load and run.inventory.under_load.samples > 0


def test_real_out_of_memory_is_mapped() -> None:
    import torch

    from probes.device import TorchDevice
    from probes.errors import OutOfDeviceMemory
    from probes.measure import matmul

    with pytest.raises(OutOfDeviceMemory):
        matmul(TorchDevice(torch, 0), "bf16", 400_000, 1)  # 320 GB per operand
    torch.cuda.empty_cache()


def test_real_node_probe_of_one_gpu_initialises_nccl_and_reads_health(tmp_path: Path) -> None:
    from probes.worker import RankOptions, run_rank

    result = run_rank(RankOptions(out=tmp_path, only=frozenset({"matmul_bf16"})))
    assert result.phase == "done" and result.backend == "nccl", result.errors
    (allreduce,) = result.collectives
    assert allreduce.error is None and allreduce.params["ranks"] == 1
    gpu = result.inventory.gpu
    assert gpu is not None and gpu.health is not None and gpu.cuda_index == 0
    assert result.measurements[0].gpu == 0
