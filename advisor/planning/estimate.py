"""`advisor estimate` and POST /v1/estimates: every intermediate figure of sizing one workload
on one kind of hardware, as a typed `Estimate`.

Pure: takes the catalog (and the fleet's calibration, if any) as arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from advisor.catalog import Catalog, get_accelerator, get_instance_type, purchase
from advisor.catalog.capability import cannot_run
from advisor.catalog.models import Accelerator, InstanceType, Price, Purchase, WorkloadProfile
from advisor.catalog.queries import (
    offering_price,
    reference_instance,
    reference_system,
    spot_interruption,
)
from advisor.did_you_mean import unknown
from advisor.errors import InputError, field_name
from advisor.perf.calibration import MIN_FLEET_REPORTS, Calibration
from advisor.perf.cost import (
    completion_hours,
    cost_per_million_tokens_usd,
    cost_to_completion_usd,
    option_hourly_usd,
    tokens_within_budget,
)
from advisor.perf.efficiency import efficiency_bounds
from advisor.perf.inference import check_tensor_parallel
from advisor.perf.precision import require_precision
from advisor.perf.sizing import Figure
from advisor.perf.spot import SpotPlan, too_risky, training_spot_plan
from advisor.perf.targets import Targets
from advisor.perf.training import Layout
from advisor.planning.capacity import capacity_note
from advisor.planning.fit import Fit
from advisor.planning.limits import BARE_INFERENCE, network_below_floor
from advisor.planning.plans import plan_for
from advisor.request import EstimateRequest, refuse_idle_fields


def _absent_when_none(value: object) -> bool:
    return value is None


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Hardware(_Result):
    """What the estimate runs on: one instance type (priced) or an accelerator (unpriced)."""

    instance_type: str | None
    accelerator: str
    gpus_per_node: int
    nodes: int
    gpus: int  # rented: nodes x GPUs per node


class ParallelLayout(_Result):
    """How the training GPUs split the work (advisor/perf/training.py Layout)."""

    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    zero_stage: int
    context_parallel: int = 1  # each sequence's tokens over this many ranks
    expert_parallel: int = 1  # a mixture of experts' experts over this many of the DP ranks


class Estimate(_Result):
    """Every figure of one sized workload on one kind of hardware (the JSON contract)."""

    workload: str
    model: str
    sizing: str  # the profile's sizing kind: training or inference
    hardware: Hardware
    fits: bool
    figures: list[Figure]
    memory_per_gpu_gb: float
    memory_total_gb: float
    efficiency: float
    efficiency_source: str
    hours: float | None
    hourly_usd: float | None  # all rented nodes together
    price: Price | None  # of one node
    cost_usd: float | None
    tokens_per_s: float | None
    replicas: int | None
    notes: list[str]
    # absent from the JSON unless the workload is inference on a priced instance type
    cost_per_million_tokens_usd: Annotated[float | None, Field(exclude_if=_absent_when_none)] = None
    # inference with a model preset (advisor/perf/inference.py); absent otherwise
    ttft_ms: Annotated[float | None, Field(exclude_if=_absent_when_none)] = None
    itl_ms: Annotated[float | None, Field(exclude_if=_absent_when_none)] = None
    throughput_tokens_s: Annotated[float | None, Field(exclude_if=_absent_when_none)] = None
    concurrency: Annotated[int | None, Field(exclude_if=_absent_when_none)] = None
    tensor_parallel: Annotated[int | None, Field(exclude_if=_absent_when_none)] = None
    # where the serving figures' speeds came from: an operator table (accelerator, date, stack)
    # or the roofline (datasheet peaks x estimated efficiencies, their source)
    speed_source: Annotated[str | None, Field(exclude_if=_absent_when_none)] = None
    # training (advisor/perf/training.py); absent otherwise. mfu is steady state on model FLOPs
    # (sizing.training_flops), hfu counts the recomputed forward; hours include the goodput of
    # long runs.
    gpu_hours: Annotated[float | None, Field(exclude_if=_absent_when_none)] = None
    mfu: Annotated[float | None, Field(exclude_if=_absent_when_none)] = None
    hfu: Annotated[float | None, Field(exclude_if=_absent_when_none)] = None
    layout: Annotated[ParallelLayout | None, Field(exclude_if=_absent_when_none)] = None
    # training with a token count: the hours at the pessimistic and the optimistic efficiency
    # (perf/efficiency.py efficiency_bounds), and with budget_usd the tokens it buys
    hours_range: Annotated[tuple[float, float] | None, Field(exclude_if=_absent_when_none)] = None
    tokens_within_budget: Annotated[float | None, Field(exclude_if=_absent_when_none)] = None


def estimate(
    catalog: Catalog,
    req: EstimateRequest,
    fleet: Mapping[str, Calibration] | None = None,
    min_fleet_reports: int = MIN_FLEET_REPORTS,
) -> Estimate:
    profile = _profile(catalog, req)
    node = _hardware(catalog, req)
    instance, acc, per_node = node.instance, node.acc, node.per_node
    if profile.sizing == "inference" or req.precision in ("fp8", "fp4"):  # else bf16/fp16
        require_precision(acc, req.precision)  # refused with the precisions it runs: exit 2
    refuse_idle_fields(req, req.sized, profile.sizing)
    plan = plan_for(catalog, req.work(), profile, fleet, min_fleet_reports)  # TP vs the heads
    if profile.sizing == "inference" and req.tensor_parallel is not None:
        # a degree that cannot be placed: exit 2. An instance type rents whole nodes, so its
        # GPUs are at least a node's
        whole = per_node if instance is not None else req.tensor_parallel
        check_tensor_parallel(req.gpu_count or whole, req.tensor_parallel, per_node)
    fit = plan.fit(acc, per_node, node.link_gb_s, node.network_gbps, node.domain_gpus)
    price = _price(instance, req) if instance is not None else None
    # an unfit estimate keeps every figure (fits false, and why), its price at the count shown
    hourly = option_hourly_usd(price.hourly_usd, fit.nodes) if price and fit.nodes else None
    spot = _spot(catalog, instance, price, fit, profile, req)
    hours = completion_hours(fit.hours, spot)
    # what the cost counts: a Capacity Block bills its whole block (purchase.charged_hours)
    charged = purchase.charged_hours(price.purchase, hours) if price and hours else hours
    per_million = cost_per_million_tokens_usd(
        hourly if fit.tokens_per_s else None, fit.served_tokens_per_s or fit.tokens_per_s
    )
    blocking = (
        _notes(fit, profile, node)
        + _latency_notes(fit, plan.targets)
        + _deadline_notes(fit, req.deadline_days)
        + _spot_notes(spot, profile)
        + _budget_notes(req.budget_usd, cost_to_completion_usd(hourly, charged))
    )
    notes = (
        blocking
        + _information(fit, profile, node, price)
        + _price_notes(price)
        + ([] if blocking else _purchase_notes(instance, price, fit, hours, per_million, profile))
    )
    result = Estimate(
        workload=profile.id,
        model=req.model_label(" parameters"),
        sizing=profile.sizing,
        hardware=Hardware(
            instance_type=instance.id if instance else None,
            accelerator=acc.id,
            gpus_per_node=per_node,
            nodes=fit.nodes,
            gpus=fit.rented_gpus,
        ),
        fits=not blocking,
        figures=[*fit.figures, *(spot.figures if spot is not None else ())],
        memory_per_gpu_gb=fit.memory_per_gpu_gb,
        memory_total_gb=fit.memory_total_gb,
        efficiency=fit.efficiency,
        efficiency_source=fit.efficiency_source,
        hours=hours,
        hourly_usd=hourly,
        price=price,
        cost_usd=cost_to_completion_usd(hourly, charged),
        tokens_per_s=fit.tokens_per_s,
        replicas=fit.replicas,
        cost_per_million_tokens_usd=per_million,
        ttft_ms=fit.ttft_ms,
        itl_ms=fit.itl_ms,
        throughput_tokens_s=fit.tokens_per_s if fit.itl_ms is not None else None,
        concurrency=fit.concurrency,
        tensor_parallel=fit.tensor_parallel,
        speed_source=fit.speed_source,
        gpu_hours=fit.gpu_hours,
        mfu=fit.mfu,
        hfu=fit.hfu,
        layout=_layout(fit.layout),
        notes=notes,
    )
    if _no_network_across_nodes(fit, node):
        return _untimed(result)
    return _with_margins(result, fit, node.acc, req)


def _with_margins(result: Estimate, fit: Fit, acc: Accelerator, req: EstimateRequest) -> Estimate:
    """A timed training estimate's hours under the pessimistic and optimistic efficiency (time
    taken as inversely proportional to it: an upper bound on the swing, communication does not
    scale) and, with a budget, the tokens it buys at the plan's cost per token."""
    if fit.hours is None or result.sizing != "training":
        return result
    low, high = efficiency_bounds(acc, req.precision)
    hours = result.hours or fit.hours
    update: dict[str, object] = {"hours_range": (hours / high, hours / low)}
    if req.budget_usd is not None and result.cost_usd and req.tokens:
        update["tokens_within_budget"] = tokens_within_budget(
            req.tokens, req.budget_usd, result.cost_usd
        )
    return result.model_copy(update=update)


