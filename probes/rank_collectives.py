"""The collectives a rank takes part in: agreed by every rank first (backend, message sizes), then
within each node, across every node and between node pairs (--pairwise), in the same order on
every rank as torch.distributed requires. The measuring itself is probes/collectives.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from probes import collectives
from probes.coordination import Group, RankPlace, SubGroup
from probes.pairing import DEFAULT_ROUNDS, PairwisePlan
from probes.stats import Measurement, failed

MiB = 1 << 20
SIZES = {
    "quick": (64 * MiB, 256 * MiB, 1024 * MiB),
    "full": tuple(s * MiB for s in (8, 64, 256, 1024, 4096)),
}
REPEATS = {"quick": 10, "full": 20}
PAIRWISE_BYTES = 256 * MiB
# On CPUs (gloo) the collectives show the orchestration works; their figures are information.
CPU_SIZES = (1 * MiB, 16 * MiB)
CPU_REPEATS = 5


@dataclass
class CollectiveRun:
    backend: str | None = None
    node: list[Measurement] = field(default_factory=list)  # within this node
    cluster: list[Measurement] = field(default_factory=list)  # every node together
    pairwise: list[Measurement] = field(default_factory=list)  # node pairs (params: nodes)
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Wanted:
    """What the user asked for (the same on every rank)."""

    mode: Literal["quick", "full"]
    nccl: bool
    pairwise: bool
    extra_sizes: tuple[int, ...] = ()
    pairwise_rounds: int = DEFAULT_ROUNDS


@dataclass(frozen=True)
class Bench:
    """What every collective of this rank shares: agreed by all ranks before the first one."""

    torch: Any
    device: Any
    backend: str
    sizes: tuple[int, ...]
    repeats: int


def run_collectives(
    wanted: Wanted,
    place: RankPlace,
    group: Group,
    gpu: int | None,
    say: Callable[[str], None],
) -> CollectiveRun:
    """This rank's part of every collective; `gpu`: the CUDA index it measured, None if none."""
    out = CollectiveRun()
    bench = _agree_bench(wanted, group, gpu, out)
    if bench is None:
        return out
    out.backend = bench.backend
    local = place.local_world_size
    node_groups = [
        group.new([n * local + i for i in range(local)], bench.backend) for n in range(place.nodes)
    ]
    mine = node_groups[place.node_rank]
    ops = collectives.COLLECTIVES if local > 1 else ("all_reduce",)
    sizes = bench.sizes if local > 1 else bench.sizes[:1]  # one rank: NCCL runs, no bus
    for op in ops:
        for size in sizes:
            say(f"{op} of {collectives.size_label(size)} on {local} rank(s) ({bench.backend})")
            out.node.append(_one(bench, mine, group.coord, local, "node", op, size))
    if place.nodes < 2:
        return out
    world = group.new(list(range(place.world_size)), bench.backend)
    for size in bench.sizes:
        say(f"all_reduce of {collectives.size_label(size)} across {place.nodes} nodes")
        out.cluster.append(
            _one(bench, world, group.coord, place.world_size, "cluster", "all_reduce", size)
        )
    if wanted.pairwise:
        out.pairwise = _pairwise(place, group, bench, say, out.cluster, wanted.pairwise_rounds)
    return out


def _one(
    bench: Bench, sub: SubGroup, coord: Any, ranks: int, scope: str, op: str, size: int
) -> Measurement:
    name = f"{op}_{collectives.size_label(size)}"
    if sub.error is not None:
        return failed(name, "GB/s", sub.error)
    measure = collectives.Collectives(bench.torch, sub.group, coord, bench.device, ranks, scope)
    return measure.measure(op, size, bench.repeats)


