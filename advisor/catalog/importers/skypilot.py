"""SkyPilot catalog CSVs (skypilot-org/skypilot-catalog catalogs/v*/<cloud>/vms.csv) -> catalog
instance types. Pure: CSV text in, instance-type entries and a summary out; the CLI
(`advisor catalog import skypilot`) reads, validates with the loader and writes.

Rules:
- the header must be exactly one of the known layouts (below, copied from the real files); a
  column that is unknown or missing, a bad number or an accelerator name the mapping table
  (skypilot_names.py) does not know stops the import with every problem's file, line and column;
- on-demand = the Price column; spot = the MEDIAN of SpotPrice across the region's zones where the
  CSV has zones (never the minimum); GCP prices the VM and its GPUs in separate rows, added per
  zone before the median (the GPU row's InstanceType is empty);
- existing instance types keep every hand-written fact; only vcpus, memory_gib and prices are
  refreshed from the source; new types of the families in skypilot_names.FAMILIES are added with
  facts the CSV does not carry left at conservative defaults and "facts not sourced" in notes.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
import statistics
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from advisor.catalog.importers import skypilot_names as names
from advisor.catalog.models import InstanceType, Price, Purchase
from advisor.errors import InputError

# The header layouts of the real files (skypilot-org/skypilot-catalog):
#   catalogs/v8/aws/vms.csv   (commit 00148f2af3672e2229b4f7bf8157d5a3f36e3c35)
#   catalogs/v8/gcp/vms.csv   (commit 006059e0f18acb1341e22a27751e9f80df6ba92f)
#   catalogs/v6/azure/vms.csv (commit 098741e70562f65d7af1cceb81e33b284f742604)
#   catalogs/v8/oci/vms.csv   (commit 0588751183820cf2dab5c8a89447e8aac9f73fd5; one price per
#                             shape worldwide, SpotPrice empty for bare-metal GPU shapes)
#   catalogs/v8/lambda/vms.csv (commit 0f4070387edc953d7004cff197940e1918a1d6aa; one price per
#                             instance type in every region, no zones, SpotPrice empty)
#   catalogs/v8/runpod/vms.csv (RunPod's secure cloud: Region is a country, AvailabilityZone a
#                             data centre; Price and SpotPrice are per-GPU rates x the GPU count)
LAYOUTS: dict[str, tuple[str, ...]] = {
    "aws": (
        "InstanceType",
        "AcceleratorName",
        "AcceleratorCount",
        "vCPUs",
        "MemoryGiB",
        "GpuInfo",
        "Price",
        "SpotPrice",
        "Region",
        "AvailabilityZone",
        "Arch",
    ),
    "gcp": (
        "InstanceType",
        "vCPUs",
        "MemoryGiB",
        "AcceleratorName",
        "AcceleratorCount",
        "GpuInfo",
        "Region",
        "AvailabilityZone",
        "Price",
        "SpotPrice",
    ),
    "azure": (
        "InstanceType",
        "AcceleratorName",
        "AcceleratorCount",
        "vCPUs",
        "MemoryGiB",
        "GpuInfo",
        "Price",
        "SpotPrice",
        "Region",
        "Generation",
    ),
    "oci": (
        "InstanceType",
        "AcceleratorName",
        "AcceleratorCount",
        "vCPUs",
        "MemoryGiB",
        "GpuInfo",
        "Price",
        "SpotPrice",
        "Region",
        "AvailabilityZone",
    ),
    "lambda": (
        "InstanceType",
        "AcceleratorName",
        "AcceleratorCount",
        "vCPUs",
        "MemoryGiB",
        "Price",
        "Region",
        "GpuInfo",
        "SpotPrice",
    ),
    "runpod": (
        "InstanceType",
        "AcceleratorName",
        "AcceleratorCount",
        "vCPUs",
        "MemoryGiB",
        "Region",
        "SpotPrice",
        "Price",
        "AvailabilityZone",
        "GpuInfo",
    ),
}
OPTIONAL_COLUMNS = frozenset({"Arch", "Generation", "GpuInfo"})
SOURCED = frozenset({Purchase.on_demand.value, Purchase.spot.value})  # what the CSVs price
MOVE_THRESHOLD = 0.10  # a price "moved" when it changed by more than 10%
_MAX_REPORTED = 25


@dataclass(frozen=True)
class Row:
    line: int
    instance_type: str
    accelerator: str
    accelerator_count: float | None
    vcpus: float | None
    memory_gib: float | None
    price: float | None
    spot: float | None
    region: str
    zone: str | None


@dataclass(frozen=True)
class Quote:
    region: str
    purchase: Purchase
    hourly_usd: float
    basis: str  # how the figure was read from the CSV


@dataclass
class SourceType:
    """One instance type as the CSV prices it."""

    id: str
    accelerator: str  # SkyPilot's name, "" for none
    gpu_count: int
    vcpus: int
    memory_gib: float
    quotes: list[Quote] = field(default_factory=list)
    # Why the source has no whole price for it (a component row priced 0), else None.
    incomplete: str | None = None


@dataclass
class Summary:
    provider: str
    source: str
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)
    # (id, region, purchase, old $/h, new $/h)
    moved: list[tuple[str, str, str, float, float]] = field(default_factory=list)
    # SkyPilot name -> why it was not imported (not in the table's ids, id missing in catalog)
    unknown_accelerators: dict[str, str] = field(default_factory=dict)
    # id -> why the source gives it no whole price (kept in the file with no prices)
    incomplete: dict[str, str] = field(default_factory=dict)
    prices: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "source": self.source,
            "added": self.added,
            "removed": self.removed,
            "refreshed": self.refreshed,
            "moved_over_10pct": [
                {"id": i, "region": r, "purchase": p, "old_hourly_usd": o, "new_hourly_usd": n}
                for i, r, p, o, n in self.moved
            ],
            "unknown_accelerators": self.unknown_accelerators,
            "incomplete": self.incomplete,
            "prices": self.prices,
        }


# --- parsing ---------------------------------------------------------------------------------


def parse_csv(text: str, file: str, provider: str) -> list[Row]:
    """Every row of a SkyPilot vms.csv; InputError listing each bad header, number or name."""
    layout = LAYOUTS.get(provider)
    if layout is None:
        valid = ", ".join(LAYOUTS)
        raise InputError(f"{file}: no SkyPilot layout for provider {provider!r}; valid: {valid}")
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if not header:
        raise InputError(f"{file}: line 1: empty file, expected the header {','.join(layout)}")
    _check_header(header, layout, file)
    col = {name: index for index, name in enumerate(header)}
    problems: list[str] = []
    rows: list[Row] = []
    for line, cells in enumerate(reader, start=2):
        if not cells:
            continue
        if len(cells) != len(header):
            problems.append(f"{file}: line {line}: {len(cells)} cells, header has {len(header)}")
            continue
        row = _row(cells, col, line, file, problems)
        if row is not None:
            rows.append(row)
    if problems:
        raise InputError(_problem_text(problems))
    return rows


def _check_header(header: list[str], layout: tuple[str, ...], file: str) -> None:
    problems = [
        f"{file}: line 1, column {index + 1}: unknown column {name!r}; expected {','.join(layout)}"
        for index, name in enumerate(header)
        if name not in layout
    ]
    missing = [n for n in layout if n not in header and n not in OPTIONAL_COLUMNS]
    problems += [f"{file}: line 1: missing column {name!r}" for name in missing]
    if problems:
        raise InputError(_problem_text(problems))


def _row(
    cells: list[str], col: Mapping[str, int], line: int, file: str, problems: list[str]
) -> Row | None:
    before = len(problems)

    def number(name: str) -> float | None:
        raw = cells[col[name]].strip()
        if not raw:
            return None
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not value >= 0 or value == float("inf"):
            where = f"{file}: line {line}, column {col[name] + 1} ({name})"
            problems.append(f"{where}: {raw!r} is not a number >= 0")
            return None
        return value

    accelerator = cells[col["AcceleratorName"]].strip()
    if accelerator and not _known_name(accelerator):
        where = f"{file}: line {line}, column {col['AcceleratorName'] + 1} (AcceleratorName)"
        problems.append(
            f"{where}: unknown accelerator {accelerator!r}: add it to "
            "advisor/catalog/importers/skypilot_names.py (ACCELERATORS or NOT_IN_CATALOG)"
        )
    row = Row(
        line=line,
        instance_type=cells[col["InstanceType"]].strip(),
        accelerator=accelerator,
        accelerator_count=number("AcceleratorCount"),
        vcpus=number("vCPUs"),
        memory_gib=number("MemoryGiB"),
        price=number("Price"),
        spot=number("SpotPrice"),
        region=cells[col["Region"]].strip(),
        zone=cells[col["AvailabilityZone"]].strip() or None if "AvailabilityZone" in col else None,
    )
    return row if len(problems) == before else None


def _known_name(name: str) -> bool:
    return (
        name in names.ACCELERATORS
        or any(name in table for table in names.OVERRIDES.values())
        or name in names.NOT_IN_CATALOG
        or name.startswith(names.NOT_IN_CATALOG_PREFIXES)
    )


def _problem_text(problems: list[str]) -> str:
    shown = problems[:_MAX_REPORTED]
    more = len(problems) - len(shown)
    tail = f"\n  ... and {more} more" if more else ""
    return f"bad SkyPilot CSV ({len(problems)} problem(s)):\n  " + "\n  ".join(shown) + tail


# --- from rows to priced instance types ------------------------------------------------------


def source_types(
    provider: str, rows: Iterable[Row], wanted: Collection[str]
) -> dict[str, SourceType]:
    """The instance types the CSV prices, restricted to `wanted` ids (None-free)."""
    if provider == "gcp":
        return _gcp_types(list(rows), wanted)
    zone_ok = _zone_filter(provider)
    grouped: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if row.instance_type in wanted and zone_ok(row.zone):
            grouped[row.instance_type].append(row)
    found: dict[str, SourceType] = {}
    for type_id, group in grouped.items():
        first = group[0]
        by_region: dict[str, list[tuple[str | None, float | None, float | None]]] = defaultdict(
            list
        )
        spot_kept = provider not in names.SPOT_NOT_IMPORTED
        for row in group:
            by_region[row.region].append((row.zone, row.price, row.spot if spot_kept else None))
        found[type_id] = SourceType(
            id=type_id,
            accelerator=first.accelerator,
            gpu_count=_count(first.accelerator_count),
            vcpus=int(first.vcpus or 0),
            memory_gib=first.memory_gib or 0.0,
            quotes=[q for r, zones in sorted(by_region.items()) for q in _quotes(r, zones, "")],
        )
    return found


def _zone_filter(provider: str) -> Any:
    if provider != "aws":
        return lambda zone: True
    pattern = re.compile(names.AWS_REGION_ZONE_PATTERN)
    return lambda zone: zone is None or bool(pattern.match(zone))


def _count(value: float | None) -> int:
    """GPU count; a fractional GPU (Azure NV A10 v5 shares) reads as 0 and is not imported."""
    if value is None or value != int(value):
        return 0
    return int(value)


def _quotes(
    region: str, zones: list[tuple[str | None, float | None, float | None]], parts: str
) -> list[Quote]:
    """On-demand and spot for one region from its per-zone (zone, price, spot) figures."""
    quotes: list[Quote] = []
    on_demand = [p for _, p, _ in zones if p]
    spot = [s for _, _, s in zones if s]
    has_zones = any(z for z, _, _ in zones)
    if on_demand:
        basis = "Price column" + (f" ({parts})" if parts else "")
        if len(set(on_demand)) > 1:
            basis += f", median of {len(on_demand)} zones"
        quotes.append(
            Quote(region, Purchase.on_demand, _money(statistics.median(on_demand)), basis)
        )
    if spot:
        basis = "SpotPrice column" + (f" ({parts})" if parts else "")
        if has_zones:
            basis += f", median of {len(spot)} zone(s)"
        median = statistics.median(spot)
        if on_demand and median > statistics.median(on_demand):
            # Spot is never charged above on-demand (AWS: "you will never pay more than the
            # On-Demand price", https://aws.amazon.com/ec2/spot/pricing/); the CSV's SpotPrice
            # carries fewer decimals (27.433000 vs Price 27.43298), which the cap removes.
            median = statistics.median(on_demand)
            basis += ", capped at the on-demand price"
        quotes.append(Quote(region, Purchase.spot, _money(median), basis))
    return quotes


def _money(value: float) -> float:
    return round(value, 6)  # the CSVs carry at most 6 decimals; drops float-sum noise


def gcp_gpus(type_id: str) -> tuple[str, str, int] | None:
    """(VM row id, GPU row name, GPU count) of a GCP type priced with GPU rows, else None."""
    if type_id in names.GCP_ATTACHED:
        return names.GCP_ATTACHED[type_id]
    for prefix, gpu in names.GCP_MACHINE_GPUS.items():
        if type_id.startswith(prefix):
            count = names.GCP_GPU_COUNTS.get(type_id)
            match = re.search(r"-(\d+)g(?:-|$)", type_id)
            if count is None and match:
                count = int(match.group(1))
            return (type_id, gpu, count) if count else None
    return None


def _gcp_types(rows: list[Row], wanted: Collection[str]) -> dict[str, SourceType]:
    gpu_rows: dict[tuple[str, int, str, str | None], Row] = {}
    vm_rows: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if not row.instance_type and row.accelerator:
            gpu_rows[(row.accelerator, _count(row.accelerator_count), row.region, row.zone)] = row
        elif row.instance_type:
            vm_rows[row.instance_type].append(row)
    rows_by_name: dict[str, list[Row]] = defaultdict(list)
    for key, row in gpu_rows.items():
        rows_by_name[key[0]].append(row)
    found: dict[str, SourceType] = {}
    for type_id in wanted:
        tpu = tpu_slice(type_id)
        if tpu is not None:
            priced = _tpu_type(type_id, tpu[1], rows_by_name.get(type_id, []))
        else:
            priced = _gcp_vm_type(type_id, vm_rows, gpu_rows)
        if priced is not None:
            found[type_id] = priced
    return found


def _gcp_vm_type(
    type_id: str,
    vm_rows: Mapping[str, list[Row]],
    gpu_rows: Mapping[tuple[str, int, str, str | None], Row],
) -> SourceType | None:
    """A GCP machine priced by its VM rows plus, zone by zone, the rows of its GPUs."""
    spec = gcp_gpus(type_id)
    vm_id, gpu, count = spec if spec else (type_id, "", 0)
    group = vm_rows.get(vm_id)
    if not group:
        return None
    by_region: dict[str, list[tuple[str | None, float | None, float | None]]] = defaultdict(list)
    for vm in group:
        if not gpu:
            by_region[vm.region].append((vm.zone, vm.price, vm.spot))
            continue
        g = gpu_rows.get((gpu, count, vm.region, vm.zone))
        if g is None:
            continue  # no GPU price in that zone: the machine cannot be priced there
        by_region[vm.region].append((vm.zone, _whole(vm.price, g.price), _whole(vm.spot, g.spot)))
    parts = f"VM row {vm_id} + GPU row {gpu} x{count}" if gpu else ""
    quotes = [q for r, zones in sorted(by_region.items()) for q in _quotes(r, zones, parts)]
    first = group[0]
    priced = SourceType(type_id, gpu, count, int(first.vcpus or 0), first.memory_gib or 0.0, quotes)
    if gpu and not quotes:
        # Every zone lacked one component (the dataset's a4-highgpu-8g VM rows are 0.0: the GPU
        # rows alone are not what the machine costs). Kept unpriced and reported, never offered.
        priced.incomplete = f"VM row {vm_id} priced 0 (or GPU row {gpu} x{count} missing)"
    return priced if quotes or priced.incomplete else None


def tpu_slice(type_id: str) -> tuple[str, int] | None:
    """(catalog accelerator id, chips) of a GCP TPU slice id such as tpu-v5p-8, else None."""
    for prefix, (accelerator, cores_per_chip) in names.GCP_TPU_SLICES.items():
        suffix = type_id.removeprefix(prefix)
        if suffix != type_id and suffix.isdigit():
            return accelerator, max(1, int(suffix) // cores_per_chip)
    return None


def _tpu_type(type_id: str, chips: int, rows: list[Row]) -> SourceType | None:
    """A TPU slice priced by its accelerator rows (no VM row: the host is in the price)."""
    by_region: dict[str, list[tuple[str | None, float | None, float | None]]] = defaultdict(list)
    for row in rows:
        by_region[row.region].append((row.zone, row.price, row.spot))
    parts = f"accelerator row {type_id}"
    quotes = [q for r, zones in sorted(by_region.items()) for q in _quotes(r, zones, parts)]
    return SourceType(type_id, type_id, chips, 0, 0.0, quotes) if quotes else None


def _whole(vm: float | None, gpus: float | None) -> float | None:
    """A machine's price from its VM and GPU components; None when either is missing or priced
    0 (a component alone is never what the machine costs, so it is never an offering)."""
    return vm + gpus if vm and gpus else None


# --- merging into the catalog's instance types -----------------------------------------------


def accelerator_id(provider: str, type_id: str, name: str) -> str | None:
    """The catalog id the mapping table gives SkyPilot's `name` for this type, None if none."""
    for (prov, prefix), table in names.OVERRIDES.items():
        if prov == provider and type_id.startswith(prefix) and name in table:
            return table[name]
    tpu = tpu_slice(name) if provider == "gcp" else None
    return tpu[0] if tpu is not None else names.ACCELERATORS.get(name)