def _budget_notes(budget_usd: float | None, cost_usd: float | None) -> list[str]:
    """A run that costs more than the budget (only a priced estimate has a cost)."""
    if budget_usd is None or cost_usd is None or cost_usd <= budget_usd:
        return []
    return [f"costs ${cost_usd:,.0f}, above the ${budget_usd:,.0f} budget (--budget-usd)"]


# Figures that time a step or a run: meaningless across nodes with no network between them.
TIMED_FIGURES = frozenset({"step_s", "mfu", "hfu", "hours", "tokens_per_s"})


def _no_network_across_nodes(fit: Fit, node: _Node) -> bool:
    """Whether the plan splits one job across nodes whose network the catalog does not know
    (a bare accelerator off its reference system): no time can be given, only the memory."""
    return fit.spans_nodes and not node.network_gbps


def _untimed(result: Estimate) -> Estimate:
    """The estimate without a time, a speed or a cost (its memory and FLOPs kept): a job across
    nodes with no known network between them would otherwise print an absurd time (the nodes
    talking at nothing); the notes name what is missing."""
    figures = [
        f
        for f in result.figures
        if f.name not in TIMED_FIGURES and not f.name.endswith("_s_per_step")
    ]
    none = dict.fromkeys(("hours", "cost_usd", "gpu_hours", "mfu", "hfu", "tokens_per_s"))
    return result.model_copy(update={"figures": figures, "fits": False, **none})


