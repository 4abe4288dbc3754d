"""A served model no tensor-parallel degree inside one node holds, served by replicas that span
nodes: a mixture of experts with expert parallelism over every GPU of the replica and attention
data-parallel (advisor/perf/moe_serving.py), a dense model with TP inside each node and PP across
them (advisor/perf/pipeline_serving.py), or, over the trays of one NVLink domain (an NVL72 rack),
TP over all of them. The same questions as one-node serving
(advisor/planning/serving.py) on a replica of several nodes:

- the replica's iteration time for d decode sequences and p prompt tokens: EP, every DP rank at
  the busiest rank's share (ceil(d / ranks) sequences, at least one prompt's tokens when any),
  since the all-to-all holds the ranks in step; PP, the PP micro-batches of d / PP sequences each
  passing every stage and the hops between nodes;
- TTFT, ITL and end-to-end time at a batch as advisor/perf/inference.py defines them (the prompt
  packed into one iteration; half an iteration's wait to be admitted);
- under a request rate, the most one replica sustains within the targets (Little's law at the
  largest batch within them) sizes each candidate; the chosen one is checked by the simulation
  of advisor/perf/serving_sim.py (one replica, Poisson, seeded), with one more replica while it
  misses;
- the replica size: of 2 to MAX_REPLICA_NODES nodes, the one needing the fewest GPUs for the load
  (ties: the most output tokens per GPU); sizes are tried from the smallest, and stop where one
  replica alone needs more GPUs than a size already within the targets.

An MoE replica also says whether splitting its nodes into prefill and decode pools
(advisor/perf/disaggregated.py) would serve more requests at the same ITL target.

Speculative decoding, a trace, the KV cache's format (--kv-precision; by default the weights'
rule) and a prefix cache's hits (their prompt tokens not computed again, nor sent between
pipeline stages) apply as on one node; an engine's stored correction and LoRA adapters are not
modelled over several nodes (with adapters no replica spans nodes)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from advisor.catalog.models import Accelerator
from advisor.errors import InputError
from advisor.perf.disaggregated import compare
from advisor.perf.inference import (
    LARGE_GPU_GB,
    LOAD_REQUESTS,
    SCHEDULER_LARGE,
    SCHEDULER_SMALL,
    arrivals,
    bandwidth_efficiency,
    load_figures,
)
from advisor.perf.moe_serving import EpLayout, EpModel, KvCache, best_layout
from advisor.perf.pipeline_serving import PipelineServing
from advisor.perf.serving_sim import LoadResult, Scheduler, simulate
from advisor.perf.sizing import Figure, Shape
from advisor.perf.speculative import (
    Speculation,
    iterations_for,
    per_token,
    speculation_for,
    verify_step,
)
from advisor.perf.targets import Targets
from advisor.perf.trace_file import Trace
from advisor.perf.work import Work
from advisor.planning.fit import Fit
from advisor.units import GB

# The widest replica searched. SGLang's large-scale expert-parallel deployment of DeepSeek-V3
# (lmsys.org blog 2025-05-05) decodes on 9 nodes of 8 H100 and prefills on 3; 16 nodes leaves
# room above it and bounds the search.
MAX_REPLICA_NODES = 16
BITS_PER_BYTE = 8
SPEED_SOURCE = "roofline: datasheet peaks x the estimated efficiencies of advisor/perf/inference.py"
# The slowest node network a replica spans. A stated policy, ESTIMATED: vLLM's distributed
# serving guide lays a model over nodes of several GPUs each (TP inside, PP across) and asks
# for a high-speed interconnect (InfiniBand recommended); 100 Gbit/s keeps the RDMA-class nodes
# (p4d's 400, p5's 3,200) and leaves out general-purpose VMs on 10-50 Gbit/s Ethernet (a 70B
# model laid over eight single-L4 VMs is not a deployment anyone runs).
MIN_NETWORK_GBPS = 100
# Tries of one more replica when the simulated load misses the targets the Little's-law sizing
# met (queueing the steady state leaves out).
EXTRA_REPLICA_TRIES = 3


@dataclass
class Replica:
    """One model copy over `nodes` nodes: its iteration time, KV bound and memory per GPU."""

    gpus: int
    nodes: int
    layout: str  # the layout in words
    tensor_parallel: int  # attention TP (EP) or TP inside each node (PP)
    max_sequences: int  # sequences the replica's KV cache holds
    step: Callable[[int, float], float]  # (decode sequences, prompt tokens) -> seconds
    memory_gb: Callable[[int], float]  # sequences in flight -> GB per GPU
    scheduler: Scheduler
    inp: int
    out: int
    experts_of: Shape | None = None  # the model, when the replica is expert-parallel
    spec: Speculation | None = None  # speculative decoding asked (advisor/perf/speculative.py)
    trace: Trace | None = None  # replayed instead of Poisson arrivals (advisor/perf/trace_file.py)
    _steps: dict[tuple[int, float], float] = field(default_factory=dict)

    def step_s(self, decode: int, prompt_tokens: float) -> float:
        key = (decode, prompt_tokens)
        found = self._steps.get(key)
        if found is None:
            found = self._steps[key] = self.step(decode, prompt_tokens)
        return found

    def itl_s(self, batch: int) -> float:
        if self.spec is None:
            return self.step_s(batch, batch * self.inp / self.out)
        a = self.spec.acceptance_length
        return verify_step(self.step_s, self.spec)(batch, batch * a * self.inp / self.out) / a

    def ttft_s(self, batch: int) -> float:
        wait = self.itl_s(batch) / 2 if batch else 0.0
        return wait + self.step_s(batch, self.inp)

    def e2e_s(self, batch: int) -> float:
        return self.ttft_s(batch) + (self.out - 1) * self.itl_s(batch)

    def most_within(self, targets: Targets, with_ttft: bool) -> int:
        """The largest batch whose ITL (and TTFT of a request joining it, `with_ttft`) meets
        the targets, both growing with the batch: a bisection; 0 when one sequence misses."""

        def meets(b: int) -> bool:
            ttft = self.ttft_s(b) if with_ttft else self.ttft_s(0)
            return targets.met(ttft * 1e3, self.itl_s(b) * 1e3)

        if self.max_sequences < 1 or not meets(1):
            return 0
        lo, hi = 1, self.max_sequences
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if meets(mid) else (lo, mid - 1)
        return lo

    def rate_within(self, targets: Targets) -> tuple[float, int]:
        """(requests/s, batch): Little's law at the batch within the targets that completes
        the most requests a second (B / E2E(B) over the powers of two up to it and it)."""
        top = self.most_within(targets, with_ttft=True)
        if top < 1:
            return 0.0, 0
        batches = sorted({top, *(1 << i for i in range(top.bit_length()))})
        best = max(batches, key=lambda b: b / self.e2e_s(b))
        return best / self.e2e_s(best), best

    def under_load(self, rate: float, targets: Targets) -> LoadResult:
        """The simulated load; with speculation in iterations, read back per token (as
        advisor/perf/inference.py InferenceModel.under_load does)."""
        spec = self.spec
        iters = self.out if spec is None else iterations_for(self.out, spec)
        gap = (self.out - 1) / (iters - 1) if iters > 1 else 1.0
        accepted = spec.acceptance_length if spec is not None else 1.0
        trace = arrivals(self.trace, rate, LOAD_REQUESTS, (self.inp, iters), accepted)
        kv = self.scheduler.kv_capacity_tokens * (self.inp + iters) // (self.inp + self.out)
        load = simulate(
            self.step_s if spec is None else verify_step(self.step_s, spec),
            dataclasses.replace(self.scheduler, kv_capacity_tokens=kv),
            trace,
            max_ttft_s=(targets.max_ttft_ms or math.inf) / 1e3,
            max_itl_s=(targets.max_itl_ms or math.inf) / 1e3 * gap,
        )
        return per_token(load, self.out, iters)


def _scheduler(fit: int, tokens: int, ranks: int, device_memory_gb: float) -> Scheduler:
    """vLLM's default budget and sequence cap (advisor/perf/inference.py) on each of `ranks`
    schedulers, pooled, over the replica's KV bound."""
    budget, seqs = SCHEDULER_LARGE if device_memory_gb >= LARGE_GPU_GB else SCHEDULER_SMALL
    return Scheduler(max(1, fit) * tokens, max(1, min(fit, seqs * ranks)), budget * ranks)


