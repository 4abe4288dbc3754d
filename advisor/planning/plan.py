"""What every plan of a sized workload shares, whatever its job: the work as asked, its workload
profile, the model's shape, the latency targets, the one efficiency rule, and the fits placed so
far (one per kind of node). Each job's plan is a module of its own: a serving deployment
(serving_deployment), a model known only by its size served (memory_only), a training run
(training_run) and a fine-tune of adapters (fine_tune); `plans.plan_for` picks one."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from advisor.catalog.models import Accelerator, WorkloadProfile
from advisor.catalog.queries import Catalog
from advisor.did_you_mean import unknown
from advisor.errors import InputError, field_name
from advisor.perf.calibration import (
    MIN_FLEET_REPORTS,
    Calibration,
    efficiency,
    link_factor,
    network_factor,
)
from advisor.perf.inference import moe_of
from advisor.perf.sizing import Figure, Shape
from advisor.perf.targets import Targets
from advisor.perf.work import Work
from advisor.planning.fit import Fit
from advisor.planning.limits import latency_targets


@dataclass(frozen=True, slots=True)
class ModelOf:
    """The model a request sizes: its shape, its experts (active of total) and the longest
    context a preset allows (None for a bare size)."""

    shape: Shape
    moe: tuple[int, int] | None = None
    context_limit: int | None = None

    @classmethod
    def of(
        cls,
        catalog: Catalog,
        w: Work,
        bare: Callable[[float], Shape],
        bare_moe: Callable[[float, float], Shape] | None = None,
    ) -> ModelOf:
        """The preset `w.model` names (unknown: exit 2 with the nearest ids), else `bare`'s
        shape of `w.params_b` (Shape.assumed for training, Shape.bare for serving); with
        `active_params_b`, `bare_moe`'s mixture of experts where given (training: experts to
        lay out), else `bare`'s shape with that many parameters per token."""
        if w.model is not None:
            preset = w.preset or catalog.models.get(w.model)
            if preset is None:
                raise InputError(unknown("model", w.model, catalog.models), field="model")
            moe = moe_of(preset.experts, preset.experts_per_token)
            return cls(Shape.of(preset), moe, preset.context_length)
        assert w.params_b is not None
        active = w.active_params_b
        if active is not None and active < w.params_b and bare_moe is not None:
            shape = bare_moe(w.params_b, active)
            return cls(shape, moe_of(shape.experts, shape.experts_per_token))
        shape = bare(w.params_b)
        if w.active_params_b is not None:  # a mixture of experts known by its two sizes
            shape = dataclasses.replace(shape, active_params=w.active_params_b * 1e9)
        return cls(shape)