def _profile(catalog: Catalog, req: EstimateRequest) -> WorkloadProfile:
    if not req.sized:
        raise InputError(
            f"estimate needs a model: give {field_name('model')} (a preset id), "
            f"{field_name('params_b')} or {field_name('hf_config')}",
            field="model",
        )
    profile = catalog.workloads.get(req.workload)
    if profile is None:
        raise InputError(unknown("workload", req.workload, catalog.workloads), field="workload")
    return profile


# GPUs per node of a bare accelerator whose catalog lists no reference system: the HGX board size.
DEFAULT_GPUS_PER_NODE = 8


@dataclass(frozen=True, slots=True)
class _Node:
    """The hardware an estimate runs on: an instance type (priced), or a bare accelerator on its
    reference system (catalog/systems.yaml), with the facts the estimate reads."""

    instance: InstanceType | None
    acc: Accelerator
    per_node: int
    link_gb_s: float
    network_gbps: float  # between nodes, per node; 0: none known
    name: str  # what the notes call it
    # GPUs one NVLink domain spans beyond a node (GB200/GB300 NVL72: 72): the instance type's,
    # or a bare accelerator's host instance type's
    domain_gpus: int | None = None

    def words(self) -> str | None:
        """What a bare accelerator was taken to be, for the notes (None on an instance type)."""
        if self.instance is not None:
            return None
        link = f"{self.link_gb_s:g} GB/s GPU link" if self.link_gb_s else "no GPU link (PCIe)"
        if self.domain_gpus:
            link += f" across an NVLink domain of {self.domain_gpus} GPUs"
        network = (
            f"{self.network_gbps:,.0f} Gbit/s between nodes"
            if self.network_gbps
            else "no network between nodes known (a job across nodes does not fit: give "
            "--instance-type)"
        )
        return f"on {self.name}: {link}, {network}"


