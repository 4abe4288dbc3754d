"""The review's money figures: savings on idle and over-provisioned GPUs, reservation terms for
hosts in use, and cost per unit of work for named jobs across catalog instance types. Pure and
deterministic.

- savings: the cheapest on-demand catalog option whose usable memory (the one headroom rule,
  headroom.usable_memory_gb) holds the observed peak and with enough 16-bit compute for the
  observed busy share; (current - suggested hourly) x HOURS_PER_MONTH;
- job costs: `advisor estimate` (advisor.planning.estimate) of each job on each GPU instance type,
  so the review and the CLI/API answer with the same hours and cost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from advisor.catalog import Catalog, purchase
from advisor.catalog.models import Accelerator, Purchase
from advisor.catalog.queries import offering_price, per_gpu_hour_usd, price_matches, price_usable
from advisor.fleet.porting import porting_note
from advisor.fleet.verification import match_by_name
from advisor.perf.calibration import MIN_FLEET_REPORTS, Calibration, calibrates
from advisor.perf.cost import per_month_usd
from advisor.perf.headroom import gpu_memory_for_gb
from advisor.perf.training import peak16_tflops
from advisor.planning.estimate import Estimate, estimate
from advisor.request import EstimateRequest
from advisor.review.data import GpuUsage, UsageRecord
from advisor.units import BILLION, GB, MIB

GB_PER_MIB = MIB / GB
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
        return per_gpu_hour_usd(self.hourly_usd, self.gpu_count)


def on_demand_offers(catalog: Catalog, region: str | None) -> list[Offer]:
    """Every GPU instance type's on-demand prices (in `region`, or in every region), less the
    prices the catalog's sanity checks flag (Price.flag): savings are not priced on doubt."""
    out = []
    for it in catalog.instance_types.values():
        if it.accelerator is None or it.accelerator not in catalog.accelerators:
            continue
        for p in it.prices:
            if price_matches(p, Purchase.on_demand, region) and price_usable(p, False):
                out.append(Offer(it.id, it.accelerator, it.gpu_count, p.region, p.hourly_usd))
    out.sort(key=lambda o: (o.hourly_usd, o.instance_type, o.region))
    return out


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
    released_monthly_usd: float | None  # idle: what releasing the GPU saves per month
    note: str


def latest_usage(records: Iterable[UsageRecord]) -> list[UsageRecord]:
    """Each host's latest utilisation report, by host name."""
    latest: dict[str, UsageRecord] = {}
    for r in records:
        held = latest.get(r.host)
        if held is None or (r.created_at or "") >= (held.created_at or ""):
            latest[r.host] = r
    return [latest[h] for h in sorted(latest)]


def instance_offer(catalog: Catalog, instance_type: str | None, region: str | None) -> Offer | None:
    """The instance type's on-demand offer (catalog.queries.offering_price of its sound prices)
    in `region`, else in any region; None for an unknown or CPU-only type or no such price."""
    it = catalog.instance_types.get(instance_type or "")
    if it is None or it.accelerator not in catalog.accelerators or not it.gpu_count:
        return None
    assert it.accelerator is not None  # a catalog accelerator's id
    sound = [p for p in it.prices if price_usable(p, False)]
    price = (region is not None and offering_price(sound, Purchase.on_demand, region)) or (
        offering_price(sound, Purchase.on_demand)
    )
    if not price:
        return None
    return Offer(it.id, it.accelerator, it.gpu_count, price.region, price.hourly_usd)


def _current_price(
    catalog: Catalog,
    record: UsageRecord,
    acc: Accelerator | None,
    offers: Sequence[Offer],
    region: str | None,
) -> tuple[Offer | None, str]:
    """The offer the current per-GPU price comes from, and where it comes from in words."""
    it = catalog.instance_types.get(record.instance_type or "")
    if it is not None and it.gpu_count:
        o = instance_offer(catalog, it.id, region)
        if o is not None:
            split = f" / {o.gpu_count} GPUs" if o.gpu_count > 1 else ""
            return (
                o,
                f"instance type {it.id}: ${o.hourly_usd:,.2f}/h on demand in {o.region}{split}",
            )
    if acc is None:
        return None, (
            "unknown: no catalog instance type in the report and the GPU is not in the catalog"
        )
    return _cheapest_per_gpu(record, acc, offers)


def gpu_price(catalog: Catalog, record: UsageRecord, g: GpuUsage) -> tuple[float | None, str]:
    """One GPU's hourly price and where it comes from: the report's instance type, else the
    cheapest per-GPU on-demand price of its accelerator (the review's current price)."""
    acc = catalog.accelerators.get(g.accelerator or "") or match_by_name(catalog, g.name)
    offer, basis = _current_price(catalog, record, acc, on_demand_offers(catalog, None), None)
    return (offer.per_gpu_usd if offer is not None else None), basis


