"""One rank of the node probe: its GPU's measurements, then the collectives, the peer links (local
rank 0) and the health counters. torchrun starts one per GPU (`python -m probes.worker`); a probe
of one GPU on one node runs the same `run_rank` in its own process, as a world of one.

Each rank writes its result (`rank-N.json` in the output folder) after every phase, so what a rank
measured survives a rank that dies later. Coordination (barriers, agreeing on timings, gathering
the results) goes through a gloo group; collectives go through NCCL on GPUs.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from probes import peers, probe
from probes.coordination import BarrierTimeout, Group, RankPlace, first_line
from probes.environment import import_torch, nvml_handle
from probes.errors import EnvironmentProblem, LockBusy
from probes.health import XidListener, pcie_replays, read_health
from probes.nvml import Nvml
from probes.pairing import DEFAULT_ROUNDS
from probes.rank_collectives import Wanted, run_collectives
from probes.report import Diagnosis, Inventory, PeerLink
from probes.stats import Measurement
from probes.timestamps import Rfc3339
from probes.topology import peer_links

Phase = Literal["started", "measured", "collectives", "peers", "done"]
MiB = 1 << 20
# Message sizes per tier: up to 1 GiB in quick (large enough for NVLink to approach its plateau),
# to 4 GiB in full; a size an instance type's expectation names is added by the launcher.
PEER_BYTES = {"quick": 256 * MiB, "full": 1024 * MiB}
# Rank 0 copies between every ordered pair in turn (56 and 28 bidirectional on 8 GPUs): fewer
# samples in quick keep the tier within its 40 s on eight GPUs.
PEER_REPEATS = {"quick": 5, "full": 20}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RankResult(_Model):
    """What one rank wrote: the orchestrator (probes/node.py) builds the node report from these."""

    rank: int
    local_rank: int
    node_rank: int
    world_size: int
    local_world_size: int
    host: str
    pid: int
    gpu: int | None  # CUDA index measured, None on a CPU-only machine
    phase: Phase
    backend: str | None = None
    created_at: Rfc3339
    mode: Literal["quick", "full"]
    inventory: Inventory
    diagnosis: list[Diagnosis] = Field(default_factory=list)
    measurements: list[Measurement] = Field(default_factory=list)  # this GPU's own
    collectives: list[Measurement] = Field(default_factory=list)  # within this node
    cluster_collectives: list[Measurement] = Field(default_factory=list)  # every node together
    pairwise: list[Measurement] = Field(default_factory=list)  # node pairs (params: nodes)
    peers: list[Measurement] = Field(default_factory=list)  # local rank 0: every GPU pair
    topology: list[PeerLink] = Field(default_factory=list)  # local rank 0
    errors: list[str] = Field(default_factory=list)
    watchdog_tripped: bool = False
    duration_s: float = 0.0


@dataclass(frozen=True)
class RankOptions:
    out: Path
    mode: Literal["quick", "full"] = "quick"
    gpus: tuple[int, ...] = ()  # CUDA index per local rank; () = local rank itself
    nccl: bool = True
    pairwise: bool = False
    pairwise_rounds: int = DEFAULT_ROUNDS
    only: frozenset[str] | None = None
    extra_sizes: tuple[int, ...] = ()
    lock_wait_s: float = 60.0
    timeout_s: float = 300.0  # how long a rank waits for the others at a barrier
    burn_s: float | None = None  # --burn: seconds of sustained matmuls after the measurements


@dataclass
class Seams:
    """What a rank reaches outside itself: NVML, torch and the environment. Tests give fakes
    (tests.fake_nvml, tests.probe_fakes) here or through `default_seams`."""

    nvml: Nvml = field(default_factory=Nvml)
    torch_loader: Callable[[], Any] = import_torch
    environ: dict[str, str] | None = None
    watchdog_s: float | None = None  # None: the tier's own limit


def default_seams() -> Seams:
    return Seams()


def result_path(out: Path, rank: int) -> Path:
    return out / f"rank-{rank}.json"


WORLD_FILE = "world.json"


def run_rank(
    opts: RankOptions,
    place: RankPlace | None = None,
    seams: Seams | None = None,
    progress: Callable[[str], None] | None = None,
) -> RankResult:
    place = place or RankPlace()  # a world of one
    seams = seams or default_seams()
    say = progress or (lambda _m: None)
    started = time.perf_counter()
    gpu = opts.gpus[place.local_rank] if opts.gpus else place.local_rank
    group = Group.start(seams.torch_loader, place, opts.timeout_s)
    run = _measure_gpu(opts, gpu, seams, say, group)
    result = RankResult(
        rank=place.rank,
        local_rank=place.local_rank,
        node_rank=place.node_rank,
        world_size=place.world_size,
        local_world_size=place.local_world_size,
        host=socket.gethostname(),
        pid=os.getpid(),
        gpu=gpu if run.gpu_measured else None,
        phase="measured",
        created_at=run.created_at,
        mode=opts.mode,
        inventory=run.inventory,
        diagnosis=run.diagnosis,
        measurements=run.measurements,
        watchdog_tripped=run.watchdog_tripped,
    )
    if group.error:
        result.errors.append(group.error)
    result.errors += group.notes
    _save(opts.out, result, started)
    try:
        if group.dist is not None:
            _after_measuring(opts, place, group, run, seams, result, say, started)
    finally:
        group.close()
        seams.nvml.shutdown()
    return _finish(opts.out, result, started)


def _after_measuring(
    opts: RankOptions,
    place: RankPlace,
    group: Group,
    run: probe.ProbeRun,
    seams: Seams,
    result: RankResult,
    say: Callable[[str], None],
    started: float,
) -> None:
    """Collectives, peers and the gather; skipped by every rank when one rank's GPU hung (it
    would hang every collective too), and ended by a barrier that timed out."""
    try:
        group.barrier("the collectives")  # names a rank that never finished measuring
        hung = group.ranks_where(run.watchdog_tripped)
        if hung:
            result.errors.append(f"collectives not run: the GPU of rank(s) {hung} hung")
            return
        wanted = Wanted(opts.mode, opts.nccl, opts.pairwise, opts.extra_sizes, opts.pairwise_rounds)
        done = run_collectives(wanted, place, group, run.device if run.gpu_measured else None, say)
        result.backend = done.backend
        result.collectives, result.cluster_collectives = done.node, done.cluster
        result.pairwise = done.pairwise
        result.errors += done.errors
        result.phase = "collectives"
        _save(opts.out, result, started)
        if place.local_rank == 0:
            _peers(opts, run, seams, result, say)
        result.phase = "peers"
        group.barrier("the peer-link measurements")
        _gather(opts, place, group, result, started)
    except BarrierTimeout as exc:
        result.errors.append(str(exc))
    except RuntimeError as exc:  # torch.distributed's timeouts and broken connections
        result.errors.append(f"{result.phase}: {first_line(exc)}")


def _finish(out: Path, result: RankResult, started: float) -> RankResult:
    result.phase = "done"
    _save(out, result, started)
    return result


def _save(out: Path, result: RankResult, started: float) -> None:
    result.duration_s = time.perf_counter() - started
    out.mkdir(parents=True, exist_ok=True)
    path = result_path(out, result.rank)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(result.model_dump_json())
    tmp.replace(path)  # a reader never sees half a file


def _measure_gpu(
    opts: RankOptions, gpu: int, seams: Seams, say: Callable[[str], None], group: Group
) -> probe.ProbeRun:
    """The single-GPU probe on this rank's GPU, every rank starting together, with the XID events
    and health counters of its GPU around it."""
    from probes.lock import gpu_lock

    group.barrier("the start of the per-GPU measurements", soft=True)
    handle = _handle_of(seams, gpu)
    replays = pcie_replays(seams.nvml, handle) if handle is not None else None
    lock = partial(gpu_lock, wait_s=opts.lock_wait_s, on_wait=say)
    xids = XidListener(seams.nvml, [handle]) if handle is not None else contextlib.nullcontext()
    with xids as listener:
        try:
            run = probe.run_probe(
                opts.mode,
                gpu,
                nvml=seams.nvml,
                torch_loader=seams.torch_loader,
                progress=say,
                environ=seams.environ,
                only=set(opts.only) if opts.only is not None else None,
                lock=lock,
                keep_nvml=True,
                watchdog_s=seams.watchdog_s,
                burn_s=opts.burn_s,
            )
        except LockBusy as exc:
            run = probe.ProbeRun(
                dt.datetime.now(dt.UTC),
                opts.mode,
                gpu,
                Inventory(hostname=socket.gethostname(), python=sys.version.split()[0]),
                [Diagnosis(code="gpu_busy", message=str(exc))],
            )
    gpu_inv = run.inventory.gpu
    if gpu_inv is not None:
        gpu_inv.cuda_index = gpu
        gpu_inv.under_load = run.inventory.under_load
        if handle is not None and not run.watchdog_tripped:
            events = listener.events(0) if isinstance(listener, XidListener) else None
            gpu_inv.health = read_health(seams.nvml, handle, events, replays)
        run.inventory.gpus = [gpu_inv]
    for m in run.measurements:
        m.gpu = gpu if run.gpu_measured else None
    return run


def _handle_of(seams: Seams, gpu: int) -> Any:
    """NVML's handle of CUDA device `gpu`, found by UUID (CUDA_VISIBLE_DEVICES renumbers);
    None without a GPU, a driver or NVML."""
    try:
        torch = seams.torch_loader()
        if not torch.cuda.is_available() or gpu >= torch.cuda.device_count():
            return None
        return nvml_handle(gpu, torch.cuda.get_device_properties(gpu), seams.nvml)
    except (ImportError, RuntimeError, EnvironmentProblem):
        return None


def _peers(
    opts: RankOptions,
    run: probe.ProbeRun,
    seams: Seams,
    result: RankResult,
    say: Callable[[str], None],
) -> None:
    """Every ordered pair of the GPUs this process sees, and NVML's topology of them."""
    torch = _torch_or_none(seams)
    if torch is None or not run.gpu_measured or torch.cuda.device_count() < 2:
        return
    count = torch.cuda.device_count()
    with contextlib.suppress(EnvironmentProblem):  # no NVML: copies without the topology
        props = {i: torch.cuda.get_device_properties(i) for i in range(count)}
        handles = {i: nvml_handle(i, props[i], seams.nvml) for i in range(count)}
        if all(h is not None for h in handles.values()):
            result.topology = peer_links(seams.nvml, handles)
    nbytes = PEER_BYTES[opts.mode]
    repeats = PEER_REPEATS[opts.mode]
    for i in range(count):
        for j in range(count):
            if i != j:
                say(f"peer copy GPU {i} -> {j}")
                result.peers.append(peers.copy(torch, i, j, nbytes, repeats))
    for i in range(count):
        for j in range(i + 1, count):
            say(f"peer copy GPU {i} <-> {j}")
            result.peers.append(peers.bidirectional(torch, i, j, nbytes, repeats))
    for i in range(count):
        torch.cuda.synchronize(i)
    torch.cuda.empty_cache()