def _cache(w: Work) -> KvCache:
    """The KV cache's format and prefix-cache hits the work asks for."""
    return KvCache(w.kv_precision, w.prefix_cache_hit_rate or 0.0)


def _ep_base(gpus: int, node: tuple[int, float, float], domain_gpus: int) -> EpLayout:
    """Experts over `gpus` GPUs of nodes `node` = (GPUs per node, link GB/s, network Gbit/s per
    node) in an NVLink domain of `domain_gpus` (0: none beyond a node)."""
    per_node, link_gb_s, network_gbps = node
    network = network_gbps / per_node / BITS_PER_BYTE
    return EpLayout(gpus, per_node, 1, network, link_gb_s, domain_gpus=domain_gpus)


def ep_replica(
    shape: Shape,
    acc: Accelerator,
    w: Work,
    nodes: tuple[int, int, float, float],
    max_itl_s: float | None,
    domain_gpus: int = 0,
) -> Replica | None:
    """Expert parallelism over `nodes` = (nodes, GPUs per node, link GB/s, network Gbit/s per
    node), the nodes of an NVLink domain of `domain_gpus` (an NVL72 rack) talking over NVLink:
    the attention degree with the most tokens per GPU within the ITL target."""
    count, per_node, link_gb_s, network_gbps = nodes
    gpus = count * per_node
    if gpus > (shape.experts or 0):
        return None
    io = w.io_tokens()
    base = _ep_base(gpus, (per_node, link_gb_s, network_gbps), domain_gpus)
    try:
        got = best_layout(shape, acc, w.precision, base, io, max_itl_s, _cache(w))
    except InputError:
        return None
    if got is None:
        return None
    layout = got[0]
    model = EpModel(shape, acc, w.precision, layout, *io, cache=_cache(w))
    ranks = layout.dp_ranks
    inp, out = io

    def step(decode: int, prompt_tokens: float) -> float:
        busiest = max(prompt_tokens / ranks, min(prompt_tokens, inp))
        return model.forward(math.ceil(decode / ranks), busiest).seconds

    def memory_gb(sequences: int) -> float:
        kv = model.kv_gpu_token * (inp + out) * math.ceil(sequences / ranks)
        return (model.dense_bytes + model.slots * model.per_expert_bytes + kv) / GB

    fit = model.max_sequences_per_rank() * ranks
    return Replica(
        gpus,
        count,
        f"{layout.describe()} (advisor/perf/moe_serving.py)",
        layout.attention_tp,
        fit,
        step,
        memory_gb,
        _scheduler(fit, inp + out, ranks, acc.device_memory_gb),
        inp,
        out,
        shape,
    )


