"""The review's money figures: savings on idle and over-provisioned GPUs, and cost per unit of
work for named workloads across catalog instance types. Pure and deterministic.

- savings: the cheapest on-demand catalog option with enough memory for the observed peak and
  enough 16-bit compute for the observed busy share; (current - suggested hourly) x 730 h;
- workload costs: hours = 6·N·D / (GPUs x dense bf16 peak x efficiency), cost = hours x hourly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from advisor.catalog import Catalog
from advisor.catalog.models import Accelerator, Purchase
from advisor.fleet.verification import match_by_name
from advisor.perf.calibration import Calibration
from advisor.perf.fitting import USABLE_MEMORY
from advisor.perf.sizing import Shape, compute_hours, training_flops, training_memory
from advisor.review.data import GpuUsage, UsageRecord

HOURS_PER_MONTH = 730
MEMORY_HEADROOM = 1.2  # a suggested GPU holds the observed peak memory use plus 20%
BASE_EFFICIENCY = 0.4  # model FLOP utilisation assumed for training
MIN_CALIBRATION_REPORTS = 5
GB_PER_MIB = 1024 * 1024 / 1e9
SAVING_FINDINGS = ("idle", "over_provisioned")


# --- prices ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Offer:
    """One on-demand price of one GPU instance type."""

    instance_type: str
    accelerator: str
    gpu_count: int
    region: str
    hourly_usd: float

    @property
    def per_gpu_usd(self) -> float:
        return self.hourly_usd / self.gpu_count


def on_demand_offers(catalog: Catalog, region: str | None) -> list[Offer]:
    """Every GPU instance type's on-demand prices (in `region`, or in every region)."""
    out = []
    for it in catalog.instance_types.values():
        if it.accelerator is None or it.accelerator not in catalog.accelerators:
            continue
        for p in it.prices:
            if p.purchase == Purchase.on_demand and (region is None or p.region == region):
                out.append(Offer(it.id, it.accelerator, it.gpu_count, p.region, p.hourly_usd))
    out.sort(key=lambda o: (o.hourly_usd, o.instance_type, o.region))
    return out


def _peak16(acc: Accelerator) -> float | None:
    """Dense 16-bit peak (bf16, else fp16) in TFLOP/s."""
    return acc.peak_tflops.bf16 or acc.peak_tflops.fp16


# --- savings -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Saving:
    host: str
    gpu_index: int
    gpu_name: str | None
    accelerator: str | None
    instance_type: str | None  # as the utilisation report gave it
    finding: str
    reason_codes: tuple[str, ...]
    util_mean_pct: float | None
    util_p95_pct: float | None
    memory_peak_gb: float | None
    memory_total_gb: float | None
    needs: str  # what a replacement must offer, in words
    current_hourly_usd: float | None  # per GPU
    current_basis: str  # where the current price comes from
    suggestion: Offer | None
    suggestion_name: str | None  # the suggested accelerator's name
    monthly_saving_usd: float | None
    note: str


def latest_usage(records: Iterable[UsageRecord]) -> list[UsageRecord]:
    """Each host's latest utilisation report, by host name."""
    latest: dict[str, UsageRecord] = {}
    for r in records:
        held = latest.get(r.host)
        if held is None or (r.created_at or "") >= (held.created_at or ""):
            latest[r.host] = r
    return [latest[h] for h in sorted(latest)]


def _current_price(
    catalog: Catalog, record: UsageRecord, acc: Accelerator | None, offers: Sequence[Offer]
) -> tuple[Offer | None, str]:
    """The offer the current per-GPU price comes from, and where it comes from in words."""
    it = catalog.instance_types.get(record.instance_type or "")
    if it is not None and it.gpu_count:
        mine = [o for o in offers if o.instance_type == it.id]
        if mine:
            o = mine[0]
            split = f" / {o.gpu_count} GPUs" if o.gpu_count > 1 else ""
            return (
                o,
                f"instance type {it.id}: ${o.hourly_usd:,.2f}/h on demand in {o.region}{split}",
            )
    if acc is not None:
        same = sorted(
            (o for o in offers if o.accelerator == acc.id),
            key=lambda o: (o.per_gpu_usd, o.instance_type),
        )
        if same:
            o = same[0]
            prefix = (
                f"instance type {record.instance_type!r} has no on-demand price here; "
                if record.instance_type
                else ""
            )
            return o, (
                f"{prefix}cheapest per-GPU on-demand price of {acc.id} in the catalog "
                f"({o.instance_type}, {o.region}: ${o.hourly_usd:,.2f}/h / {o.gpu_count} GPUs)"
            )
        return None, f"no on-demand price of {acc.id} in the catalog"
    return None, "unknown: no catalog instance type in the report and the GPU is not in the catalog"