def _torch_or_none(seams: Seams) -> Any:
    try:
        return seams.torch_loader()
    except ImportError:
        return None


def _gather(
    opts: RankOptions, place: RankPlace, group: Group, result: RankResult, started: float
) -> None:
    """Rank 0 writes every rank's result (world.json): the cluster summary is built from it.
    The JSON travels as bytes in uint8 tensors over gloo (all_gather of lengths, then of bytes
    padded to the longest)."""
    if place.nodes < 2:
        return
    torch, dist = group.torch, group.dist
    result.duration_s = time.perf_counter() - started
    data = result.model_dump_json().encode()
    lengths = [torch.zeros(1, dtype=torch.int64) for _ in range(place.world_size)]
    dist.all_gather(lengths, torch.tensor([len(data)], dtype=torch.int64), group=group.coord)
    longest = max(int(n.item()) for n in lengths)
    mine = torch.zeros(longest, dtype=torch.uint8)
    mine[: len(data)] = torch.tensor(list(data), dtype=torch.uint8)
    parts = [torch.zeros(longest, dtype=torch.uint8) for _ in range(place.world_size)]
    dist.all_gather(parts, mine, group=group.coord)
    if place.rank == 0:
        texts = [bytes(p[: int(n.item())].tolist()) for p, n in zip(parts, lengths, strict=True)]
        (opts.out / WORLD_FILE).write_text(json.dumps([json.loads(t) for t in texts]))