def pp_replica(
    shape: Shape,
    acc: Accelerator,
    w: Work,
    nodes: tuple[int, int, float, float],
    domain_gpus: int = 0,
) -> Replica | None:
    """TP over each node's GPUs, PP over `nodes` = (nodes, GPUs per node, link GB/s, network
    Gbit/s per node). A stage holds its layers' KV of every sequence in flight. Stages inside
    one NVLink domain of `domain_gpus` (an NVL72 rack) pass their activations over NVLink, one
    direction of the GPU's link."""
    count, per_node, link_gb_s, network_gbps = nodes
    if count > (shape.layers or 0):
        return None
    io = w.io_tokens()
    inside = count * per_node <= domain_gpus
    network = link_gb_s / 2 if inside else network_gbps / per_node / BITS_PER_BYTE
    try:
        pp = PipelineServing.build(
            shape, acc, (per_node, link_gb_s, network), count, io, w.precision, _cache(w)
        )
        fit = pp.stage.max_concurrency()
    except InputError:
        return None
    inp = io[0]

    def step(decode: int, prompt_tokens: float) -> float:
        micro = math.ceil(decode / count)
        prompt = prompt_tokens / count
        stage = pp.stage.iteration_s(micro, prompt, inp)
        return count * (stage + pp.hop_tokens_s(micro + prompt * pp.stage.prefill_share))

    def memory_gb(sequences: int) -> float:
        return pp.stage.memory(max(1, sequences))[-1].value / per_node

    return Replica(
        count * per_node,
        count,
        f"TP {per_node} in each node x PP {count} across nodes"
        + (f" of one NVLink domain of {domain_gpus} GPUs" if inside else "")
        + f", {count} micro-batches in flight (advisor/perf/pipeline_serving.py)",
        per_node,
        fit,
        step,
        memory_gb,
        _scheduler(fit, sum(io), 1, acc.device_memory_gb),
        *io,
    )


