"""How one sized workload lands on one kind of GPU node: the planning layer's result, read by
the estimate, the engine's checks and ranking, and the review."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: an unsized request does not load the training model
    from advisor.perf.sizing import Figure
    from advisor.perf.training import Layout


@dataclass(frozen=True)
class Fit:
    """How one sized workload lands on one kind of GPU node: GPUs, memory, time or throughput."""

    gpus_needed: int  # by memory (training: data-parallel ranks; inference: per replica x replicas)
    nodes: int
    rented_gpus: int
    spans_nodes: bool  # one model copy split across nodes (training; serving with serving_layout)
    memory_per_gpu_gb: float
    memory_total_gb: float  # what the work needs, all GPUs together
    efficiency: float
    efficiency_source: str
    hours: float | None = None  # training with a token count
    tokens_per_s: float | None = None  # inference capacity of what is rented
    served_tokens_per_s: float | None = None  # what is paid for: the target, or the capacity
    replicas: int | None = None
    ttft_ms: float | None = None  # inference with a model preset (advisor/perf/inference.py)
    itl_ms: float | None = None
    concurrency: int | None = None  # sequences in flight per replica
    tensor_parallel: int | None = None
    # modelled inference: where the iteration's speeds came from (an operator table and its
    # date, or the roofline's datasheet peaks and estimated efficiencies)
    speed_source: str | None = None
    # modelled inference: the lowest (TTFT, ITL) ms reachable here, and whether the latency
    # targets are met (when not, the figures above are the lowest-ITL deployment's)
    latency_floor: tuple[float, float] | None = None
    latency_met: bool = True
    unfit: str | None = None  # why this GPU cannot hold the work at all
    # serving a model no node holds: the layout of a replica over several nodes, and whether
    # prefill and decode pools of its GPUs would serve more (advisor/planning/across_nodes.py)
    serving_layout: str | None = None
    serving_alternative: str | None = None
    # training that does not fit here (or not on one node where the profile runs on one): the
    # lighter fine-tuning methods that would, each as (method, memory per GPU GB, GPUs, nodes)
    lighter_methods: tuple[tuple[str, float, int, int], ...] = ()
    # training with a token count (advisor/perf/training.py): GPU-hours, steady-state MFU on
    # model FLOPs, HFU (the recomputed forward counted), the parallel layout; with a deadline,
    # whether it is met and the fastest wall time any GPU count reaches on this node kind
    gpu_hours: float | None = None
    mfu: float | None = None
    hfu: float | None = None
    layout: Layout | None = None
    deadline_met: bool = True
    fastest_hours: float | None = None
    least_gpus: int | None = None  # set when max_gpus is below the fewest GPUs that hold it
    # training without a token count: tokens a second the rented GPUs train on this layout (the
    # performance model's step time, no run length needed); price-performance ranks by it
    training_tokens_per_s: float | None = None
    # training with a token count: the hours at the optimistic and the pessimistic efficiency
    # (advisor/perf/efficiency.py efficiency_bounds)
    hours_range: tuple[float, float] | None = None
    figures: tuple[Figure, ...] = field(default=(), compare=False)

    @property
    def gpus_per_replica(self) -> int:
        """Serving: the GPUs of one model copy (its TP degree, or a replica over several nodes)."""
        return self.gpus_needed // (self.replicas or 1)


def margin_sentence(hours: float, hours_range: tuple[float, float], mfu: float | None) -> str:
    """A training plan's margin in words: the days at the optimistic and the pessimistic
    efficiency and, with an MFU, the MFU at each (time is taken as inversely proportional to the
    efficiency, advisor/planning/training_run.py with_hours_range, so MFU scales as hours /
    each end's hours): what to hold a published MFU against."""
    fast, slow = hours_range
    at = f" at MFU {mfu * hours / fast:.2f}-{mfu * hours / slow:.2f}" if mfu is not None else ""
    return (
        f"finishes in {fast / 24:,.1f}-{slow / 24:,.1f} days{at} "
        "(optimistic to pessimistic efficiency)"
    )