def _hardware(catalog: Catalog, req: EstimateRequest) -> _Node:
    """The instance type, or a bare accelerator on nodes of min(gpu_count, its reference
    system's GPUs): the GPUs asked for are the deployment's or the job's, not a whole node's."""
    if req.instance_type is not None:
        instance = get_instance_type(catalog, req.instance_type)
        if instance.accelerator is None:
            raise InputError(
                f"{instance.id} has no GPU: estimates are for GPU instance types",
                field="instance_type",
            )
        acc = get_accelerator(catalog, instance.accelerator)
        return _Node(
            instance,
            acc,
            instance.gpu_count,
            instance.interconnect_gb_s,
            instance.network_gbps,
            instance.id,
            instance.nvlink_domain_gpus,
        )
    if req.accelerator is None:
        raise InputError(
            f"give {field_name('instance_type')} (priced) or {field_name('accelerator')} "
            "(unpriced) to estimate on",
            field="instance_type",
        )
    return _bare(catalog, get_accelerator(catalog, req.accelerator), req)


def _bare(catalog: Catalog, acc: Accelerator, req: EstimateRequest) -> _Node:
    """A bare accelerator on its reference system, else on its largest instance type (the
    host), else on nodes of the GPUs per node asked for."""
    system = reference_system(catalog, acc.id)
    host = reference_instance(catalog, acc.id) if system is None else None
    default_board = system.gpu_count if system else host.gpu_count if host else None
    board = req.gpus_per_node or default_board or DEFAULT_GPUS_PER_NODE
    per_node = min(req.gpu_count, board) if req.gpu_count else board
    if host is not None and req.gpus_per_node in (None, host.gpu_count):
        return _on_host(acc, host, per_node, board)
    if system is not None and req.gpus_per_node in (None, system.gpu_count):
        network = system.network_gbps or 0.0
        name = f"the {system.name} (the reference system of {acc.id}, catalog/systems.yaml)"
        if per_node < board:
            name = f"{per_node} of the {board} GPUs of {name}"
    else:
        network = 0.0
        why = (
            f"not the {system.gpu_count} of its reference system, the {system.name}"
            if system is not None
            else "no reference system in the catalog"
        )
        name = f"nodes of {per_node} x {acc.id} ({why})"
    return _Node(None, acc, per_node, acc.interconnect_gb_s if per_node > 1 else 0.0, network, name)


def _on_host(acc: Accelerator, host: InstanceType, per_node: int, board: int) -> _Node:
    """`per_node` of the `board` chips of the host instance type: its link (none for one
    chip), its network, and its NVLink domain while whole trays are used."""
    name = (
        f"the {host.id} (the catalog's largest {acc.id} instance type; no vendor system in "
        "catalog/systems.yaml)"
    )
    if per_node < board:
        name = f"{per_node} of the {board} chips of {name}"
    link = host.interconnect_gb_s if per_node > 1 else 0.0
    domain = host.nvlink_domain_gpus if per_node == board else None
    return _Node(None, acc, per_node, link, host.network_gbps, name, domain)