def tp_replica(
    shape: Shape,
    acc: Accelerator,
    w: Work,
    nodes: tuple[int, int, float, float],
    domain_gpus: int = 0,
) -> Replica | None:
    """TP over every GPU of `nodes` = (nodes, GPUs per node, link GB/s, network Gbit/s per
    node) when they lie in one NVLink domain of `domain_gpus` (an NVL72 rack: its trays reach
    each other over the same NVLink, so tensor parallelism spans them); None outside one, or
    where the degree does not divide the heads."""
    count, per_node, link_gb_s, _ = nodes
    gpus = count * per_node
    if gpus > domain_gpus or not shape.heads or shape.heads % gpus:
        return None
    io = w.io_tokens()
    try:
        # one stage of TP over every GPU: the pipeline's own stage model, the whole model on it
        one = (gpus, link_gb_s, 0.0)
        model = PipelineServing.build(shape, acc, one, 1, io, w.precision, _cache(w)).stage
        fit = model.max_concurrency()
    except InputError:
        return None
    inp = io[0]

    def step(decode: int, prompt_tokens: float) -> float:
        return model.iteration_s(decode, prompt_tokens, inp)

    def memory_gb(sequences: int) -> float:
        return model.memory(max(1, sequences))[-1].value / gpus

    return Replica(
        gpus,
        count,
        f"TP {gpus} over {count} nodes of one NVLink domain of {domain_gpus} GPUs "
        "(advisor/perf/inference.py)",
        gpus,
        fit,
        step,
        memory_gb,
        _scheduler(fit, sum(io), 1, acc.device_memory_gb),
        *io,
    )


@dataclass(frozen=True)
class _Sized:
    replica: Replica
    replicas: int
    batch: int  # sequences in flight per replica
    ttft_s: float
    itl_s: float
    met: bool
    load: LoadResult | None = None

    @property
    def gpus(self) -> int:
        return self.replica.gpus * self.replicas

    @property
    def tokens_s(self) -> float:
        return self.replicas * self.batch / self.itl_s


def _size(r: Replica, w: Work, targets: Targets, asked_gpus: int) -> _Sized | None:
    """Replicas of `r` for the load asked, and their figures; None when the replica holds no
    sequence (or the concurrency asked)."""
    at_least = max(1, math.ceil(asked_gpus / r.gpus))
    asked = w.concurrency or w.batch  # sequences per replica, as on one node
    if r.max_sequences < 1 or (asked or 0) > r.max_sequences:
        return None
    if w.request_rate is not None:
        return _size_for_rate(r, w.request_rate, targets, at_least)
    if asked:
        b, met_b = asked, True
    else:
        b = r.most_within(targets, with_ttft=False)
        met_b = b > 0
        b = b or 1
    ttft, itl = r.ttft_s(0), r.itl_s(b)
    replicas = max(at_least, math.ceil((w.throughput_tokens_s or 0) * itl / b))
    met = met_b and targets.met(ttft * 1e3, itl * 1e3)
    return _Sized(r, replicas, b, ttft, itl, met)