def _cheapest_per_gpu(
    record: UsageRecord, acc: Accelerator, offers: Sequence[Offer]
) -> tuple[Offer | None, str]:
    """The accelerator's cheapest per-GPU on-demand offer, when the report's type has none."""
    same = sorted(
        (o for o in offers if o.accelerator == acc.id),
        key=lambda o: (o.per_gpu_usd, o.instance_type),
    )
    if not same:
        return None, f"no on-demand price of {acc.id} in the catalog"
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


@dataclass(frozen=True)
class _Need:
    """What a replacement GPU must offer: memory for the peak use, compute for the busy share."""

    memory_gb: float
    tflops16: float

    @property
    def words(self) -> str:
        return f">= {self.memory_gb:,.1f} GB, >= {self.tflops16:,.0f} TFLOP/s 16-bit"


def _need(g: GpuUsage, acc: Accelerator | None) -> _Need | str:
    """The GPU's need, or why it is unknown (a note)."""
    peak_gb = _gb(g.memory_used_max_mib)
    busy = g.util_p95_pct if g.util_p95_pct is not None else g.util_mean_pct
    acc_peak = peak16_tflops(acc) if acc is not None else None
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
        return "no suggestion: " + ", ".join(missing) + " unknown"
    return _Need(gpu_memory_for_gb(peak_gb), acc_peak * busy / 100)


def _cheapest_fit(
    catalog: Catalog, offers: Sequence[Offer], where: str | None, need: _Need
) -> Offer | None:
    """The first (cheapest) offer in `where` (any region when None) whose GPU meets `need`."""
    for o in offers:
        if where is not None and o.region != where:
            continue
        cand = catalog.accelerators[o.accelerator]
        peak = peak16_tflops(cand)
        if cand.device_memory_gb >= need.memory_gb and peak is not None and peak >= need.tflops16:
            return o
    return None


def _suggest(
    catalog: Catalog,
    offers: Sequence[Offer],
    where: str | None,
    need: _Need | str,
    current: float | None,
) -> tuple[Offer | None, str]:
    """A cheaper offer that meets the need, or None and a note saying why there is none."""
    if isinstance(need, str):
        return None, need
    found = _cheapest_fit(catalog, offers, where, need)
    if found is None:
        return None, f"nothing in the catalog fits in {where}" if where else "nothing fits"
    if current is not None and found.hourly_usd >= current:
        return None, f"nothing cheaper fits (cheapest fit: {found.instance_type})"
    return found, ""


def _gb(mib: float | None) -> float | None:
    return mib * GB_PER_MIB if mib is not None else None


def _saving(
    catalog: Catalog,
    record: UsageRecord,
    g: GpuUsage,
    offers: Sequence[Offer],
    region: str | None,
) -> Saving:
    acc = catalog.accelerators.get(g.accelerator or "") or match_by_name(catalog, g.name)
    basis_offer, basis = _current_price(catalog, record, acc, offers, region)
    current = basis_offer.per_gpu_usd if basis_offer else None
    # Suggestions come from the review's region, else from the region the current price is in.
    where = region or (basis_offer.region if basis_offer else None)
    need = _need(g, acc)
    suggestion, note = _suggest(catalog, offers, where, need, current)
    if suggestion is not None:  # an option off the current stack says what the move needs
        port = porting_note(catalog, acc.id if acc else g.accelerator, suggestion.accelerator)
        note = "; ".join(n for n in (note, port) if n)
    saving = released = None
    if suggestion is not None and current is not None:
        saving = per_month_usd(current - suggestion.hourly_usd)
    if g.finding == "idle" and current is not None:
        released = per_month_usd(current)
        release = f"idle: releasing it instead saves ${released:,.0f}/month"
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
        memory_peak_gb=_gb(g.memory_used_max_mib),
        memory_total_gb=_gb(g.memory_total_mib),
        needs=need.words if isinstance(need, _Need) else "-",
        current_hourly_usd=current,
        current_basis=basis,
        suggestion=suggestion,
        suggestion_name=catalog.accelerators[suggestion.accelerator].name if suggestion else None,
        monthly_saving_usd=saving,
        released_monthly_usd=released,
        note=note,
    )