def _saving(
    catalog: Catalog,
    record: UsageRecord,
    g: GpuUsage,
    offers: Sequence[Offer],
    region: str | None,
) -> Saving:
    acc = catalog.accelerators.get(g.accelerator or "") or match_by_name(catalog, g.name)
    basis_offer, basis = _current_price(catalog, record, acc, offers)
    current = basis_offer.per_gpu_usd if basis_offer else None
    # Suggestions come from the review's region, else from the region the current price is in.
    where = region or (basis_offer.region if basis_offer else None)
    peak_gb = g.memory_used_max_mib * GB_PER_MIB if g.memory_used_max_mib is not None else None
    total_gb = g.memory_total_mib * GB_PER_MIB if g.memory_total_mib is not None else None
    busy = g.util_p95_pct if g.util_p95_pct is not None else g.util_mean_pct
    acc_peak = _peak16(acc) if acc is not None else None
    suggestion: Offer | None = None
    note = ""
    needs = "-"
    if peak_gb is None or busy is None or acc_peak is None:
        missing = [
            what
            for what, value in (
                ("peak memory use", peak_gb),
                ("GPU utilisation", busy),
                ("a catalog accelerator with a 16-bit peak", acc_peak),
            )
            if value is None
        ]
        note = "no suggestion: " + ", ".join(missing) + " unknown"
    else:
        need_gb = peak_gb * MEMORY_HEADROOM
        need_tflops = acc_peak * busy / 100
        needs = f">= {need_gb:,.1f} GB, >= {need_tflops:,.0f} TFLOP/s 16-bit"
        for o in offers:  # cheapest first
            if where is not None and o.region != where:
                continue
            cand = catalog.accelerators[o.accelerator]
            peak = _peak16(cand)
            if cand.memory_gb >= need_gb and peak is not None and peak >= need_tflops:
                suggestion = o
                break
        if suggestion is None:
            note = f"nothing in the catalog fits in {where}" if where else "nothing fits"
        elif current is not None and suggestion.hourly_usd >= current:
            note = f"nothing cheaper fits (cheapest fit: {suggestion.instance_type})"
            suggestion = None
    saving = None
    if suggestion is not None and current is not None:
        saving = (current - suggestion.hourly_usd) * HOURS_PER_MONTH
    if g.finding == "idle" and current is not None:
        release = f"idle: releasing it instead saves ${current * HOURS_PER_MONTH:,.0f}/month"
        note = "; ".join(n for n in (note, release) if n)
    return Saving(
        host=record.host,
        gpu_index=g.index,
        gpu_name=g.name,
        accelerator=acc.id if acc else g.accelerator,
        instance_type=record.instance_type,
        finding=g.finding or "",
        reason_codes=g.reason_codes,
        util_mean_pct=g.util_mean_pct,
        util_p95_pct=g.util_p95_pct,
        memory_peak_gb=peak_gb,
        memory_total_gb=total_gb,
        needs=needs,
        current_hourly_usd=current,
        current_basis=basis,
        suggestion=suggestion,
        suggestion_name=catalog.accelerators[suggestion.accelerator].name if suggestion else None,
        monthly_saving_usd=saving,
        note=note,
    )


def savings(catalog: Catalog, usage: Sequence[UsageRecord], region: str | None) -> list[Saving]:
    """Idle and over-provisioned GPUs (each host's latest report), largest saving first.

    Current price, per GPU: the report's instance type (its on-demand price in `region`, else
    its cheapest region), else the cheapest per-GPU on-demand price of the GPU's accelerator
    (likewise). Suggestion: the cheapest on-demand instance type in `region` (when None: in the
    region the current price is from) whose GPU holds the observed peak memory x 1.2 and whose
    dense 16-bit peak covers the current GPU's peak x its p95 busy share.
    Saving: (current - suggested hourly) x 730 h.
    """
    offers = on_demand_offers(catalog, None)
    if region is not None:  # prices in the region first, the others as a fallback
        offers = [o for o in offers if o.region == region] + [
            o for o in offers if o.region != region
        ]
    out = [
        _saving(catalog, record, g, offers, region)
        for record in latest_usage(usage)
        for g in record.gpus
        if g.finding in SAVING_FINDINGS
    ]
    out.sort(key=lambda s: (-(s.monthly_saving_usd or 0.0), s.host, s.gpu_index))
    return out


def finding_counts(usage: Sequence[UsageRecord]) -> dict[str, int]:
    counts = Counter(g.finding or "unclassified" for r in latest_usage(usage) for g in r.gpus)
    return dict(sorted(counts.items()))