def wanted_ids(
    provider: str, rows: Iterable[Row], existing: Iterable[str], families: Collection[str]
) -> set[str]:
    """Existing ids plus every id of the imported families the CSV names."""
    wanted = set(existing)
    for row in rows:
        if row.instance_type and row.instance_type.startswith(tuple(families)):
            wanted.add(row.instance_type)
    return wanted


def merge(
    provider: str,
    existing: list[dict[str, Any]],
    found: Mapping[str, SourceType],
    *,
    known_accelerators: Collection[str],
    as_of: dt.date,
    source: str,
    scope: tuple[str, ...] = (),
) -> tuple[list[dict[str, Any]], Summary]:
    """The provider's instance-type entries after the import, and what changed.

    `existing` are the raw entries of the provider's file (hand-written facts are kept as they
    are, field order included); `known_accelerators` are the loaded catalog's accelerator ids.
    `scope`: id prefixes the source covers (a snapshot of some families); entries outside it are
    kept as they are, neither refreshed nor removed. Empty: the source covers the provider.
    """
    summary = Summary(provider, source)
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in existing:
        type_id = str(entry.get("id"))
        seen.add(type_id)
        if entry.get("provider") != provider or not type_id.startswith(scope or ("",)):
            entries.append(entry)
            continue
        priced = found.get(type_id)
        if priced is None:
            summary.removed.append(type_id)
            continue
        if priced.incomplete:
            summary.incomplete[type_id] = priced.incomplete
        refreshed = _refresh(entry, priced, as_of, source)
        summary.moved += _moves(type_id, entry.get("prices") or [], refreshed["prices"])
        summary.refreshed.append(type_id)
        entries.append(refreshed)
    for type_id in sorted(set(found) - seen):
        if not type_id.startswith(scope or ("",)):
            continue
        if found[type_id].incomplete:
            summary.incomplete[type_id] = str(found[type_id].incomplete)
            continue
        new = _new_entry(provider, found[type_id], known_accelerators, as_of, source, summary)
        if new is not None:
            summary.added.append(type_id)
            entries.append(_with_host(new, existing))
    for entry in entries:
        InstanceType.model_validate(entry)  # every written entry goes through the model
    summary.prices = sum(len(e.get("prices") or []) for e in entries)
    return entries, summary


