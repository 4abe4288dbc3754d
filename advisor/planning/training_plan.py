"""Training plan search: the parallel layouts (data parallel, TP inside a node, PP only when
needed) that hold the work in memory, and the node count that keeps every GPU busy or, with a
deadline, meets it at the lowest node-hours (the time of each from advisor/perf/training.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.catalog.models import Accelerator
from advisor.errors import InputError, field_name
from advisor.perf.sizing import OPTIMIZER_BYTES, Figure, Shape, zero_split_bytes
from advisor.perf.training import (
    Cluster,
    Job,
    Layout,
    Run,
    gpu_hours,
    interleaved_activation_factor,
    run_time,
)
from advisor.perf.work import TP_DEGREES, Work
from advisor.planning.fit import Fit
from advisor.units import GB, HOURS_PER_DAY

# Most GPUs a plan considers without --max-gpus: the largest clusters built for one synchronous
# job are of this order (xAI Colossus, 100,000 H100s, 2024; Llama 3 405B ran on 16,384).
MAX_PLAN_GPUS = 100_000
PP_DEGREES = (2, 4, 8, 16, 32, 64, 128)
EP_DEGREES = (2, 4, 8, 16, 32, 64, 128, 256)
CP_DEGREES = (2, 4, 8, 16, 32, 64)

# (layout, nodes, run or None without a token count, fastest hours reached when the deadline is
# missed, else None)
LayoutChoice = tuple[Layout, int, Run | None, float | None]


def deadline_hours(w: Work) -> float | None:
    """A training deadline in hours (None without one); it needs the tokens to time."""
    if w.deadline_days is None:
        return None
    if not w.tokens:
        raise InputError(
            f"{field_name('deadline_days')} needs {field_name('tokens')}: the time to meet it is "
            "the tokens' time",
            field="tokens",
        )
    return w.deadline_days * HOURS_PER_DAY


def training_layouts(
    shape: Shape,
    stage: int,
    kept_gb: float,
    sharded_gb: float,
    activations_gb: float,
    budget_gb: float,
    per_node: int,
    expert_parallel: bool = True,
    pipeline_beside: bool = False,
) -> list[Layout]:
    """Every layout that holds the work at its fewest data-parallel ranks (dp = that minimum):
    data parallel alone, TP inside one node (a model shape is needed), and, only when no TP
    degree fits, pipeline stages of the widest TP over nodes, and only when no pipeline fits
    either (a long sequence's activations), context parallelism; a mixture of experts also with its
    experts split over EP of the DP ranks (dp a multiple of EP). `kept_gb` per GPU is what no
    data-parallel count removes (activations included), `sharded_gb` what ZeRO shards over the
    ranks; TP x PP split the states and weights, EP the experts' share of the kept states, TP
    (sequence parallel) the activations. `expert_parallel` False (adapters on frozen weights):
    no EP layouts. `pipeline_beside` (a scale-out workload): pipeline layouts also beside TP
    ones that fit, for the plan to weigh (at thousands of GPUs, stages shrink the data-parallel
    rings whose collectives' latency grows with their ranks: Llama 3 405B and DeepSeek-V3 ran
    PP16)."""
    share = shape.expert_params / shape.params if expert_parallel else 0.0
    room = _Room(kept_gb, sharded_gb, activations_gb, budget_gb, share, shape.layers)
    eps = [1, *_dividing(EP_DEGREES, shape.experts)] if share and shape.experts else [1]
    layers = shape.layers
    degrees = node_tp_degrees(per_node) if layers else [1]
    out = room.layouts(stage, degrees, [1], eps)
    if layers is None or (out and not pipeline_beside):
        return out
    tp = degrees[-1]
    pps = [pp for pp in PP_DEGREES if pp <= layers]
    piped = room.layouts(stage, [tp], pps, eps)
    if share:  # a mixture of experts: narrower TP with EP too (DeepSeek-V3 ran TP1 PP16 EP64)
        piped = _shallowest(room.layouts(stage, degrees, pps, eps))
    if out:
        return out + piped
    if piped:
        first_pp = piped[0].pp
        shallow = piped if share else [lay for lay in piped if lay.pp == first_pp]
        return shallow + _context_parallel(room, stage, tp, pps, eps, pipeline_beside)
    return _context_parallel(room, stage, tp, pps, eps, True, True)


def _shallowest(layouts: list[Layout]) -> list[Layout]:
    """Of each TP and EP degree, the layout of the fewest pipeline stages (the list is in TP,
    PP, EP order)."""
    first: dict[tuple[int, int], Layout] = {}
    for lay in layouts:
        first.setdefault((lay.tp, lay.ep), lay)
    return list(first.values())


def _context_parallel(
    room: _Room,
    stage: int,
    tp: int,
    pps: list[int],
    eps: list[int],
    needed: bool,
    wide: bool = False,
) -> list[Layout]:
    """A sequence whose activations no TP x PP holds (`needed`), or beside pipelines at scale:
    its tokens split over CP ranks (Megatron-Core context parallelism; activations per rank
    fall with s / CP): the fewest that hold them and, when nothing else does (`wide`), every
    wider degree too (a long sequence's few sequences a step keep more GPUs busy over more CP
    ranks: NeMo ran 1M tokens at CP16-32),
    with the widest TP and, at each CP, no pipeline or the shallowest that holds the work (CP
    combines with TP and PP, as Llama 3 405B's 128k stage ran TP8 CP16 PP16)."""
    if not needed:
        return []
    out: list[Layout] = []
    for cp in CP_DEGREES:
        found = room.layouts(stage, [tp], [1, *pps], eps, cp)
        out += [lay for lay in found if lay.pp == found[0].pp]
        if out and not wide:
            return out
    return out


def _dividing(degrees: tuple[int, ...], whole: int) -> list[int]:
    """The degrees that split `whole` evenly."""
    return [d for d in degrees if d <= whole and whole % d == 0]


def node_tp_degrees(per_node: int) -> list[int]:
    """The tensor-parallel degrees inside a node of `per_node` GPUs (dividing it), widest last."""
    return _dividing(TP_DEGREES, per_node)


@dataclass(frozen=True, slots=True)
class _Room:
    """What a layout must hold per GPU (training_layouts): GB no data-parallel count removes
    (activations included), GB ZeRO shards, the activations, the usable memory, the share of
    the states that are experts (split over EP), and the model's layers (the pipeline's
    interleaved schedule keeps more activations: interleaved_activation_factor)."""

    kept_gb: float
    sharded_gb: float
    activations_gb: float
    budget_gb: float
    expert_share: float
    layers: int | None = None

    def ranks(self, tp: int, pp: int, ep: int = 1, cp: int = 1) -> int | None:
        """The fewest data-parallel ranks (a multiple of `ep`) that hold the work at TP x PP x
        CP; None when what no sharding removes is above the budget."""
        share = self.expert_share
        states = (self.kept_gb - self.activations_gb) * (1 - share + share / ep)
        act = self.activations_gb * interleaved_activation_factor(self.layers, pp) / (tp * cp)
        room = self.budget_gb - (states / (tp * pp) + act)
        if room <= 0:
            return None
        # ZeRO shards over the DP and CP ranks (both hold the same weights)
        sharded = self.sharded_gb
        r = max(1, math.ceil(sharded / (tp * pp * cp) / room - 1e-9)) if sharded else 1
        return math.ceil(r / ep) * ep

    def layouts(
        self, stage: int, tps: list[int], pps: list[int], eps: list[int], cp: int = 1
    ) -> list[Layout]:
        """The layouts of these TP, PP and EP degrees (in that order) that hold the work."""
        return [
            Layout(r, tp, pp, stage, cp, ep)
            for tp in tps
            for pp in pps
            for ep in eps
            if (r := self.ranks(tp, pp, ep, cp)) is not None
        ]


def full_training_split(
    shape: Shape, stage: int, activations_gb: float, optimizer: int = OPTIMIZER_BYTES
) -> tuple[float, float]:
    """(kept, sharded) GB per GPU of training every weight at ZeRO `stage` with `optimizer`
    bytes of optimizer state a parameter (training_layouts)."""
    kept, sharded = zero_split_bytes(stage, optimizer)
    return shape.params * kept / GB + activations_gb, shape.params * sharded / GB


def plan_training(
    job: Job | None,
    cluster: Cluster,
    layouts: list[Layout],
    wanted_gpus: int,
    deadline_h: float | None,
    max_gpus: int | None,
) -> LayoutChoice | None:
    """The layout and node count. Without a deadline: the narrowest layout that holds the work
    (data parallel alone when it fits; TP, then PP, only when needed) and keeps every GPU
    asked for busy (else the lowest node-hours of all), on its fewest nodes. With
    one: of every layout, the fewest nodes that meet it, and of those the lowest node-hours
    (cost); wider TP also lets more GPUs share a fixed global batch. When none meets it, the
    fastest plan found, with that time. None: no layout within `max_gpus`."""
    options = []
    for layout in layouts:
        span = _node_span(job, cluster, layout, wanted_gpus, max_gpus)
        if span is not None:
            options.append((layout, *span))
    if not options:
        return None
    if job is None or deadline_h is None:
        options = _undated_choice(job, cluster, options, wanted_gpus)
    if job is None:
        layout, lo, _ = options[0]
        return _at(layout, cluster, lo), lo, None, None
    met: list[tuple[float, float, Layout, int, Run]] = []
    fastest: tuple[float, Layout, int, Run] | None = None
    for layout, lo, hi in options:
        found, best = _search(job, cluster, layout, lo, hi, deadline_h)
        if found is not None:
            n, run = found
            met.append((n * run.hours, run.hours, run.layout, n, run))
        if fastest is None or best[1].hours < fastest[0]:
            fastest = (best[1].hours, best[1].layout, best[0], best[1])
    if met:
        _, _, layout, n, run = min(met, key=lambda m: (m[0], m[1]))
        return layout, n, run, None
    assert fastest is not None
    _, layout, n, run = fastest
    return layout, n, run, run.hours


def _undated_choice(
    job: Job | None, cluster: Cluster, options: list[tuple[Layout, int, int]], wanted_gpus: int
) -> list[tuple[Layout, int, int]]:
    """Without a deadline: where a layout holds the work on the GPUs asked for, only the layouts
    on those nodes; where none does, the plan rents more anyway, and a pipeline or expert
    parallelism over more nodes may cost less than ZeRO-3 over the fewest (DeepSeek-V3 asked on
    16 H100s: EP over 256 GPUs at a third of the GPU-hours of ZeRO-3 over 168), so every layout
    is weighed. Of those, the layouts that keep every GPU busy, the one with the fewest
    GPU-hours (the narrowest first among equals); without a token count, the narrowest."""
    fewest = min(o[1] for o in options)
    asked = math.ceil(max(wanted_gpus, 1) / cluster.per_node)
    options = [o for o in options if o[1] == fewest or fewest > asked]
    busy = [o for o in options if job is None or _all_busy(job, cluster, o[0], o[1])]
    if job is not None and len(busy) > 1:
        busy = [min(busy, key=lambda o: _gpu_hours(job, cluster, o[0], o[1]))]
    return busy[:1] or options


def _node_span(
    job: Job | None, cluster: Cluster, layout: Layout, wanted: int, max_gpus: int | None
) -> tuple[int, int] | None:
    """Fewest and most nodes worth renting for `layout`: the fewest hold it (and the GPUs
    wanted); beyond the most, ranks would idle (no micro-batch left) or --max-gpus is passed."""
    per = cluster.per_node
    lo = math.ceil(max(layout.gpus, wanted, 1) / per)
    useful = MAX_PLAN_GPUS
    if job is not None:
        per_replica = layout.tp * layout.pp * layout.cp
        useful = min(useful, job.sequences_per_step // job.micro_batch * per_replica)
    hi = max(lo, math.ceil(useful / per))
    if max_gpus is not None:
        hi = min(hi, max_gpus // per)
    return (lo, hi) if lo <= hi else None


def _gpu_hours(job: Job, cluster: Cluster, layout: Layout, nodes: int) -> float:
    return gpu_hours(job, cluster, _at(layout, cluster, nodes), nodes * cluster.per_node)


def _all_busy(job: Job, cluster: Cluster, layout: Layout, nodes: int) -> bool:
    """Whether every data-parallel rank on `nodes` nodes gets a micro-batch of the global batch."""
    return _at(layout, cluster, nodes).dp * job.micro_batch <= job.sequences_per_step


def _at(layout: Layout, cluster: Cluster, nodes: int) -> Layout:
    """`layout` widened over `nodes` nodes: every rented GPU joins data parallelism."""
    dp = nodes * cluster.per_node // (layout.tp * layout.pp * layout.cp)
    ep = math.gcd(dp, layout.ep)  # the experts split over a divisor of the DP ranks
    return Layout(dp, layout.tp, layout.pp, layout.zero_stage, layout.cp, ep)


def _search(
    job: Job, cluster: Cluster, layout: Layout, lo: int, hi: int, deadline_h: float | None
) -> tuple[tuple[int, Run] | None, tuple[int, Run]]:
    """(the fewest nodes in [lo, hi] meeting the deadline and its run, or None; the fastest run
    seen). Without a deadline: `lo` nodes. Wall time falls with nodes until communication binds
    (advisor/perf/training.py), so the search bisects above one node."""

    def run_on(n: int) -> Run:
        return run_time(job, cluster, _at(layout, cluster, n), n * cluster.per_node)

    first = run_on(lo)
    if deadline_h is None or first.hours <= deadline_h:
        return (lo, first), (lo, first)
    seen = [(lo, first)]
    low, high = lo + 1, hi
    found: tuple[int, Run] | None = None
    while low <= high:
        mid = (low + high) // 2
        r = run_on(mid)
        seen.append((mid, r))
        if r.hours <= deadline_h:
            found, high = (mid, r), mid - 1
        else:
            low = mid + 1
    if found is None and hi > lo:
        seen.append((hi, run_on(hi)))
    best = min(seen, key=lambda s: (s[1].hours, s[0]))
    return found, best


# Per-GPU memory figures that tensor parallelism (sequence parallel) splits; every other figure
# in GB is a weight or optimizer state, split by TP x PP.
_ACTIVATION_FIGURES = frozenset({"activations_per_gpu_gb", "logits_per_gpu_gb"})


def split_memory(
    figures: list[Figure], layout: Layout, expert_share: float = 0.0, layers: int | None = None
) -> list[Figure]:
    """Per-GPU memory with tensor (and pipeline) parallelism: states and weights over TP x PP,
    activations and logits over TP (sequence parallel, Korthikanti et al. 2022; 1F1B keeps a
    full model's worth of layers' activations on the first stage, the interleaved schedule of a
    model of `layers` layers more: interleaved_activation_factor); with expert parallelism, the
    experts' share (`expert_share` of the parameters) of the states ZeRO keeps whole over EP.
    Unchanged without any."""
    ep = layout.ep if expert_share else 1
    if layout.tp * layout.pp * layout.cp * ep == 1:
        return figures
    kept, sharded = zero_split_bytes(layout.zero_stage)
    ranks = layout.dp * layout.cp
    per_param = kept + sharded / ranks
    ep_factor = (kept * (1 - expert_share + expert_share / ep) + sharded / ranks) / per_param
    out = []
    for f in figures[:-1]:  # the last is the total, summed again below
        if f.unit != "GB":
            out.append(f)
        elif f.name in _ACTIVATION_FIGURES:
            split = layout.tp * layout.cp
            why = f"{f.formula} / TP {layout.tp}" + (f" / CP {layout.cp}" if layout.cp > 1 else "")
            interleaved = interleaved_activation_factor(layers, layout.pp)
            if interleaved != 1.0:
                why += (
                    f" x {interleaved:.4g} (interleaved pipeline schedule: 1 + (PP - 1) / (PP x "
                    "virtual stages) more layers' activations on the first stage)"
                )
            out.append(Figure(f.name, f.value / split * interleaved, "GB", why))
        else:
            split = layout.tp * layout.pp
            why = f"{f.formula} / (TP {layout.tp} x PP {layout.pp})"
            value = f.value / split
            if f.name == "model_states_per_gpu_gb" and ep_factor != 1:
                value *= ep_factor
                why += (
                    f" x {ep_factor:.4g} (the experts' {expert_share:.0%} of the {kept:g} bytes "
                    f"ZeRO stage {layout.zero_stage} keeps, over EP {ep})"
                )
            out.append(Figure(f.name, value, "GB", why))
    parts = [f for f in out if f.unit == "GB"]
    total = sum(f.value for f in parts)
    out.append(Figure("memory_per_gpu_gb", total, "GB", " + ".join(f.name for f in parts)))
    return out


def over_max_gpus(
    acc: Accelerator,
    layouts: list[Layout],
    wanted: int,
    per_node: int,
    max_gpus: int | None,
    eff: float,
    source: str,
    lighter: tuple[tuple[str, float, int, int], ...] = (),
) -> Fit:
    """More GPUs needed than max_gpus allows: the fewest that hold the work, and the lighter
    methods that fit within the limit (each as Fit.lighter_methods)."""
    least = min(math.ceil(max(lay.gpus, wanted, 1) / per_node) * per_node for lay in layouts)
    return Fit(
        0,
        0,
        0,
        False,
        0.0,
        0.0,
        eff,
        source,
        unfit=(
            f"{acc.id}: needs at least {least} GPUs ({per_node} per node), above the "
            f"{max_gpus} GPUs allowed (max_gpus)"
        ),
        least_gpus=least,
        lighter_methods=lighter,
    )
