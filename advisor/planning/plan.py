"""What every plan of a sized workload shares, whatever its job: the work as asked, its workload
profile, the model's shape, the latency targets, the one efficiency rule, and the fits placed so
far (one per kind of node). Each job's plan is a module of its own: a serving deployment
(serving_deployment), a model known only by its size served (memory_only), a training run
(training_run) and a fine-tune of adapters (fine_tune); `plans.plan_for` picks one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from advisor.catalog.models import Accelerator, WorkloadProfile
from advisor.catalog.queries import Catalog
from advisor.did_you_mean import unknown
from advisor.errors import InputError, field_name
from advisor.perf.calibration import MIN_FLEET_REPORTS, Calibration, efficiency
from advisor.perf.inference import Targets, moe_of
from advisor.perf.sizing import Shape
from advisor.perf.work import Work
from advisor.planning.fit import Fit
from advisor.planning.serving import latency_targets


@dataclass(frozen=True, slots=True)
class ModelOf:
    """The model a request sizes: its shape, its experts (active of total) and the longest
    context a preset allows (None for a bare size)."""

    shape: Shape
    moe: tuple[int, int] | None = None
    context_limit: int | None = None

    @classmethod
    def of(cls, catalog: Catalog, w: Work, bare: Callable[[float], Shape]) -> ModelOf:
        """The preset `w.model` names (unknown: exit 2 with the nearest ids), else `bare`'s
        shape of `w.params_b` (Shape.assumed for training, Shape.bare for serving)."""
        if w.model is not None:
            preset = catalog.models.get(w.model)
            if preset is None:
                raise InputError(unknown("model", w.model, catalog.models), field="model")
            moe = moe_of(preset.experts, preset.experts_per_token)
            return cls(Shape.of(preset), moe, preset.context_length)
        assert w.params_b is not None
        return cls(bare(w.params_b))


class Plan:
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
        self._cache: dict[tuple[str, int, float, float], Fit] = {}
        self.targets: Targets = latency_targets(
            profile, w.max_ttft_ms, w.max_itl_ms, w.output_tokens
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
    ) -> Fit:
        """The work on nodes of `gpus_per_node` x `acc` whose GPUs talk at `link_gb_s` per GPU
        (an instance type's link; the accelerator's own when None; 0: over PCIe) and whose nodes
        talk at `network_gbps` (an instance type's network; the profile's multi-node floor when
        None)."""
        link = acc.interconnect_gb_s if link_gb_s is None else link_gb_s
        network = self.profile.min_multi_node_network_gbps if network_gbps is None else network_gbps
        key = (acc.id, gpus_per_node, link, network)
        if key not in self._cache:
            self._cache[key] = self._place(acc, gpus_per_node, link, network)
        return self._cache[key]

    def _place(self, acc: Accelerator, per_node: int, link_gb_s: float, network: float) -> Fit:
        raise NotImplementedError


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