def _price_dicts(priced: SourceType, as_of: dt.date, source: str) -> list[dict[str, Any]]:
    return [
        Price(
            region=q.region,
            purchase=q.purchase,
            hourly_usd=q.hourly_usd,
            as_of=as_of,
            source=f"{source}: {q.basis}",
        ).model_dump(mode="json")
        for q in priced.quotes
    ]


def _refresh(
    entry: dict[str, Any], priced: SourceType, as_of: dt.date, source: str
) -> dict[str, Any]:
    refreshed = dict(entry)  # every field the CSV does not carry stays as written
    if priced.vcpus:
        refreshed["vcpus"] = priced.vcpus
    if priced.memory_gib:
        refreshed["memory_gib"] = priced.memory_gib
    # SkyPilot prices on demand and spot only: a committed price written beside them (reserved,
    # a Capacity Block; each with its own source and date) is kept, not dropped by the refresh
    committed = [p for p in entry.get("prices") or [] if p.get("purchase") not in SOURCED]
    refreshed["prices"] = _price_dicts(priced, as_of, source) + committed
    return refreshed


def _moves(
    type_id: str, old: list[dict[str, Any]], new: list[dict[str, Any]]
) -> list[tuple[str, str, str, float, float]]:
    before = {(str(p["region"]), str(p["purchase"])): float(p["hourly_usd"]) for p in old}
    moved = []
    for price in new:
        key = (str(price["region"]), str(price["purchase"]))
        was = before.get(key)
        now = float(price["hourly_usd"])
        if was and abs(now / was - 1) > MOVE_THRESHOLD:
            moved.append((type_id, key[0], key[1], was, now))
    return moved