def savings(catalog: Catalog, usage: Sequence[UsageRecord], region: str | None) -> list[Saving]:
    """Idle and over-provisioned GPUs (each host's latest report), largest saving first.

    Current price, per GPU: the report's instance type (its on-demand price in `region`, else
    its cheapest region), else the cheapest per-GPU on-demand price of the GPU's accelerator
    (likewise). Suggestion: the cheapest on-demand instance type in `region` (when None: in the
    region the current price is from) whose GPU's usable memory holds the observed peak and whose
    dense 16-bit peak covers the current GPU's peak x its p95 busy share.
    Saving: (current - suggested hourly) x HOURS_PER_MONTH (advisor.perf.cost.per_month_usd).
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


# --- commitments -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Commitment:
    """A host the reports find in use on an instance type sold on a cheaper term in the region
    of its on-demand price: what the term would save a month if the host stays in use."""

    host: str
    instance_type: str
    region: str
    on_demand_hourly_usd: float
    term: str  # the cheapest term's purchase option: reserved_1y or reserved_3y
    term_hourly_usd: float
    monthly_saving_usd: float
    # how steady the use is: of the host's reports, those that find every GPU in use, and the
    # day of its first (a term is owed for a year or three; one report's window is minutes)
    reports_in_use: int
    reports: int
    since: str | None


def _in_use(record: UsageRecord) -> bool:
    """Every GPU of the report in use: none idle or over-provisioned."""
    return bool(record.gpus) and not any(g.finding in SAVING_FINDINGS for g in record.gpus)


def commitments(
    catalog: Catalog, usage: Sequence[UsageRecord], region: str | None
) -> list[Commitment]:
    """Hosts whose latest report finds every GPU in use (none idle or over-provisioned: those
    are savings of another kind, above) on a catalog instance type whose sound prices, in the
    region of its on-demand offer (instance_offer), include a cheaper reservation term: the
    cheapest such term, (on demand - term) x HOURS_PER_MONTH a month. A term is owed every hour
    of it, used or not: the saving holds only while the host stays in use, so each says in how
    many of the host's reports every GPU was in use, since its first; largest first."""
    history: dict[str, list[UsageRecord]] = {}
    for r in usage:
        history.setdefault(r.host, []).append(r)
    out = []
    for record in latest_usage(usage):
        if not _in_use(record):
            continue
        offer = instance_offer(catalog, record.instance_type, region)
        if offer is None:
            continue
        it = catalog.instance_types[offer.instance_type]
        best = purchase.cheapest_term(it.prices, offer.region, offer.hourly_usd)
        if best is None:
            continue
        saving = per_month_usd(offer.hourly_usd - best.hourly_usd)
        mine = history[record.host]
        out.append(
            Commitment(
                record.host,
                it.id,
                offer.region,
                offer.hourly_usd,
                best.purchase.value,
                best.hourly_usd,
                saving,
                reports_in_use=sum(map(_in_use, mine)),
                reports=len(mine),
                since=min((r.created_at for r in mine if r.created_at), default=None),
            )
        )
    out.sort(key=lambda c: (-c.monthly_saving_usd, c.host))
    return out


def finding_counts(usage: Sequence[UsageRecord]) -> dict[str, int]:
    counts = Counter(g.finding or "unclassified" for r in latest_usage(usage) for g in r.gpus)
    return dict(sorted(counts.items()))


# --- cost per unit of work ---------------------------------------------------------------------


@dataclass(frozen=True)
class CostedJob:
    """A named job the review prices on every GPU instance type: a workload profile (whose
    efficiency and GPU count rules apply), a model (preset id, or a bare size) and tokens."""

    label: str
    workload: str  # workload profile id, e.g. fine_tuning
    tokens: float
    model: str | None = None
    params_b: float | None = None

    def request(self, instance_type: str, region: str | None) -> EstimateRequest:
        return EstimateRequest(
            workload=self.workload,
            model=self.model,
            params_b=self.params_b,
            tokens=self.tokens,
            instance_type=instance_type,
            region=region,
        )


def default_jobs(catalog: Catalog) -> list[CostedJob]:
    llama = "llama-3-8b" in catalog.models
    return [
        CostedJob(
            "fine-tune llama-3-8b on 2e9 tokens",
            "fine_tuning",
            2e9,
            model="llama-3-8b" if llama else None,
            params_b=None if llama else 8.03,
        ),
        CostedJob("train a 7B model on 1e11 tokens", "large_scale_training", 1e11, params_b=7),
    ]


@dataclass(frozen=True)
class FleetFactor:
    """The fleet's measured / expected matmul_bf16 for one accelerator, and whether the
    efficiency rule (advisor.perf.calibration) applies it; its GPU link's and its network's
    measured / planned all-reduce likewise (link_factor, network_factor)."""

    accelerator: str
    ratio: float | None
    reports: int
    applied: bool
    link_ratio: float | None = None
    link_reports: int = 0
    link_applied: bool = False
    network_ratio: float | None = None
    network_reports: int = 0
    network_applied: bool = False


