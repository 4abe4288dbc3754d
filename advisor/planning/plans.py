"""The plan of a sized workload, one type per job: the workload profile's sizing and the
request's model and method choose it. Every plan answers `fit(accelerator, GPUs per node,
link, network)` and carries its latency `targets`."""

from __future__ import annotations

from collections.abc import Mapping

from advisor.catalog.models import WorkloadProfile
from advisor.catalog.queries import Catalog
from advisor.errors import InputError, field_name
from advisor.perf.calibration import MIN_FLEET_REPORTS, Calibration
from advisor.perf.sizing import EVERY_WEIGHT, Shape
from advisor.perf.work import Work
from advisor.planning.fine_tune import FineTune
from advisor.planning.memory_only import MemoryOnly
from advisor.planning.plan import ModelOf, Plan
from advisor.planning.serving import with_default_load
from advisor.planning.serving_deployment import ServingDeployment
from advisor.planning.training_run import TrainingRun

__all__ = ["FineTune", "MemoryOnly", "Plan", "ServingDeployment", "TrainingRun", "plan_for"]


def plan_for(
    catalog: Catalog,
    w: Work,
    profile: WorkloadProfile,
    fleet: Mapping[str, Calibration] | None = None,
    min_fleet_reports: int = MIN_FLEET_REPORTS,
) -> Plan:
    """The plan of `w` under `profile`: a training run (every weight) or a fine-tune
    (adapters) for a training profile; for a serving one, a deployment of a preset, or the
    memory alone of a bare size. Training lays out TP and PP from an assumed dense shape of a
    bare size (stated in its figures); serving keeps the bare size: its KV cache depends on
    heads no size implies. InputError (exit 2) for a profile not sized from a model, an unknown
    model, or a field the job cannot answer."""
    if profile.sizing == "none":
        raise InputError(
            f"{profile.id} is not sized from a model: drop {field_name('model')} / "
            f"{field_name('params_b')}",
            field="model" if w.model is not None else "params_b",
        )
    if profile.sizing == "training":
        model = ModelOf.of(catalog, w, Shape.assumed, Shape.assumed_moe)
        if w.method in EVERY_WEIGHT:
            return TrainingRun(w, profile, model, fleet, min_fleet_reports)
        return FineTune(w, profile, model, fleet, min_fleet_reports)
    model = ModelOf.of(catalog, w, Shape.bare)
    if model.shape.layers is None:
        return MemoryOnly(w, profile, model, fleet, min_fleet_reports)
    return ServingDeployment(
        with_default_load(w, profile), profile, model, fleet, min_fleet_reports
    )