def _new_entry(
    provider: str,
    priced: SourceType,
    known: Collection[str],
    as_of: dt.date,
    source: str,
    summary: Summary,
) -> dict[str, Any] | None:
    """A new GPU instance type, or None (reported) when its accelerator has no catalog id."""
    if not priced.accelerator or not priced.gpu_count:
        return None  # CPU-only and fractional-GPU types need hand-written facts (cpu class)
    accel = accelerator_id(provider, priced.id, priced.accelerator)
    if accel is None or accel not in known:
        why = "no catalog id in the mapping table" if accel is None else f"{accel!r} not in catalog"
        summary.unknown_accelerators[priced.accelerator] = why
        return None
    multi = priced.gpu_count > 1
    return {
        "id": priced.id,
        "provider": provider,
        "accelerator": accel,
        "gpu_count": priced.gpu_count,
        "vcpus": priced.vcpus,
        "memory_gib": priced.memory_gib,
        "gpu_link": "pcie" if multi else "none",
        "interconnect_gb_s": 0,
        "network_gbps": 0,
        "prices": _price_dicts(priced, as_of, source),
        "notes": (
            "facts not sourced: gpu_link, interconnect_gb_s and network_gbps are the importer's "
            "conservative defaults (PCIe between GPUs, no scale-out network), not the provider's "
            "figures"
        ),
        "source": f"vCPU/RAM/GPU count from {source}",
    }