def _size_for_rate(r: Replica, rate: float, targets: Targets, at_least: int) -> _Sized:
    """Replicas by Little's law within the targets (no queueing: the search's figure)."""
    per_replica, batch = r.rate_within(targets)
    met = per_replica > 0
    if not met:  # even one sequence misses: the lowest-latency replica, sized for the rate
        per_replica, batch = 1 / r.e2e_s(1), 1
    replicas = max(at_least, math.ceil(rate / per_replica - 1e-9))
    return _Sized(r, replicas, batch, r.ttft_s(batch), r.itl_s(batch), met)


def _simulated(s: _Sized, rate: float, targets: Targets) -> _Sized:
    """The chosen size under the simulated load, one more replica while it queues without
    bound or misses the targets the Little's-law sizing met; its figures at the targets'
    percentile."""
    r, replicas = s.replica, s.replicas
    load = r.under_load(rate / replicas, targets)
    for _ in range(EXTRA_REPLICA_TRIES):
        if not load.saturated and (not s.met or targets.met_under(load)):
            break
        replicas += 1
        load = r.under_load(rate / replicas, targets)
    pct = targets.percentile
    held = s.met and not load.saturated and targets.met_under(load)
    batch = max(1, round(load.mean_batch))
    return _Sized(r, replicas, batch, load.ttft.at(pct), load.tpot.at(pct), held, load)


def _sizes(
    shape: Shape,
    acc: Accelerator,
    w: Work,
    targets: Targets,
    node: tuple[int, float, float],
    domain_gpus: int,
) -> list[_Sized]:
    """Every replica size that holds the model, from 2 nodes up, sized for the load; stops
    where one replica alone needs more GPUs than a size already within the targets."""
    per_node, link_gb_s, network_gbps = node
    max_itl_s = targets.max_itl_ms / 1e3 if targets.max_itl_ms is not None else None
    spec = speculation_for(w.draft_tokens, w.acceptance_length, shape.layers or 1)
    found: list[_Sized] = []
    for count in range(2, MAX_REPLICA_NODES + 1):
        met = [s.gpus for s in found if s.met]
        if met and count * per_node > min(met):
            break
        nodes = (count, per_node, link_gb_s, network_gbps)
        replicas = (
            [ep_replica(shape, acc, w, nodes, max_itl_s, domain_gpus)]
            if shape.experts
            else [
                pp_replica(shape, acc, w, nodes, domain_gpus),
                tp_replica(shape, acc, w, nodes, domain_gpus),
            ]
        )
        for r in replicas:
            if r is None:
                continue
            r.spec, r.trace = spec, w.trace
            sized = _size(r, w, targets, w.gpu_count or 0)
            if sized is not None:
                found.append(sized)
    return found


def serve_across_nodes(
    shape: Shape,
    acc: Accelerator,
    w: Work,
    targets: Targets,
    node: tuple[int, float, float],
    domain_gpus: int = 0,
) -> Fit | None:
    """Replicas over several nodes of `node` = (GPUs per node, link GB/s, network Gbit/s per
    node) for the work: the replica size needing the fewest GPUs (module doc); None without a
    network of MIN_NETWORK_GBPS, with a TP degree asked (it lives inside a node), with LoRA
    adapters or when no size holds the model. `domain_gpus`: the GPUs one NVLink domain spans
    beyond a node (GB200/GB300 NVL72: 72), over which a replica inside it talks."""
    network_gbps = node[2]
    # multi-LoRA over several nodes is not modelled: such a request stays on one node
    slow = network_gbps < MIN_NETWORK_GBPS
    if slow or w.tensor_parallel or w.lora_adapters or shape.layers is None:
        return None
    found = _sizes(shape, acc, w, targets, node, domain_gpus)
    if not found:
        return None
    pool = [s for s in found if s.met] or found
    best = min(pool, key=lambda s: (s.gpus, -s.tokens_s / s.gpus))
    if w.request_rate is not None:
        best = _simulated(best, w.request_rate, targets)
    floor = (
        min(s.replica.ttft_s(0) for s in found) * 1e3,
        min(s.replica.itl_s(1) for s in found) * 1e3,
    )
    return _fit(best, acc, w, targets, (node, domain_gpus), floor)


