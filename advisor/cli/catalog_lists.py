"""`advisor catalog models|workloads|regions` and the catalog's CSV rows.

CSV is for tools: one fact per column, numbers as plain numbers (no currency sign, no thousands
separator, no float noise such as 16.200000000000003), an empty cell for "none".
"""

from __future__ import annotations

from collections import defaultdict
from typing import Annotated

import typer

from advisor.catalog.models import Accelerator, InstanceType
from advisor.catalog.purchase import TERMS
from advisor.catalog.queries import Catalog, GpuOffer, from_price
from advisor.cli.common import console, emit_json, get_catalog
from advisor.cli.tables import Column, Format, FormatOpt, output_format, print_table, write_csv
from advisor.did_you_mean import unknown
from advisor.errors import InputError

JsonOpt = Annotated[bool, typer.Option("--json", "-j", help="Print JSON for tools.")]


def plain(value: float | int | str | None) -> str:
    """A CSV cell: '' for None, an integer without '.0', a float rounded to 6 significant
    decimals (prices and datasheet figures never carry more)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        value = round(value, 6)
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


ACCELERATOR_CSV = (
    "id",
    "name",
    "form_factor",
    "memory_gb",
    "memory_bandwidth_gb_s",
    "bf16_tflops",
    "fp8_tflops",
    "int8_tops",
    "tdp_w",
)


def accelerator_csv(found: list[Accelerator]) -> None:
    write_csv(
        ACCELERATOR_CSV,
        [
            [
                a.id,
                a.name,
                a.form_factor.value,
                plain(a.memory_gb),
                plain(a.memory_bandwidth_gbps),
                plain(a.peak_tflops.bf16),
                plain(a.peak_tflops.fp8),
                plain(a.peak_tflops.int8),
                plain(a.tdp_w),
            ]
            for a in found
        ],
    )


INSTANCE_CSV = (
    "id",
    "provider",
    "accelerator",
    "cpu",
    "gpu_count",
    "vcpus",
    "memory_gib",
    "gpu_link",
    "network_gbps",
    "from_hourly_usd",
    "from_purchase",
    "from_flagged",
    "price_count",
    "flagged_price_count",
    "region_count",
    "regions",
)


def instance_csv(found: list[InstanceType]) -> None:
    rows = []
    for i in found:
        price = from_price(i.prices)
        regions = sorted({p.region for p in i.prices})
        rows.append(
            [
                i.id,
                i.provider,
                plain(i.accelerator),
                plain(i.cpu),
                plain(i.gpu_count),
                plain(i.vcpus),
                plain(i.memory_gib),
                i.gpu_link.value,
                plain(i.network_gbps),
                plain(price.hourly_usd if price else None),
                price.purchase.value if price else "",
                "" if price is None else str(price.flag is not None).lower(),
                plain(len(i.prices)),
                plain(sum(p.flag is not None for p in i.prices)),
                plain(len(regions)),
                ";".join(regions),  # one list of one kind: region ids, ';'-separated
            ]
        )
    write_csv(INSTANCE_CSV, rows)


GPU_CSV = (
    "accelerator",
    "provider",
    "gpu_count",
    "on_demand_hourly_usd",
    "on_demand_instance_type",
    "on_demand_region",
    "spot_hourly_usd",
    "spot_instance_type",
    "spot_region",
    "reserved_1y_hourly_usd",
    "reserved_1y_instance_type",
    "reserved_1y_region",
    "reserved_3y_hourly_usd",
    "reserved_3y_instance_type",
    "reserved_3y_region",
    "region_count",
)


def gpu_csv(found: list[GpuOffer]) -> None:
    write_csv(
        GPU_CSV,
        [
            [
                r.accelerator,
                r.provider,
                plain(r.gpus),
                plain(r.on_demand.hourly_usd if r.on_demand else None),
                plain(r.on_demand_type if r.on_demand else None),
                plain(r.on_demand.region if r.on_demand else None),
                plain(r.spot.hourly_usd if r.spot else None),
                plain(r.spot_type if r.spot else None),
                plain(r.spot.region if r.spot else None),
                *_reserved_cells(r),
                plain(len(r.regions)),
            ]
            for r in found
        ],
    )


def _reserved_cells(r: GpuOffer) -> list[str]:
    cells = []
    for term in TERMS:
        found = r.reserved_at(term)
        type_id, price = found if found else (None, None)
        cells += [
            plain(price.hourly_usd if price else None),
            plain(type_id),
            plain(price.region if price else None),
        ]
    return cells


def _emit(title: str, columns: list[Column], rows: list[list[str]], shape: Format) -> None:
    if shape is Format.csv:
        write_csv([c.header for c in columns], rows)
    else:
        print_table(console(), title, columns, rows)


def models(json_out: JsonOpt = False, fmt: FormatOpt = None) -> None:
    """List the model presets --model takes (architecture and source in `catalog show`-like
    JSON with --json)."""
    catalog = get_catalog()
    found = sorted(catalog.models.values(), key=lambda m: (m.params_b, m.id))
    shape = output_format(fmt, json_out)
    if shape is Format.json:
        emit_json([m.model_dump(mode="json") for m in found])
        return
    columns = [
        Column("id", key=True),
        Column("name", drop_rank=1),
        Column("params_b", "right", key=True),
        Column("active_params_b", "right", drop_rank=2),
        Column("layers", "right", drop_rank=3),
        Column("context_tokens", "right", drop_rank=4),
        Column("attention", drop_rank=5),
    ]
    rows = [
        [
            m.id,
            m.name,
            plain(m.params_b),
            plain(m.active_params_b),
            plain(m.layers),
            plain(m.context_length),
            m.attention,
        ]
        for m in found
    ]
    _emit(f"{len(found)} model presets (--model)", columns, rows, shape)


def workloads(json_out: JsonOpt = False, fmt: FormatOpt = None) -> None:
    """List the workloads --workload takes, with their default objective and GPU count."""
    catalog = get_catalog()
    found = sorted(catalog.workloads.values(), key=lambda w: w.id)
    shape = output_format(fmt, json_out)
    if shape is Format.json:
        emit_json([w.model_dump(mode="json") for w in found])
        return
    columns = [
        Column("id", key=True),
        Column("job", drop_rank=3),
        Column("objective", drop_rank=2),
        Column("default_gpus", "right", drop_rank=4),
        Column("multi_node", drop_rank=5),
        Column("description", drop_rank=1),
    ]
    rows = [
        [
            w.id,
            w.job,
            w.default_objective,
            plain(w.default_gpu_count),
            str(w.scale_out).lower(),
            w.description,
        ]
        for w in found
    ]
    _emit(f"{len(found)} workloads (--workload)", columns, rows, shape)


def regions(
    provider: Annotated[
        str | None, typer.Option("--provider", "-P", help="aws, gcp, azure")
    ] = None,
    json_out: JsonOpt = False,
    fmt: FormatOpt = None,
) -> None:
    """List the regions --region takes: provider, priced instance types and offerings."""
    catalog = get_catalog()
    if provider is not None and provider not in catalog.providers:
        raise InputError(unknown("provider", provider, catalog.providers), field="provider")
    found = region_rows(catalog, provider)
    shape = output_format(fmt, json_out)
    if shape is Format.json:
        emit_json(
            [
                {"region": r, "provider": p, "instance_types": t, "offerings": o}
                for r, p, t, o in found
            ]
        )
        return
    columns = [
        Column("region", key=True),
        Column("provider", key=True),
        Column("instance_types", "right", drop_rank=2),
        Column("offerings", "right", drop_rank=1),
    ]
    rows = [[r, p, plain(t), plain(o)] for r, p, t, o in found]
    _emit(f"{len(found)} regions (--region)", columns, rows, shape)


def region_rows(catalog: Catalog, provider: str | None) -> list[tuple[str, str, int, int]]:
    """(region, provider, instance types priced there, priced offerings there), by provider
    then region."""
    types: dict[tuple[str, str], set[str]] = defaultdict(set)
    offerings: dict[tuple[str, str], int] = defaultdict(int)
    for it in catalog.instance_types.values():
        if provider is not None and it.provider != provider:
            continue
        for p in it.prices:
            types[(it.provider, p.region)].add(it.id)
            offerings[(it.provider, p.region)] += 1
    return [(r, p, len(types[(p, r)]), offerings[(p, r)]) for p, r in sorted(types)]