HOST_FACTS = ("system", "cpu")  # what every size of a family shares: the host platform


def family(type_id: str) -> str:
    """The instance family an id belongs to: the part before the size (AWS `p5.48xlarge` ->
    `p5`, GCP `a2-highgpu-8g` -> `a2-highgpu`, `g2-standard-24` -> `g2-standard`, Azure
    `Standard_NC16as_T4_v3` -> `Standard_NC_T4_v3`)."""
    if "." in type_id:
        return type_id.split(".", 1)[0]
    if type_id.startswith("Standard_"):  # Azure: Standard_NC16as_T4_v3 -> Standard_NC_T4_v3
        return re.sub(r"^(Standard_[A-Z]+)\d+[a-z]*", r"\1", type_id)
    return re.sub(r"-(\d+g(-[a-z]+)?|\d+)$", "", type_id)


def _with_host(new: dict[str, Any], existing: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """A new size takes the host facts (reference system or CPU class, used for node power) of an
    existing size of the same family with the same accelerator: the provider builds every size of
    a family on one host platform. Said in notes; unchanged when no sibling has them."""
    for sibling in existing:
        same = family(str(sibling.get("id"))) == family(new["id"])
        if not same or sibling.get("accelerator") != new["accelerator"]:
            continue
        facts = {k: sibling[k] for k in HOST_FACTS if sibling.get(k)}
        if facts:
            said = ", ".join(f"{k}: {v}" for k, v in facts.items())
            notes = f"{said} as for {sibling['id']} (same family, same host platform). "
            return {**new, **facts, "notes": notes + str(new["notes"])}
    return new


def unknown_names(rows: Iterable[Row], provider: str, known: Collection[str]) -> dict[str, str]:
    """Every accelerator name in the CSV that cannot become a catalog offering, and why."""
    found: dict[str, str] = {}
    for row in rows:
        name = row.accelerator
        if not name or name in found:
            continue
        accel = accelerator_id(provider, row.instance_type, name)
        if accel is None:
            found[name] = "no catalog id in the mapping table"
        elif accel not in known:
            found[name] = f"{accel!r} not in catalog"
    return found


def render_yaml(
    provider: str, entries: list[dict[str, Any]], source: str, scope: tuple[str, ...] = ()
) -> str:
    """The provider's instance file, with a header saying where it came from."""
    import textwrap

    covered = (
        f"Only the families {', '.join(scope)} were imported from it; the other entries are "
        "kept as they were written (each price's `source` says where it came from). "
        if scope
        else ""
    )
    spot = (
        f"spot not imported ({names.SPOT_NOT_IMPORTED[provider]})"
        if provider in names.SPOT_NOT_IMPORTED
        else "spot = MEDIAN of SpotPrice over the region's zones (never the minimum)"
    )
    text = (
        f"{provider} instance types. Written by `advisor catalog import skypilot` from "
        f"{source}. {covered}Imported prices: on-demand = Price column; {spot}. "
        "Hand-written facts (gpu_link, "
        "interconnect, network, system, cpu, notes, ...) are kept by the importer; "
        "catalog/README.md says how to refresh."
    )
    header = "".join(f"# {line}\n" for line in textwrap.wrap(text, 98))
    return header + entries_yaml(entries)


def entries_yaml(entries: list[dict[str, Any]]) -> str:
    """A provider file's entries as every importer writes them, below its header comment: the
    YAML dumper keeps no comment, so a fact lives in a field (`notes`, `source`) or is lost on
    the next import."""
    import yaml

    return yaml.safe_dump(
        {"instance_types": entries}, sort_keys=False, width=100, allow_unicode=True
    )