class Plan(ABC):
    """One sized workload under its profile; `fit` places it on a kind of GPU node (cached per
    accelerator, GPUs per node, link and network), through the job's own `_place`."""

    def __init__(
        self,
        w: Work,
        profile: WorkloadProfile,
        model: ModelOf,
        fleet: Mapping[str, Calibration] | None = None,
        min_fleet_reports: int = MIN_FLEET_REPORTS,
    ) -> None:
        self.w, self.profile = w, profile
        self.shape, self.moe, self.context_limit = model.shape, model.moe, model.context_limit
        self.batch = w.batch or profile.default_batch
        self.fleet = fleet or {}
        self.min_fleet_reports = min_fleet_reports
        self._cache: dict[tuple[str, int, float, float, int], Fit] = {}
        self.domain_gpus: int | None = None  # the NVLink domain of the node placed now
        self.targets: Targets = latency_targets(
            profile, w.max_ttft_ms, w.max_itl_ms, w.output_tokens, w.percentile
        )

    def efficiency(self, acc: Accelerator) -> tuple[float, str]:
        """The one efficiency rule (advisor.perf.calibration) for this profile on `acc`."""
        eff = efficiency(
            self.profile.efficiency, self.profile.id, self.fleet.get(acc.id), self.min_fleet_reports
        )
        return eff.value, eff.source

    def fit(
        self,
        acc: Accelerator,
        gpus_per_node: int,
        link_gb_s: float | None = None,
        network_gbps: float | None = None,
        domain_gpus: int | None = None,
    ) -> Fit:
        """The work on nodes of `gpus_per_node` x `acc` whose GPUs talk at `link_gb_s` per GPU
        (an instance type's link; the accelerator's own when None; 0: over PCIe) and whose nodes
        talk at `network_gbps` (an instance type's network; the profile's multi-node floor when
        None); `domain_gpus`, an NVLink domain larger than a node (GB200 NVL72: 72), which
        training's collectives and layout and a served replica over several nodes read
        (self.domain_gpus while placing)."""
        link = acc.interconnect_gb_s if link_gb_s is None else link_gb_s
        network = self.profile.min_multi_node_network_gbps if network_gbps is None else network_gbps
        key = (acc.id, gpus_per_node, link, network, domain_gpus or 0)
        if key not in self._cache:
            self.domain_gpus = domain_gpus
            self._cache[key] = self._on_fleet_link(acc, gpus_per_node, link, network)
        return self._cache[key]

    def _on_fleet_link(
        self, acc: Accelerator, per_node: int, link_gb_s: float, network: float
    ) -> Fit:
        """The work placed on the node's GPU link and the network between nodes as the fleet
        measures them where its votes calibrate (advisor.perf.calibration.link_factor: nodes that
        deliver 0.9x the all-reduce the plans assume are planned on 0.9x the link, training's
        collectives and serving's tensor-parallel all-reduce alike; network_factor: the
        all-reduce across nodes likewise, on the network), each said in a figure; else on the
        catalog's."""
        cal = self.fleet.get(acc.id)
        link = link_factor(cal, self.min_fleet_reports) if link_gb_s else None
        across = network_factor(cal, self.min_fleet_reports) if network else None
        fit = self._place(
            acc,
            per_node,
            link_gb_s * link[0] if link else link_gb_s,
            network * across[0] if across else network,
        )
        figures = []
        if link is not None:
            ratio, why = link
            figures.append(
                Figure(
                    "fleet_link_factor",
                    ratio,
                    "x the catalog's link",
                    f"GPU link {link_gb_s:,.0f} GB/s x {ratio:.2f} = {link_gb_s * ratio:,.0f} "
                    f"GB/s: {why}",
                )
            )
        if across is not None:
            ratio, why = across
            figures.append(
                Figure(
                    "fleet_network_factor",
                    ratio,
                    "x the catalog's network",
                    f"network {network:,.0f} Gbit/s a node x {ratio:.2f} = {network * ratio:,.0f} "
                    f"Gbit/s: {why}",
                )
            )
        return dataclasses.replace(fit, figures=(*fit.figures, *figures)) if figures else fit

    @abstractmethod
    def _place(self, acc: Accelerator, per_node: int, link_gb_s: float, network: float) -> Fit:
        """The work on nodes of `per_node` x `acc`, their GPUs' link and their network."""


def refuse_for_serving(w: Work, profile: WorkloadProfile, model: ModelOf) -> None:
    """What a served model's plan refuses (exit 2): a context beyond what the preset allows, a
    training method, and a deadline (the time of tokens to process)."""
    limit = model.context_limit
    if limit and (w.context_tokens or 0) > limit:
        raise InputError(
            f"context of {w.context_tokens} tokens is beyond {w.model}'s {limit}",
            field="context_tokens",
        )
    if w.method != "full":
        raise InputError(
            f"{field_name('method')} {w.method} is a training method: {profile.id} serves",
            field="method",
        )
    if w.deadline_days is not None:
        raise InputError(
            f"{field_name('deadline_days')} is for training and fine-tuning workloads",
            field="deadline_days",
        )