def _notes(fit: Fit, profile: WorkloadProfile, node: _Node) -> list[str]:
    """Why the hardware cannot run the work: a job the chip is not built for (the rule
    `recommend` rejects it by), memory, a one-node profile on several nodes, a fabric too slow
    between nodes (or none known)."""
    mismatch = cannot_run(node.acc, profile)
    notes = [mismatch] if mismatch else []
    notes += [fit.unfit] if fit.unfit else []
    if fit.spans_nodes and not profile.scale_out and fit.serving_layout is None:
        notes.append(f"needs {fit.nodes} nodes and {profile.id} runs on one node")
    elif fit.spans_nodes and network_below_floor(profile, node.network_gbps):
        network = (
            f"{node.name}'s {node.network_gbps:g} Gbit/s network is below"
            if node.network_gbps
            else f"{node.name} has no network between nodes, against"
        )
        notes.append(
            f"needs {fit.nodes} nodes and {network} the {profile.min_multi_node_network_gbps:g} "
            f"Gbit/s {profile.id} needs between nodes"
        )
    return notes


def _fewer_gpus(fit: Fit, profile: WorkloadProfile, node: _Node) -> list[str]:
    """A training job that must stay on one node but needs more GPUs than one holds: what
    would need fewer."""
    one_node = not profile.scale_out or not node.network_gbps
    if profile.sizing != "training" or not fit.spans_nodes or not one_node:
        return []
    lighter = (
        "the lighter methods below"
        if fit.lighter_methods
        else "8-bit Adam, LoRA or QLoRA (--method; adapters on a model preset)"
    )
    return [
        f"{fit.memory_total_gb:,.0f} GB of training states and activations need "
        f"{fit.gpus_needed} GPUs of {node.acc.device_memory_gb:g} GB: {lighter} would need "
        "fewer; CPU offload of the optimizer states (not modelled here) would shrink them too"
    ]


def _information(fit: Fit, profile: WorkloadProfile, node: _Node, price: Price | None) -> list[str]:
    """What the estimate leaves out or assumes, without making the hardware unfit."""
    notes = _fewer_gpus(fit, profile, node)
    if profile.sizing == "inference" and fit.tokens_per_s is None and not fit.unfit:
        notes.append(BARE_INFERENCE)
    if fit.serving_layout is not None:
        notes.append(f"no node holds the model: one replica spans nodes, {fit.serving_layout}")
    if fit.serving_alternative is not None:
        notes.append(fit.serving_alternative)
    bought = price.purchase if price is not None else None
    name = node.name if node.instance else node.acc.id
    reserve = capacity_note(fit.nodes, name, node.per_node, bought)
    notes += [reserve] if reserve else []
    assumed = node.words()
    if assumed is not None:
        notes.append(f"no price: estimated on an accelerator, not an instance type, {assumed}")
    notes.extend(
        f"--method {method} fits: {memory_gb:.1f} GB per GPU on {gpus} GPU(s)"
        for method, memory_gb, gpus, _ in fit.lighter_methods
    )
    return notes


def _spot(
    catalog: Catalog,
    instance: InstanceType | None,
    price: Price | None,
    fit: Fit,
    profile: WorkloadProfile,
    req: EstimateRequest,
) -> SpotPlan | None:
    """What spot interruptions add to a training run priced at a spot rate: the same plan as
    `recommend`'s (advisor/perf/spot.py training_spot_plan); None on demand or without one."""
    if instance is None or price is None or price.purchase != Purchase.spot:
        return None
    source = spot_interruption(instance, catalog.spot_interruptions.values())
    if fit.hours is None or profile.spot is None or source is None:
        return None
    return training_spot_plan(fit.hours, fit.nodes, source, profile.spot, req.checkpoint_interval_h)


