"""`advisor catalog ...`: browse and validate the catalog."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from advisor.catalog import get_entry, list_accelerators, list_instance_types
from advisor.catalog.models import Accelerator, FormFactor, InstanceType, Purchase
from advisor.catalog.queries import Catalog, from_price
from advisor.cli.common import console, emit_json, get_catalog, money
from advisor.cli.tables import Column, print_table
from advisor.did_you_mean import unknown
from advisor.errors import InputError

app = typer.Typer(help="Browse and validate the catalog.", no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for tools.")]


@app.command("accelerators")
def accelerators(
    form_factor: Annotated[
        FormFactor | None, typer.Option(help="datacenter, workstation, edge or cpu")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """List accelerators (GPUs, edge devices, CPU classes)."""
    found = list_accelerators(get_catalog(), form_factor=form_factor)
    if json_out:
        emit_json([a.model_dump(mode="json") for a in found])
        return
    columns = [
        Column("id", key=True),
        Column("name", drop_rank=1),
        Column("form", drop_rank=2),
        Column("memory GB", "right", drop_rank=8),
        Column("GB/s", "right", drop_rank=5),
        Column("bf16 TF", "right", drop_rank=7),
        Column("fp8 TF", "right", drop_rank=4),
        Column("int8 TOPS", "right", drop_rank=6),
        Column("TDP W", "right", drop_rank=3),
    ]
    rows = [
        (
            a.id,
            a.name,
            a.form_factor.value,
            f"{a.memory_gb:g}",
            f"{a.memory_bandwidth_gbps:g}",
            _num(a.peak_tflops.bf16),
            _num(a.peak_tflops.fp8),
            _num(a.peak_tflops.int8),
            f"{a.tdp_w:g}",
        )
        for a in found
    ]
    print_table(console(), f"{len(found)} accelerators", columns, rows)


@app.command("instances")
def instances(
    provider: Annotated[str | None, typer.Option(help="aws, gcp, azure, ...")] = None,
    region: Annotated[str | None, typer.Option(help="Only prices in this region.")] = None,
    accelerator: Annotated[str | None, typer.Option(help="Accelerator id, e.g. h100-sxm.")] = None,
    min_gpus: Annotated[int | None, typer.Option(min=0)] = None,
    max_hourly_usd: Annotated[float | None, typer.Option(min=0)] = None,
    json_out: JsonOpt = False,
) -> None:
    """List instance types with their prices."""
    catalog = get_catalog()
    if provider is not None and provider not in catalog.providers:
        raise InputError(unknown("provider", provider, catalog.providers))
    if region is not None and region not in catalog.regions:
        raise InputError(unknown("region", region, catalog.regions))
    if accelerator is not None and accelerator not in catalog.accelerators:
        raise InputError(unknown("accelerator", accelerator, catalog.accelerators))
    found = list_instance_types(catalog, provider, region, accelerator, min_gpus, max_hourly_usd)
    if json_out:
        emit_json([i.model_dump(mode="json") for i in found])
        return
    columns = [
        Column("id", key=True),
        Column("provider", drop_rank=4),
        Column("accelerator", drop_rank=8),
        Column("GPUs", "right", drop_rank=7),
        Column("vCPUs", "right", drop_rank=1),
        Column("RAM GiB", "right", drop_rank=2),
        Column("link", drop_rank=3),
        Column("net Gbps", "right", drop_rank=0),
        Column("from $/h", "right", drop_rank=9),
        Column("flagged", "right", drop_rank=6),
        Column("regions", drop_rank=5),
    ]
    rows = []
    for i in found:
        rows.append(
            (
                i.id,
                i.provider,
                i.accelerator or f"(cpu) {i.cpu}",
                str(i.gpu_count),
                str(i.vcpus),
                f"{i.memory_gib:g}",
                i.gpu_link.value,
                f"{i.network_gbps:g}",
                _from_cell(i),
                _flagged_cell(i),
                ", ".join(sorted({p.region for p in i.prices})),
            )
        )
    print_table(console(), f"{len(found)} instance types", columns, rows)


@app.command("show")
def show(entry_id: Annotated[str, typer.Argument(metavar="ID")], json_out: JsonOpt = False) -> None:
    """Show one accelerator or instance type."""
    entry = get_entry(get_catalog(), entry_id)
    data = entry.model_dump(mode="json")
    if json_out:
        emit_json(data)
        return
    kind = "accelerator" if isinstance(entry, Accelerator) else "instance type"
    table = Table(title=f"{kind} {entry_id}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    for key, value in data.items():
        table.add_row(key, _cell(key, value))
    console().print(table)


@app.command("validate")
def validate(json_out: JsonOpt = False) -> None:
    """Load and cross-check the catalog; exit 2 listing every problem, warnings on stderr."""
    catalog = get_catalog()
    flagged = _flagged_prices(catalog)
    summary: dict[str, object] = {
        "sources": list(catalog.sources),
        "accelerators": len(catalog.accelerators),
        "instance_types": len(catalog.instance_types),
        "offerings": catalog.offering_count,
        "workloads": len(catalog.workloads),
        "warnings": list(catalog.warnings),
        "flagged_prices": flagged,
    }
    if json_out:
        emit_json(summary)
        return
    # the result goes to stdout; warnings (get_catalog) and errors go to stderr
    out = console()
    out.print(
        f"catalog OK: {summary['accelerators']} accelerators, "
        f"{summary['instance_types']} instance types, {summary['offerings']} priced "
        f"offerings, {summary['workloads']} workloads; {len(flagged)} flagged price(s), "
        "left out of ranking unless --include-flagged-prices",
        highlight=False,
    )
    for f in flagged:
        out.print(
            f"  flagged: {f['instance_type']} {f['region']} {f['purchase']} "
            f"{money(f['hourly_usd'])}: {f['flag']}",
            highlight=False,
            markup=False,
        )


PURCHASE_WORDS = {Purchase.on_demand: "on-demand", Purchase.spot: "spot"}


def _from_cell(it: InstanceType) -> str:
    """The cheapest on-demand price, else the cheapest spot one, saying which (and if flagged)."""
    price = from_price(it.prices)
    if price is None:
        return "-"
    mark = " (flagged)" if price.flag else ""
    return f"{money(price.hourly_usd)} {PURCHASE_WORDS[price.purchase]}{mark}"


def _flagged_cell(it: InstanceType) -> str:
    flagged = sum(p.flag is not None for p in it.prices)
    return f"{flagged} of {len(it.prices)}" if flagged else "-"


def _flagged_prices(catalog: Catalog) -> list[dict[str, Any]]:
    """Every price the sanity checks flag, with why (validate's output)."""
    return [
        {
            "instance_type": it.id,
            "region": p.region,
            "purchase": p.purchase.value,
            "hourly_usd": p.hourly_usd,
            "flag": p.flag,
        }
        for it in sorted(catalog.instance_types.values(), key=lambda i: i.id)
        for p in it.prices
        if p.flag is not None
    ]


def _price_line(p: dict[str, Any]) -> str:
    line = (
        f"{p['region']!s:<16} {p['purchase']!s:<9} {money(p['hourly_usd']):>10}  as of {p['as_of']}"
    )
    return line if p.get("flag") is None else f"{line}\n  FLAGGED: {p['flag']}"


def _cell(key: str, value: object) -> str:
    if key == "prices" and isinstance(value, list):
        return "\n".join(_price_line(p) for p in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items() if v is not None)
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return "-" if value in (None, "") else str(value)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