def _fit(
    s: _Sized,
    acc: Accelerator,
    w: Work,
    targets: Targets,
    placed: tuple[tuple[int, float, float], int],
    floor: tuple[float, float],
) -> Fit:
    """`placed`: the node (GPUs, link GB/s, network Gbit/s) and the NVLink domain's GPUs."""
    r, per_node = s.replica, placed[0][0]
    per_gpu = r.memory_gb(s.batch)
    capacity = s.tokens_s if w.request_rate is None else w.request_rate * r.out
    eff, source = bandwidth_efficiency(acc)
    return Fit(
        gpus_needed=s.gpus,
        nodes=s.replicas * r.nodes,
        rented_gpus=s.replicas * r.nodes * per_node,
        spans_nodes=True,
        memory_per_gpu_gb=per_gpu,
        memory_total_gb=per_gpu * s.gpus,
        efficiency=eff,
        efficiency_source=source,
        tokens_per_s=capacity,
        served_tokens_per_s=min(capacity, w.throughput_tokens_s or math.inf),
        replicas=s.replicas,
        ttft_ms=s.ttft_s * 1e3,
        itl_ms=s.itl_s * 1e3,
        concurrency=s.batch,
        tensor_parallel=r.tensor_parallel,
        speed_source=SPEED_SOURCE,
        latency_floor=floor,
        latency_met=s.met,
        serving_layout=r.layout,
        serving_alternative=_disaggregated(r, acc, w, placed, targets, s),
        figures=_figures(s, w, targets),
    )


def _figures(s: _Sized, w: Work, targets: Targets) -> tuple[Figure, ...]:
    r = s.replica
    how = "the most sequences within the ITL target, steady state; TTFT of a prompt alone"
    out = [
        Figure("gpus_per_replica", r.gpus, "GPUs", f"{r.nodes} nodes: {r.layout}"),
        Figure("replicas", s.replicas, "replicas", "the fewest GPUs for the load"),
        Figure("ttft_s", s.ttft_s, "s", "time to first token"),
        Figure("itl_s", s.itl_s, "s", "inter-token latency (a request's mean token gap)"),
    ]
    if s.load is None or w.request_rate is None:
        out.append(Figure("concurrency", s.batch, "sequences", f"per replica: {how}"))
        out.append(
            Figure(
                "throughput_tokens_s",
                s.tokens_s,
                "tokens/s",
                f"{s.replicas} replicas x {s.batch} sequences / ITL {s.itl_s:.6g} s",
            )
        )
        return tuple(out)
    per_replica = w.request_rate / s.replicas
    traced = w.trace is not None
    out += load_figures(s.load, per_replica, targets.percentile, targets, SPEED_SOURCE, traced)
    out.append(
        Figure(
            "throughput_tokens_s",
            w.request_rate * r.out,
            "tokens/s",
            f"{w.request_rate:g} requests/s x {r.out} output tokens",
        )
    )
    return tuple(out)


def _disaggregated(
    r: Replica,
    acc: Accelerator,
    w: Work,
    placed: tuple[tuple[int, float, float], int],
    targets: Targets,
    s: _Sized,
) -> str | None:
    """Aggregated against prefill and decode pools of the replica's nodes at the ITL target
    (the replica's ITL without one); None for a dense model."""
    if r.experts_of is None:
        return None
    base = _ep_base(r.gpus, *placed)
    itl_s = targets.max_itl_ms / 1e3 if targets.max_itl_ms is not None else s.itl_s
    got = compare(r.experts_of, acc, w.precision, base, w.io_tokens(), itl_s, _cache(w))
    return f"disaggregated prefill/decode on these {r.gpus} GPUs: {got.why()}"