def fleet_factors(
    calibration: Mapping[str, Calibration],
    accelerators: Iterable[str],
    min_reports: int = MIN_FLEET_REPORTS,
) -> list[FleetFactor]:
    out = []
    for acc in accelerators:
        cal = calibration.get(acc)
        link = cal.link if cal else None
        network = cal.network if cal else None
        out.append(
            FleetFactor(
                acc,
                cal.ratio if cal else None,
                cal.reports if cal else 0,
                calibrates(cal, min_reports),
                link.ratio if link else None,
                link.reports if link else 0,
                calibrates(link, min_reports),
                network.ratio if network else None,
                network.reports if network else 0,
                calibrates(network, min_reports),
            )
        )
    return out


@dataclass(frozen=True)
class WorkloadCost:
    instance_type: str
    accelerator: str
    nodes: int
    gpus: int
    region: str
    hourly_usd: float  # all nodes together
    hours: float
    cost_usd: float
    usd_per_billion_tokens: float
    efficiency: float
    efficiency_source: str
    formula: str


@dataclass(frozen=True)
class WorkloadResult:
    label: str
    workload: str
    profile_efficiency: float  # the profile's base efficiency, before any fleet calibration
    tokens: float
    flops: float | None
    flops_formula: str
    costs: list[WorkloadCost]  # cheapest first
    left_out: list[str]  # instance types not costed, and why


def workload_costs(
    catalog: Catalog,
    jobs: Sequence[CostedJob],
    calibration: Mapping[str, Calibration],
    region: str | None,
    min_reports: int = MIN_FLEET_REPORTS,
) -> list[WorkloadResult]:
    """Each job estimated (advisor.planning.estimate) on each GPU instance type with an on-demand
    price in `region` (every region when None), at its cheapest such price; left out, with the
    estimate's reason, where it does not fit or has no time."""
    cheapest: dict[str, Offer] = {}
    for o in on_demand_offers(catalog, region):  # cheapest first: keep each type's first
        cheapest.setdefault(o.instance_type, o)
    return [
        _job_costs(catalog, job, list(cheapest), calibration, region, min_reports) for job in jobs
    ]


def _job_costs(
    catalog: Catalog,
    job: CostedJob,
    instance_types: Sequence[str],
    calibration: Mapping[str, Calibration],
    region: str | None,
    min_reports: int,
) -> WorkloadResult:
    costs, left_out = [], []
    flops = None
    for it in instance_types:
        est = estimate(catalog, job.request(it, region), calibration, min_reports)
        flops = flops or next((f for f in est.figures if f.name == "training_flops"), None)
        cost = _cost(est, job.tokens)
        if isinstance(cost, str):
            left_out.append(f"{it}: {cost}")
        else:
            costs.append(cost)
    costs.sort(key=lambda c: (c.cost_usd, c.instance_type))
    return WorkloadResult(
        label=job.label,
        workload=job.workload,
        profile_efficiency=catalog.workloads[job.workload].efficiency,
        tokens=job.tokens,
        flops=flops.value if flops else None,
        flops_formula=flops.formula if flops else "-",
        costs=costs,
        left_out=sorted(left_out),
    )


def _cost(est: Estimate, tokens: float) -> WorkloadCost | str:
    """The estimate as a cost row, or why it gives none."""
    if not est.fits:
        return "; ".join(est.notes)
    hours = next((f for f in est.figures if f.name == "hours"), None)
    if hours is None or est.cost_usd is None or est.hourly_usd is None or est.price is None:
        return f"{est.hardware.accelerator} has no dense 16-bit peak in the catalog"
    nodes = est.hardware.nodes
    per_node = f" ({nodes} nodes x ${est.price.hourly_usd:,.2f}/h)" if nodes > 1 else ""
    return WorkloadCost(
        instance_type=est.hardware.instance_type or "",
        accelerator=est.hardware.accelerator,
        nodes=nodes,
        gpus=est.hardware.gpus,
        region=est.price.region,
        hourly_usd=est.hourly_usd,
        hours=hours.value,
        cost_usd=est.cost_usd,
        usd_per_billion_tokens=est.cost_usd / (tokens / BILLION),
        efficiency=est.efficiency,
        efficiency_source=est.efficiency_source,
        formula=f"{hours.formula} x ${est.hourly_usd:,.2f}/h{per_node}",
    )