def _spot_notes(spot: SpotPlan | None, profile: WorkloadProfile) -> list[str]:
    """A spot plan beyond the workload's bound does not fit (SPOT_TOO_RISKY in `recommend`)."""
    if spot is None or profile.spot is None or not too_risky(spot, profile.spot):
        return []
    if not spot.finishes:
        return [
            f"on spot, {spot.nodes} synchronous node(s) never finish: interruptions lose "
            "more than an hour per hour"
        ]
    return [
        f"on spot, {spot.nodes} synchronous node(s) for {spot.hours:,.0f} h expect "
        f"{spot.interruptions:,.1f} interruptions adding {spot.added_hours:,.0f} h "
        f"({spot.added_fraction:.1%}); {profile.id} allows a multi-node spot plan at most "
        f"{profile.spot.max_interruptions:g} interruptions and at most "
        f"{profile.spot.max_added_fraction:.0%} added time: use on-demand"
    ]


def _latency_notes(fit: Fit, targets: Targets) -> list[str]:
    """Latency targets this hardware misses (a miss means it does not fit the request), each
    with the lowest figure it reaches."""
    if fit.latency_met or fit.latency_floor is None:
        return []
    notes = []
    for name, target, best in (
        ("TTFT", targets.max_ttft_ms, fit.latency_floor[0]),
        ("ITL", targets.max_itl_ms, fit.latency_floor[1]),
    ):
        if target is not None and best > target:
            notes.append(
                f"misses the {target:g} ms {name} target: the lowest it reaches is {best:.3g} ms"
            )
    return notes or [
        f"meets the TTFT and ITL targets only in different deployments: at the lowest ITL "
        f"({fit.itl_ms or 0:.3g} ms) the TTFT is {fit.ttft_ms or 0:.3g} ms"
    ]


def _layout(layout: Layout | None) -> ParallelLayout | None:
    if layout is None:
        return None
    return ParallelLayout(
        data_parallel=layout.dp,
        tensor_parallel=layout.tp,
        pipeline_parallel=layout.pp,
        zero_stage=layout.zero_stage,
        context_parallel=layout.cp,
        expert_parallel=layout.ep,
    )


def _deadline_notes(fit: Fit, deadline_days: float | None) -> list[str]:
    """A deadline this hardware misses at any GPU count (within max_gpus), with the fastest."""
    if fit.deadline_met or fit.fastest_hours is None or deadline_days is None:
        return []
    return [
        f"misses the {deadline_days:g}-day deadline: the fastest it finishes is "
        f"{fit.fastest_hours / 24:,.1f} days on {fit.rented_gpus} GPUs"
    ]


def _price(instance: InstanceType, req: EstimateRequest) -> Price | None:
    """The cheapest price of the request's purchase option (None: either), in its region when
    given: the same reading of `purchase` as `recommend`'s."""
    # A flagged price (advisor/catalog/cross_checks.py price_flags) is used only when the request
    # includes flagged prices or no other matches; the notes say so (_price_notes).
    price = offering_price(instance.prices, req.purchase, req.region, req.include_flagged_prices)
    if price is None:
        what = req.purchase.value if req.purchase is not None else "any"
        where = f" in {req.region}" if req.region else ""
        raise InputError(
            f"{instance.id} has no {what} price{where} in the catalog",
            field="region" if req.region else "purchase",
        )
    return price


def _purchase_notes(
    instance: InstanceType | None,
    price: Price | None,
    fit: Fit,
    hours: float | None,
    per_million: float | None,
    profile: WorkloadProfile,
) -> list[str]:
    """How the run or the deployment is best bought where the offering is sold more than one
    way: the sentence `recommend` gives it (advisor/catalog/purchase.py run_sentence,
    deployment_sentence). Not on a plan that does not fit."""
    if instance is None or price is None or not fit.nodes:
        return []
    if profile.sizing == "inference":
        found = purchase.deployment_sentence(fit.nodes, instance.prices, price, per_million)
    else:
        found = purchase.run_sentence(hours, fit.nodes, instance.prices, price, alone=False)
    return [found] if found else []


def _price_notes(price: Price | None) -> list[str]:
    if price is None or price.flag is None:
        return []
    return [f"the price used is flagged by the catalog's sanity checks: {price.flag}"]