def _pairwise(
    place: RankPlace,
    group: Group,
    bench: Bench,
    say: Callable[[str], None],
    cluster: list[Measurement],
    rounds: int,
) -> list[Measurement]:
    """The nodes' network in rounds of disjoint groups measured at once (probes/pairing.py):
    screening pairs, suspects against cleared nodes, bisection of a slow cluster. Every rank
    runs the same plan: each round's figures are shared before the next is chosen."""
    local = place.local_world_size
    size = min(PAIRWISE_BYTES, max(bench.sizes))
    name = f"pairwise_all_reduce_{collectives.size_label(size)}"
    label = f"all_reduce_{collectives.size_label(size)}"
    whole = next((m.value for m in cluster if m.name == label), None)
    # rank 0's figure for every rank: the plans must not differ on whether to bisect
    (shared,) = _shared(group, [(whole or 0.0) if place.rank == 0 else 0.0])
    plan = PairwisePlan(place.nodes, rounds, cluster_busbw=shared or None)
    found = []
    while (step := plan.next_round()) is not None:
        phase, groups = step
        values = [0.0] * len(groups)
        mine = None
        for i, nodes in enumerate(groups):
            ranks = [n * local + j for n in nodes for j in range(local)]
            sub = group.new(ranks, bench.backend)  # every rank creates every group, in order
            coord = group.new_coord(ranks)
            if place.rank in ranks:
                mine = (i, nodes, sub, coord, ranks)
        if mine is not None:
            i, nodes, sub, coord, ranks = mine
            say(f"{phase} round {plan.rounds_run + 1}: all_reduce between nodes {list(nodes)}")
            m = _one(bench, sub, coord, len(ranks), "pair", "all_reduce", size)
            m.name = name
            m.params.update(nodes=list(nodes), phase=phase, round=plan.rounds_run)
            found.append(m)
            if place.rank == ranks[0]:  # the group's first rank speaks for it
                values[i] = m.value if m.value is not None else -1.0
        plan.record(phase, groups, _shared(group, values))
    return found


def _shared(group: Group, values: list[float]) -> list[float | None]:
    """Each group's figure, known to every rank (-1: the test failed)."""
    torch = group.torch
    tensor = torch.tensor(values, dtype=torch.float64)
    group.dist.all_reduce(tensor, group=group.coord)
    return [None if v < 0 else float(v) for v in tensor.tolist()]


def _agree_bench(wanted: Wanted, group: Group, gpu: int | None, out: CollectiveRun) -> Bench | None:
    """What every rank will run, agreed before the first collective (ranks that disagreed would
    call different collectives and wait for each other until the timeout): NCCL on GPUs when
    every rank has a GPU and NCCL, gloo on CPUs when no rank has a GPU, else nothing, said why;
    message sizes every rank has memory for. None: no collectives."""
    torch, dist = group.torch, group.dist
    nccl_here = bool(getattr(dist, "is_nccl_available", lambda: False)())
    without_gpu = group.ranks_where(gpu is None)
    without_nccl = group.ranks_where(not nccl_here)
    gpus = len(without_gpu) < group.place.world_size
    if gpus and not wanted.nccl:
        return None  # --no-nccl
    if gpus and (without_gpu or without_nccl):
        why = (
            f"rank(s) {without_gpu} have no usable GPU"
            if without_gpu
            else f"NCCL is not available to rank(s) {without_nccl}"
        )
        out.errors.append(f"collectives between GPUs not run: {why}")
        return None
    if not gpus:
        return Bench(torch, torch.device("cpu"), "gloo", CPU_SIZES, CPU_REPEATS)
    device = torch.device(f"cuda:{gpu}")
    torch.cuda.set_device(device)
    budget = torch.tensor([_memory_budget(torch, device)], dtype=torch.int64)
    dist.all_reduce(budget, op=dist.ReduceOp.MIN, group=group.coord)
    sizes = sorted({*SIZES[wanted.mode], *wanted.extra_sizes})
    fitting = tuple(s for s in sizes if s <= int(budget.item()))
    return Bench(torch, device, "nccl", fitting, REPEATS[wanted.mode])


def _memory_budget(torch: Any, device: Any) -> int:
    """Largest message that leaves room: an all-gather holds the message and a rank's part."""
    free, _ = torch.cuda.mem_get_info(device)
    return int(free * 0.4)
