"""Runs `advisor probe --ops`: the operator table of each GPU of the node (probes.ops), and with
more than one GPU the collectives between them by message size (probes.collectives, in local
processes: NCCL on GPUs, gloo on CPUs). torch is imported here only when a run starts.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import socket
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from probes import ops
from probes.device import TorchDevice
from probes.environment import import_torch
from probes.errors import INSTALL_PROBE_EXTRA, EnvironmentProblem
from probes.ops_table import CollectiveRow, OpsTable, Stack

COLLECTIVE_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
COLLECTIVE_SIZES = {
    "quick": (1 << 20, 64 << 20),
    "full": tuple(1 << s for s in range(16, 31, 2)),  # 64 KiB to 1 GiB, x4
    "tiny": (1 << 12, 1 << 16),
}
Progress = Callable[[str], None]


def _torch() -> Any:
    """torch, or the problem a base install (no probe extra) has: exit 3 with the hint."""
    try:
        return import_torch()
    except ImportError as exc:
        raise EnvironmentProblem(
            "torch_missing", f"PyTorch is not installed ({exc}); {INSTALL_PROBE_EXTRA}"
        ) from None


def stack_of(torch: Any, dev: TorchDevice, driver: str | None) -> Stack:
    if dev.is_cuda:
        props = torch.cuda.get_device_properties(dev.device)
        name, cc = props.name, f"{props.major}.{props.minor}"
    else:
        name, cc = f"CPU ({platform.processor() or platform.machine()})", None
    return Stack(
        device_name=name,
        compute_capability=cc,
        torch=str(torch.__version__),
        cuda=torch.version.cuda,
        driver=driver,
        python=platform.python_version(),
        machine=socket.gethostname(),
    )


def measure_table(
    mode: str,
    device: int | None,
    *,
    accelerator: str | None = None,
    driver: str | None = None,
    progress: Progress | None = None,
    torch_loader: Callable[[], Any] = import_torch,
) -> OpsTable:
    """The operator table of CUDA device `device` (None: the CPU) in `mode` (quick, full; tiny
    for tests)."""
    started = time.perf_counter()
    torch = torch_loader()
    dev = TorchDevice(torch, device)
    plan = ops.PLANS[mode]
    timer = ops.Timer(dev, plan.repeats, plan.sample_s)
    notes: list[str] = []

    def say(msg: str) -> None:
        if progress is not None:
            progress(f"ops {msg}")

    gemm = []
    for precision in plan.precisions:
        why = ops.supported(dev, precision)
        if why is not None:
            notes.append(f"gemm {precision} not measured: {why}")
            continue
        gemm += ops.safe(
            f"gemm {precision}",
            notes,
            partial(ops.gemm_rows, dev, precision, plan, timer, say),
            [],
        )
    if dev.is_cuda:  # batched bf16 expert GEMMs; a CPU's bf16 bmm says nothing useful
        gemm += ops.safe(
            "grouped gemm",
            notes,
            lambda: ops.grouped_rows(dev, plan, timer, say),
            [],
        )
    prefill, decode = ops.safe(
        "attention",
        notes,
        lambda: ops.attention_rows(dev, plan, timer, say, notes),
        ([], []),
    )
    train, ring = ops.safe(
        "training attention",
        notes,
        lambda: ops.training_attention_rows(dev, plan, timer, say),
        ([], []),
    )
    memory = ops.safe(
        "memory-bound operators",
        notes,
        lambda: ops.memory_rows(dev, plan, timer, say),
        [],
    )
    memory += ops.safe(
        "KV-cache writes", notes, lambda: ops.kv_write_rows(dev, plan, timer, say), []
    )
    sustained = ops.safe(
        "sustained gemm", notes, lambda: ops.sustained_rows(dev, plan, timer, say), []
    )
    launch = ops.safe("launch", notes, lambda: ops.launch_rows(dev, timer, say), [])
    return OpsTable(
        accelerator=accelerator,
        mode=mode,
        measured_at=dt.datetime.now(dt.UTC).replace(microsecond=0),
        duration_s=round(time.perf_counter() - started, 2),
        stack=stack_of(torch, dev, driver),
        gemm=gemm,
        attention_prefill=prefill,
        attention_decode=decode,
        attention_train=train,
        attention_ring=ring,
        memory_ops=memory,
        sustained=sustained,
        launch=launch,
        notes=notes,
    )


# -- collectives between the GPUs of the node ------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _collective_rank(
    rank: int, world: int, port: int, cuda: bool, sizes: tuple[int, ...], repeats: int, out: str
) -> None:
    """One local rank: every collective at every size; rank 0 writes the rows to `out`."""
    from probes.collectives import Collectives

    torch = _torch()
    dist = torch.distributed
    backend = "nccl" if cuda else "gloo"
    device = torch.device(f"cuda:{rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        coord = dist.new_group(backend="gloo") if cuda else dist.group.WORLD
        bench = Collectives(torch, dist.group.WORLD, coord, device, world, "node")
        rows = []
        for op in COLLECTIVE_OPS:
            for nbytes in sizes:
                m = bench.measure(op, nbytes, repeats)
                if m.error is None and m.median is not None:
                    algbw = m.params["algbw_median"]
                    seconds = nbytes / (algbw * 1e9)
                    rows.append(
                        {
                            "op": op,
                            "ranks": world,
                            "bytes": nbytes,
                            "busbw_gb_s": m.median,
                            "median_us": seconds * 1e6,
                            "iqr_us": (m.iqr or 0.0) / m.median * seconds * 1e6,
                            "cv": m.cv or 0.0,
                        }
                    )
        if rank == 0:
            Path(out).write_text(json.dumps(rows))
    finally:
        dist.destroy_process_group()


def measure_collectives(
    world: int, mode: str, cuda: bool, progress: Progress | None = None
) -> list[CollectiveRow]:
    """All-reduce, all-gather, reduce-scatter and all-to-all over `world` local ranks at the
    mode's message sizes (torch.multiprocessing; the node probe's Collectives measure them)."""
    torch = _torch()
    sizes = COLLECTIVE_SIZES[mode]
    if progress is not None:
        progress(f"ops collectives over {world} ranks at {len(sizes)} sizes")
    with tempfile.TemporaryDirectory(prefix="advisor-ops-") as scratch:
        out = os.path.join(scratch, "rows.json")
        torch.multiprocessing.spawn(
            _collective_rank,
            args=(world, _free_port(), cuda, sizes, 5, out),
            nprocs=world,
            join=True,
        )
        rows = json.loads(Path(out).read_text())
    return [CollectiveRow.model_validate(r) for r in rows]


def node_driver() -> str | None:
    """The NVIDIA driver's version through NVML (None without one)."""
    from probes.nvml import Nvml

    nvml = Nvml()
    try:
        return nvml.driver_version()
    except Exception:  # no NVML library or bindings: the table just lacks the figure
        return None
    finally:
        nvml.shutdown()


def measure_node(
    mode: str,
    device: int | None,
    *,
    collectives: bool = True,
    progress: Progress | None = None,
    accelerator_of: Callable[[str], str | None] = lambda _name: None,
) -> list[OpsTable]:
    """One table per GPU measured (`device`, or every visible GPU; the CPU when none), the
    collectives over the GPUs in the first table when there are several (and `collectives`).
    `accelerator_of` maps a device name to the catalog id the table is filed under."""
    torch = _torch()
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    indices: list[int | None] = list(range(count)) if device is None else [device]
    if not count:  # no GPU: the CPU, on shapes it times in seconds (the GPU grid would take hours)
        indices, mode = [None], "tiny"
    driver = node_driver() if count else None
    tables = []
    for index in indices:
        if progress is not None:
            progress(f"ops on {'GPU ' + str(index) if index is not None else 'the CPU'}")
        name = torch.cuda.get_device_name(index) if index is not None else ""
        tables.append(
            measure_table(
                mode, index, accelerator=accelerator_of(name), driver=driver, progress=progress
            )
        )
    if collectives and device is None and count > 1:
        rows = measure_collectives(count, mode, cuda=True, progress=progress)
        tables[0] = tables[0].model_copy(update={"collectives": rows})
    return tables
