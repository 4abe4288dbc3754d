"""The plan of a served model whose architecture is known (a preset): the tensor-parallel
degree, concurrency and replicas chosen on a kind of node (serving.choose_deployment, from the
inference model's TTFT, ITL and throughput), the replicas a throughput target or a request rate
needs, and the cost per million tokens; when no degree inside a node holds the model, its memory
at the widest degree and why."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from advisor.catalog.models import Accelerator, WorkloadProfile
from advisor.errors import InputError, flag_name
from advisor.perf.calibration import MIN_FLEET_REPORTS, Calibration
from advisor.perf.inference import (
    check_heads,
    serving_memory,
    throughput_figure,
)
from advisor.perf.work import Work
from advisor.planning.fit import Fit
from advisor.planning.plan import ModelOf, Plan, refuse_for_serving
from advisor.planning.serving import (
    choose_deployment,
    inference_nodes,
    replicas_figure,
    replicas_for,
    serving_degrees,
    unfit_inference,
)


class ServingDeployment(Plan):
    """A preset served: TTFT, ITL and throughput from advisor/perf/inference.py."""

    def __init__(
        self,
        w: Work,
        profile: WorkloadProfile,
        model: ModelOf,
        fleet: Mapping[str, Calibration] | None = None,
        min_fleet_reports: int = MIN_FLEET_REPORTS,
    ) -> None:
        refuse_for_serving(w, profile, model)
        if w.tensor_parallel is not None:
            check_heads(w.tensor_parallel, model.shape.heads, w.model or "the model")
        super().__init__(w, profile, model, fleet, min_fleet_reports)

    def _place(self, acc: Accelerator, per_node: int, link_gb_s: float, network: float) -> Fit:
        """The deployment chosen on nodes of `per_node` x `acc`: replicas inside one node; when
        no degree there holds the model, replicas over several nodes on their network
        (advisor/planning/across_nodes.py)."""
        w = self.w
        try:
            choice = choose_deployment(
                self.shape, self.moe, acc, per_node, link_gb_s, w, self.targets
            )
        except InputError as e:
            # only a model no degree inside a node holds (InferenceModel's memory refusal names
            # the degree) is laid over several nodes; a load one node cannot carry is not
            held = e.field != "tensor_parallel"
            # imported here: replicas over nodes (and their modules) only for models no node holds
            from advisor.planning.across_nodes import serve_across_nodes

            across = (
                None
                if held
                else serve_across_nodes(
                    self.shape,
                    acc,
                    w,
                    self.targets,
                    (per_node, link_gb_s, network),
                    self.domain_gpus or 0,
                )
            )
            return across or self._unfit(acc, per_node, e.render(flag_name))
        got, model = choice.result, choice.model
        tp, per_replica = got.tensor_parallel, got.throughput_tokens_s / got.replicas
        wanted = max(got.replicas, replicas_for(w.throughput_tokens_s, per_replica))
        nodes, replicas = inference_nodes(tp, per_node, wanted)
        if w.request_rate is not None:
            if replicas != got.replicas:  # the rented nodes' replicas share the rate
                model = model.on(dataclasses.replace(model.dep, gpus=tp * replicas))
                got = model.at_rate(w.request_rate, self.targets)
            # the rate's tokens, served by the replicas it sized
            throughput = next(f for f in got.figures if f.name == "throughput_tokens_s")
        else:
            throughput = throughput_figure(
                replicas, got.concurrency, got.itl_ms / 1e3, model.speed_source
            )
        capacity = throughput.value
        per_gpu = model.memory(got.concurrency)[-1].value / tp
        return Fit(
            gpus_needed=tp * replicas,
            nodes=nodes,
            rented_gpus=nodes * per_node,
            spans_nodes=False,
            memory_per_gpu_gb=per_gpu,
            memory_total_gb=per_gpu * tp * replicas,
            efficiency=model.eff_bw,
            efficiency_source=model.efficiency_source,
            tokens_per_s=capacity,
            served_tokens_per_s=min(capacity, w.throughput_tokens_s or math.inf),
            replicas=replicas,
            ttft_ms=got.ttft_ms,
            itl_ms=got.itl_ms,
            concurrency=got.concurrency,
            tensor_parallel=tp,
            speed_source=model.speed_source,
            latency_floor=choice.floor,
            latency_met=choice.met,
            figures=(
                *(f for f in got.figures if f.name != "throughput_tokens_s"),
                replicas_figure(
                    replicas,
                    wanted,
                    w.throughput_tokens_s,
                    per_replica,
                    tp,
                    per_node,
                    nodes,
                    (w.request_rate, choice.rate_per_replica),
                ),
                throughput,
            ),
        )

    def _unfit(self, acc: Accelerator, per_node: int, reason: str) -> Fit:
        """A served model no tensor-parallel degree inside one node holds: its memory (the one
        rule, InferenceModel.memory) at the widest degree, with the reason."""
        w = self.w
        tp = w.tensor_parallel or max(serving_degrees(per_node, w.gpu_count))
        inp, out = w.io_tokens()
        memory = serving_memory(
            self.shape, w.precision, inp + out, w.concurrency or w.batch or 1, tp, w.kv_precision
        )
        return unfit_inference(acc, reason, memory, tp, per_node)
