"""The plan of a model served that is known only by its size (--params-b for inference): the
weights' memory and the GPUs (a power of two inside one node) that hold them. Latency and
throughput need the architecture (layers, heads, KV heads) the inference model reads: they are
not computed, and a request that asks for them is refused (serving.refuse_serving_fields)."""

from __future__ import annotations

from collections.abc import Mapping

from advisor.catalog.models import Accelerator, WorkloadProfile
from advisor.perf.calibration import MIN_FLEET_REPORTS, Calibration
from advisor.perf.headroom import min_gpus_for
from advisor.perf.inference import bandwidth_efficiency
from advisor.perf.sizing import inference_memory
from advisor.perf.work import Work
from advisor.planning.fit import Fit
from advisor.planning.plan import ModelOf, Plan, refuse_for_serving
from advisor.planning.serving import (
    inference_nodes,
    next_pow2,
    per_replica_figure,
    refuse_serving_fields,
    replicas_for,
    unfit_inference,
)


class MemoryOnly(Plan):
    """A bare size served: memory and GPUs per replica, no latency (BARE_INFERENCE)."""

    def __init__(
        self,
        w: Work,
        profile: WorkloadProfile,
        model: ModelOf,
        fleet: Mapping[str, Calibration] | None = None,
        min_fleet_reports: int = MIN_FLEET_REPORTS,
    ) -> None:
        refuse_serving_fields(w)
        refuse_for_serving(w, profile, model)
        super().__init__(w, profile, model, fleet, min_fleet_reports)

    def _place(self, acc: Accelerator, per_node: int, link_gb_s: float, network: float) -> Fit:
        memory = inference_memory(self.shape, precision=self.w.precision)
        total = memory[-1].value
        eff, source = bandwidth_efficiency(acc)
        per_replica = next_pow2(min_gpus_for(total, acc.device_memory_gb))
        if per_replica > per_node:
            reason = (
                f"{total:,.0f} GB needs {per_replica} x {acc.device_memory_gb:g} GB GPUs, "
                f"beyond one node of {per_node}: a replica is served inside one node"
            )
            return unfit_inference(acc, reason, memory, next_pow2(per_node + 1) // 2, per_node)
        asked = replicas_for(self.w.gpu_count, per_replica)  # --gpu-count: at least that many
        nodes, replicas = inference_nodes(per_replica, per_node, asked)
        return Fit(
            gpus_needed=per_replica * replicas,
            nodes=nodes,
            rented_gpus=nodes * per_node,
            spans_nodes=False,
            memory_per_gpu_gb=total / per_replica,
            memory_total_gb=total * replicas,
            efficiency=eff,
            efficiency_source=source,
            replicas=replicas,
            figures=(*memory, per_replica_figure(total, acc, per_replica)),
        )
