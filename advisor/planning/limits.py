"""The planners' limits the engine checks on every request without their models: the latency
targets asked (or the workload's defaults), the words for a model given as a bare size, the
scale-out network floor and the plan length flagged as long. Pure and light: the planners
themselves (advisor/planning/serving.py, training_plan.py) load only for sized work."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.catalog.models import WorkloadProfile

if TYPE_CHECKING:  # made by latency_targets alone: a request without a model never asks for one
    from advisor.perf.targets import Targets

# What an estimate's notes and a recommendation's reasons say of a model given as a bare size
# for inference; the error of the same case names the field through field_name.
NEEDS_SHAPE = "TTFT, ITL and throughput need the model's architecture (layers, heads, KV heads)"
BARE_INFERENCE = f"memory only: {NEEDS_SHAPE}: give --model (a preset)"
LONG_PLAN_DAYS = 90  # a plan longer than this is flagged in the reasons


def latency_targets(
    profile: WorkloadProfile,
    max_ttft_ms: float | None,
    max_itl_ms: float | None,
    output_tokens: int | None = None,
    percentile: int | None = None,
) -> Targets:
    """The latency targets asked for, each falling back to the workload profile's default. One
    output token is a time-to-first-token question: it has no inter-token latency to bound."""
    from advisor.perf.targets import Targets

    default = profile.latency_targets
    held_at = percentile or 50
    if default is not None:
        if percentile is None and (max_ttft_ms is None or max_itl_ms is None):
            held_at = default.percentile  # a default target holds at its own percentile
        max_ttft_ms = default.max_ttft_ms if max_ttft_ms is None else max_ttft_ms
        max_itl_ms = default.max_itl_ms if max_itl_ms is None else max_itl_ms
    itl = None if output_tokens == 1 else max_itl_ms
    return Targets(max_ttft_ms, itl, held_at)


def network_below_floor(profile: WorkloadProfile, network_gbps: float) -> bool:
    """Whether a scale-out network is too slow for one job spread over several nodes: the one
    rule `estimate` and the engine's NETWORK_TOO_SLOW constraint both apply."""
    return network_gbps < profile.min_multi_node_network_gbps