def _parse(argv: list[str]) -> RankOptions:
    p = argparse.ArgumentParser(prog="python -m probes.worker")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--mode", choices=("quick", "full"), default="quick")
    p.add_argument("--gpus", default="")
    p.add_argument("--no-nccl", action="store_true")
    p.add_argument("--pairwise", action="store_true")
    p.add_argument("--pairwise-rounds", type=int, default=DEFAULT_ROUNDS)
    p.add_argument("--only", default=None)
    p.add_argument("--extra-size", type=int, action="append", default=[])
    p.add_argument("--lock-wait-s", type=float, default=60.0)
    p.add_argument("--timeout-s", type=float, default=300.0)
    p.add_argument("--burn-s", type=float, default=None)
    a = p.parse_args(argv)
    return RankOptions(
        out=a.out,
        mode=a.mode,
        gpus=tuple(int(g) for g in a.gpus.split(",") if g),
        nccl=not a.no_nccl,
        pairwise=a.pairwise,
        pairwise_rounds=a.pairwise_rounds,
        only=frozenset(a.only.split(",")) if a.only else None,
        extra_sizes=tuple(a.extra_size),
        lock_wait_s=a.lock_wait_s,
        timeout_s=a.timeout_s,
        burn_s=a.burn_s,
    )


@contextlib.contextmanager
def _exit_when_hung(result_box: list[RankResult]) -> Iterator[None]:
    yield
    if result_box and result_box[0].watchdog_tripped:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # a hung measurement thread cannot be joined: the result is written


def main(argv: list[str] | None = None) -> int:
    opts = _parse(sys.argv[1:] if argv is None else argv)
    place = RankPlace.from_environ(dict(os.environ))

    def say(message: str) -> None:
        sys.stderr.write(f"[rank {place.rank}] {message}\n")  # one write: lines stay whole
        sys.stderr.flush()

    box: list[RankResult] = []
    with _exit_when_hung(box):
        box.append(run_rank(opts, place, progress=say))
    return 0


if __name__ == "__main__":
    # Run the module under its own name, not as __main__: one copy of its globals, the one that
    # everything else (and a test's fault injector) imports.
    import importlib

    raise SystemExit(importlib.import_module("probes.worker").main())
