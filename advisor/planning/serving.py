"""Serving deployment choice: the tensor-parallel degree, concurrency and replicas of a served
model on one kind of node (the inference model in advisor/perf/inference.py gives each
candidate's TTFT, ITL and throughput), the latency targets that choose among them, and the
figures of a deployment that does not fit."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from advisor.catalog.models import Accelerator, WorkloadProfile
from advisor.errors import InputError, field_name
from advisor.perf.headroom import USABLE_MEMORY, usable_memory_gb
from advisor.perf.inference import (
    Deployment,
    InferenceModel,
    InferenceResult,
    bandwidth_efficiency,
)
from advisor.perf.sizing import Figure, Shape
from advisor.perf.speculative import speculation_for
from advisor.perf.targets import Targets
from advisor.perf.work import TP_DEGREES, Work
from advisor.planning.fit import Fit
from advisor.planning.limits import NEEDS_SHAPE
from advisor.request import SERVING_FIELDS


def refuse_serving_fields(w: Work) -> None:
    """Serving figures asked of a model without a shape: exit 2 rather than a silent guess."""
    asked = [name for name in SERVING_FIELDS if getattr(w, name) is not None]
    if asked:
        names = ", ".join(field_name(name) for name in asked)
        raise InputError(
            f"{names}: memory only: {NEEDS_SHAPE}: give {field_name('model')} (a preset)",
            field=asked[0],
        )


@dataclass(frozen=True, slots=True)
class DeploymentChoice:
    """The deployment chosen for a request on one kind of node: the highest throughput per GPU
    among those that meet the latency targets; when none does (`met` False), the one with the
    lowest ITL. `floor` is the lowest (TTFT, ITL) in ms any tensor-parallel degree reaches."""

    result: InferenceResult
    model: InferenceModel
    floor: tuple[float, float]
    met: bool
    rate_per_replica: float | None = None  # load as a rate: the most one replica sustains


def with_default_load(w: Work, profile: WorkloadProfile) -> Work:
    """The work with its profile's default load when it states none (no rate, concurrency or
    throughput target): interactive serving sized for its latency at a stated load."""
    default = profile.latency_targets
    stated = (w.request_rate, w.concurrency, w.throughput_tokens_s, w.batch)
    if default is None or default.request_rate is None or any(x is not None for x in stated):
        return w
    return dataclasses.replace(w, request_rate=default.request_rate)


def _deployment(
    shape: Shape, acc: Accelerator, gpus: int, tp: int, w: Work, link_gb_s: float, per_node: int
) -> Deployment:
    """A deployment of `gpus` in replicas of `tp` as the work asks it served."""
    return Deployment(
        acc,
        gpus,
        tp,
        w.precision,
        link_gb_s,
        per_node,
        kv_precision=w.kv_precision,
        prefix_cache_hit_rate=w.prefix_cache_hit_rate or 0.0,
        engine=w.engine,
        speculation=speculation_for(w.draft_tokens, w.acceptance_length, shape.layers or 1),
        lora=(w.lora_adapters, w.lora_rank) if w.lora_adapters else None,
        trace=w.trace,
    )


def serving_degrees(per_node: int, gpu_count: int | None) -> list[int]:
    """Tensor-parallel degrees a replica may take: dividing a node's GPUs (none left idle: the
    rule check_tensor_parallel holds an asked-for degree to) and the GPUs asked for."""
    return [d for d in TP_DEGREES if per_node % d == 0 and (gpu_count or d) % d == 0]


def choose_deployment(
    shape: Shape,
    moe: tuple[int, int] | None,
    acc: Accelerator,
    per_node: int,
    link_gb_s: float,
    w: Work,
    targets: Targets,
) -> DeploymentChoice:
    """The inference model for a request on `acc`: TP as asked, else every power of two inside
    one node (that divides the GPUs asked for) that holds the weights and the sequences asked
    for; GPUs as asked, else one replica of TP GPUs. InputError when no degree holds them."""
    inp, out = w.io_tokens()
    degrees = [w.tensor_parallel] if w.tensor_parallel else serving_degrees(per_node, w.gpu_count)
    if w.request_rate is not None:
        return _choose_for_rate(shape, moe, acc, per_node, link_gb_s, w, targets, degrees)
    asked = w.concurrency or w.batch
    met: list[tuple[float, InferenceResult, InferenceModel]] = []
    missed: list[tuple[InferenceResult, InferenceModel]] = []
    floors: list[tuple[float, float]] = []
    model: InferenceModel | None = None
    for tp in degrees:
        dep = _deployment(shape, acc, w.gpu_count or tp, tp, w, link_gb_s, per_node)
        model = InferenceModel(shape, dep, inp, out, moe)
        if model.max_concurrency() < (asked or 1):
            continue
        got = model.at(asked, targets)
        floors.append((model.prefill_s(inp) * 1e3, model.itl_s(asked or 1) * 1e3))
        if targets.met(got.ttft_ms, got.itl_ms):
            met.append((got.throughput_tokens_s / dep.gpus, got, model))
        else:
            missed.append((got, model))
    floor = _latency_floor(floors, model, asked)
    if met:
        _, got, model = max(met, key=lambda m: m[0])  # ties: the first, the fewest GPUs
        return DeploymentChoice(got, model, floor, True)
    got, model = min(missed, key=lambda m: (m[0].itl_ms, m[0].ttft_ms))
    return DeploymentChoice(got, model, floor, False)


def _choose_for_rate(
    shape: Shape,
    moe: tuple[int, int] | None,
    acc: Accelerator,
    per_node: int,
    link_gb_s: float,
    w: Work,
    targets: Targets,
    degrees: list[int],
) -> DeploymentChoice:
    """Load as a request rate: for each degree, the replicas that sustain the rate with every
    replica within the latency targets (the GPUs asked for at least), the figures at that rate;
    of those, the fewest GPUs (ties: the lowest ITL). When no degree meets the targets even at
    one sequence, the degree with the lowest ITL, sized to sustain the rate."""
    assert w.request_rate is not None and w.concurrency is None  # one load (advisor/request.py)
    inp, out = w.io_tokens()
    options: list[tuple[bool, int, float, InferenceResult, InferenceModel, float]] = []
    floors: list[tuple[float, float]] = []
    last: InferenceModel | None = None
    for tp in degrees:
        dep = _deployment(shape, acc, tp, tp, w, link_gb_s, per_node)
        one = InferenceModel(shape, dep, inp, out, moe)
        last = one
        if one.max_concurrency() < 1:
            continue
        floors.append((one.prefill_s(inp) * 1e3, one.itl_s(1) * 1e3))
        per_replica, _ = one.max_request_rate(targets)
        met = per_replica > 0
        if not met:
            per_replica, _ = one.max_request_rate()
        replicas = max((w.gpu_count or tp) // tp, math.ceil(w.request_rate / per_replica - 1e-9))
        model = one.on(_deployment(shape, acc, tp * replicas, tp, w, link_gb_s, per_node))
        got = model.at_rate(w.request_rate, targets)
        met = met and targets.met(got.ttft_ms, got.itl_ms)
        options.append((met, tp * replicas, got.itl_ms, got, model, per_replica))
    floor = _latency_floor(floors, last, None)
    met_any = any(o[0] for o in options)
    pool = [o for o in options if o[0]] if met_any else options
    key = (lambda o: (o[1], o[2])) if met_any else (lambda o: (o[2], o[1]))
    _, _, _, got, model, per_replica = min(pool, key=key)
    return DeploymentChoice(got, model, floor, met_any, per_replica)


def _latency_floor(
    floors: list[tuple[float, float]], last: InferenceModel | None, asked: int | None
) -> tuple[float, float]:
    """The lowest (TTFT, ITL) ms of the degrees that hold the work; when none does, the
    InputError of the last degree tried (why it holds nothing)."""
    if not floors:
        assert last is not None
        last.at(asked)  # raises: why the largest degree tried holds nothing
        raise AssertionError("unreachable: a degree that holds the work was skipped")
    return min(f[0] for f in floors), min(f[1] for f in floors)


def replicas_for(target_tokens_s: float | None, per_replica_tokens_s: float) -> int:
    return math.ceil(target_tokens_s / per_replica_tokens_s) if target_tokens_s else 1


def inference_nodes(per_replica: int, per_node: int, replicas: int) -> tuple[int, int]:
    """Nodes to rent and replicas to run (a replica lives inside one node): rented GPUs are
    paid for, so a node runs as many replicas as it holds."""
    per_node_replicas = max(1, per_node // per_replica)
    nodes = math.ceil(replicas / per_node_replicas)
    return nodes, nodes * per_node_replicas


def per_replica_figure(total_gb: float, acc: Accelerator, per_replica: int) -> Figure:
    return Figure(
        "gpus_per_replica",
        per_replica,
        "GPUs",
        f"{total_gb:.1f} GB / ({acc.device_memory_gb:g} GB x {USABLE_MEMORY:.0%} usable), "
        "rounded up to a power of two (tensor parallel)",
    )


def replicas_figure(
    replicas: int,
    wanted: int,
    target_tokens_s: float | None,
    rate: float,
    tp: int,
    per_node: int,
    nodes: int,
    request_rate: tuple[float | None, float | None] = (None, None),
) -> Figure:
    """How many replicas run: those the throughput target or the request rate needs (or the
    GPUs asked for), and then every rented GPU serving (a node runs as many replicas of TP GPUs
    as it holds). `request_rate`: (requests/s asked, the most one replica sustains)."""
    asked_rate, per_replica_rate = request_rate
    if asked_rate is not None and per_replica_rate:
        needed = math.ceil(asked_rate / per_replica_rate - 1e-9)
        why = (
            f"ceil({asked_rate:g} requests/s / {per_replica_rate:.4g} per replica within the "
            f"latency targets) = {needed}"
        )
        if wanted > needed:
            why += f"; {wanted} on the GPUs asked for"
    elif target_tokens_s:
        why = f"ceil({target_tokens_s:g} tokens/s / {rate:,.0f} per replica) = {wanted}"
    else:
        why = f"no throughput target: {wanted} replica(s) on the GPUs asked for"
    if replicas > wanted:
        why += f"; the {nodes} rented node(s) of {per_node} GPUs run {replicas} replicas of TP {tp}"
    return Figure("replicas", replicas, "replicas", why)


def unfit_inference(
    acc: Accelerator, reason: str, memory: list[Figure], gpus: int, per_node: int
) -> Fit:
    """Serving that does not fit `acc`: every memory figure, the memory per GPU it would need
    on `gpus` GPUs of one node (the most it may use), and why."""
    eff, source = bandwidth_efficiency(acc)
    total = memory[-1].value
    return Fit(
        gpus_needed=gpus,
        nodes=1,
        rented_gpus=per_node,
        spans_nodes=False,
        memory_per_gpu_gb=total / gpus,
        memory_total_gb=total,
        efficiency=eff,
        efficiency_source=source,
        tensor_parallel=gpus,
        unfit=f"{acc.id}: {reason}",
        figures=(
            *memory,
            Figure(
                "memory_per_gpu_gb",
                total / gpus,
                "GB",
                f"{total:.1f} GB / {gpus} GPUs, above "
                f"{usable_memory_gb(acc.device_memory_gb):.1f} GB usable of "
                f"{acc.device_memory_gb:g} GB",
            ),
        ),
    )


def next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()