# --- cost per unit of work ---------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadSpec:
    label: str
    shape: Shape
    tokens: float


def default_workloads(catalog: Catalog) -> list[WorkloadSpec]:
    llama = catalog.models.get("llama-3-8b")
    shape = Shape.of(llama) if llama else Shape("llama-3-8b", 8.03e9, 8.03e9)
    return [
        WorkloadSpec("fine-tune llama-3-8b on 2e9 tokens", shape, 2e9),
        WorkloadSpec("train a 7B model on 1e11 tokens", Shape.bare(7), 1e11),
    ]


@dataclass(frozen=True)
class Efficiency:
    accelerator: str
    value: float
    calibrated: bool
    source: str


def efficiency_for(accelerator: str, calibration: Mapping[str, Calibration]) -> Efficiency:
    """0.4 x the fleet's median measured/expected matmul_bf16 ratio for the accelerator when at
    least 5 reports give one; else 0.4. Calibration as the estimate command reads it."""
    cal = calibration.get(accelerator)
    if cal is not None and cal.reports >= MIN_CALIBRATION_REPORTS:
        return Efficiency(
            accelerator,
            BASE_EFFICIENCY * cal.ratio,
            True,
            f"fleet-calibrated: {BASE_EFFICIENCY} x median matmul_bf16 measured/expected "
            f"{cal.ratio:.3f} over {cal.reports} reports",
        )
    n = cal.reports if cal is not None else 0
    return Efficiency(
        accelerator,
        BASE_EFFICIENCY,
        False,
        f"default {BASE_EFFICIENCY}: {n} fleet report(s) with matmul_bf16, fewer than "
        f"{MIN_CALIBRATION_REPORTS}",
    )


@dataclass(frozen=True)
class WorkloadCost:
    instance_type: str
    accelerator: str
    gpus: int
    region: str
    hourly_usd: float
    hours: float
    cost_usd: float
    usd_per_billion_tokens: float
    efficiency: float
    efficiency_source: str
    formula: str


@dataclass(frozen=True)
class WorkloadResult:
    label: str
    params: float
    tokens: float
    flops: float
    flops_formula: str
    costs: list[WorkloadCost]  # cheapest first
    left_out: list[str]  # instance types not costed, and why


def workload_costs(
    catalog: Catalog,
    specs: Sequence[WorkloadSpec],
    efficiencies: dict[str, Efficiency],
    region: str | None,
) -> list[WorkloadResult]:
    """Each workload on one instance of each GPU type (its cheapest on-demand price in `region`,
    every region when None); left out when the ZeRO-3 model states (16 bytes per parameter
    over the instance's GPUs) exceed 90% of GPU memory or the GPU has no bf16 peak."""
    cheapest: dict[str, Offer] = {}
    for o in on_demand_offers(catalog, region):  # cheapest first: keep each type's first
        cheapest.setdefault(o.instance_type, o)
    results = []
    for spec in specs:
        flops = training_flops(spec.shape, spec.tokens)
        costs, left_out = [], []
        for o in cheapest.values():
            acc = catalog.accelerators[o.accelerator]
            peak = acc.peak_tflops.bf16
            if not peak:
                left_out.append(f"{o.instance_type}: {acc.id} has no dense bf16 peak")
                continue
            states = training_memory(spec.shape, zero_stage=3, ranks=o.gpu_count)[-1].value
            if states > acc.memory_gb * USABLE_MEMORY:
                left_out.append(
                    f"{o.instance_type}: {states:,.0f} GB of model states per GPU, "
                    f"{acc.memory_gb:g} GB GPUs"
                )
                continue
            eff = efficiencies[acc.id]
            hours = compute_hours(flops.value, o.gpu_count, peak, eff.value)
            cost = hours.value * o.hourly_usd
            costs.append(
                WorkloadCost(
                    instance_type=o.instance_type,
                    accelerator=acc.id,
                    gpus=o.gpu_count,
                    region=o.region,
                    hourly_usd=o.hourly_usd,
                    hours=hours.value,
                    cost_usd=cost,
                    usd_per_billion_tokens=cost / (spec.tokens / 1e9),
                    efficiency=eff.value,
                    efficiency_source=eff.source,
                    formula=f"{hours.formula} x ${o.hourly_usd:,.2f}/h",
                )
            )
        costs.sort(key=lambda c: (c.cost_usd, c.instance_type))
        results.append(
            WorkloadResult(
                spec.label,
                spec.shape.active_params,
                spec.tokens,
                flops.value,
                flops.formula,
                costs,
                sorted(left_out),
            )
        )
    return results
