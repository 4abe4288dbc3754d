"""`advisor catalog ...`: browse and validate the catalog."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from advisor.catalog import get_entry, list_accelerators, list_instance_types, shipped_catalog_dir
from advisor.catalog.models import Accelerator, FormFactor, InstanceType, Price, Purchase
from advisor.catalog.purchase import TERMS
from advisor.catalog.queries import (
    Catalog,
    GpuOffer,
    check_region,
    from_price,
    gpu_grid,
    stale_prices,
)
from advisor.catalog.settings import CatalogSettings
from advisor.cli import catalog_lists
from advisor.cli.common import console, emit_json, get_catalog, money
from advisor.cli.tables import (
    Column,
    Format,
    FormatOpt,
    WideOpt,
    output_format,
    print_table,
)
from advisor.did_you_mean import unknown
from advisor.errors import InputError

app = typer.Typer(help="Browse and validate the catalog.", no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", "-j", help="Print JSON for tools.")]

if TYPE_CHECKING:  # the importers load with an import command only
    from advisor.cli.catalog_import import ImportResult

import_app = typer.Typer(help="Import prices from an external dataset.", no_args_is_help=True)
app.add_typer(import_app, name="import")
app.command("models")(catalog_lists.models)
app.command("workloads")(catalog_lists.workloads)
app.command("regions")(catalog_lists.regions)


@app.command("accelerators")
def accelerators(
    form_factor: Annotated[
        FormFactor | None, typer.Option(help="datacenter, workstation, edge or cpu")
    ] = None,
    json_out: JsonOpt = False,
    fmt: FormatOpt = None,
) -> None:
    """List accelerators (GPUs, edge devices, CPU classes)."""
    found = list_accelerators(get_catalog(), form_factor=form_factor)
    shape = output_format(fmt, json_out)
    if shape is Format.json:
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
            "host memory" if a.memory_gb is None else f"{a.memory_gb:g}",
            f"{a.memory_bandwidth_gbps:g}",
            _num(a.peak_tflops.bf16),
            _num(a.peak_tflops.fp8),
            _num(a.peak_tflops.int8),
            f"{a.tdp_w:g}",
        )
        for a in found
    ]
    if shape is Format.csv:
        catalog_lists.accelerator_csv(found)
        return
    print_table(console(), f"{len(found)} accelerators", columns, rows)


@app.command("instances")
def instances(
    provider: Annotated[str | None, typer.Option(help="aws, gcp, azure, ...")] = None,
    region: Annotated[
        str | None,
        typer.Option(
            "--region",
            "-r",
            help="Only prices in this region, several (us-east-1,eu-west-1) or a prefix "
            "(europe-*).",
        ),
    ] = None,
    accelerator: Annotated[str | None, typer.Option(help="Accelerator id, e.g. h100-sxm.")] = None,
    min_gpus: Annotated[int | None, typer.Option(min=0)] = None,
    max_hourly_usd: Annotated[float | None, typer.Option(min=0)] = None,
    json_out: JsonOpt = False,
    fmt: FormatOpt = None,
    wide: WideOpt = False,
) -> None:
    """List instance types with their prices (--wide: every column, the regions by name)."""
    catalog = get_catalog()
    if provider is not None and provider not in catalog.providers:
        raise InputError(unknown("provider", provider, catalog.providers))
    if region is not None:
        check_region(region, catalog.regions)
    if accelerator is not None and accelerator not in catalog.accelerators:
        raise InputError(unknown("accelerator", accelerator, catalog.accelerators))
    found = list_instance_types(catalog, provider, region, accelerator, min_gpus, max_hourly_usd)
    shape = output_format(fmt, json_out)
    if shape is Format.json:
        emit_json([i.model_dump(mode="json") for i in found])
        return
    # (column, shown by default): the default is what tells types apart and what they cost; the
    # region list (a paragraph per type: 2,816 lines in a pipe) is --wide's, its count is not.
    columns = [
        (Column("id", key=True), True),
        (Column("provider", drop_rank=4), True),
        (Column("accelerator", drop_rank=8), True),
        (Column("GPUs", "right", drop_rank=7), True),
        (Column("vCPUs", "right", drop_rank=1), False),
        (Column("RAM GiB", "right", drop_rank=2), False),
        (Column("link", drop_rank=3), False),
        (Column("net Gbps", "right", drop_rank=0), False),
        (Column("from $/h", "right", drop_rank=9), True),
        (Column("flagged", "right", drop_rank=6), True),  # doubted prices: a trust signal
        (Column("regions", "right", drop_rank=5), True),
        (Column("region names", drop_rank=5), False),
    ]
    rows = []
    for i in found:
        regions = sorted({p.region for p in i.prices})
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
                str(len(regions)),
                ", ".join(regions),
            )
        )
    if shape is Format.csv:
        catalog_lists.instance_csv(found)
        return
    keep = [n for n, (_, default) in enumerate(columns) if wide or default]
    print_table(
        console(),
        f"{len(found)} instance types",
        [columns[n][0] for n in keep],
        [[row[n] for n in keep] for row in rows],
    )


@app.command("gpus")
def gpus(
    accelerator: Annotated[
        str | None,
        typer.Argument(
            metavar="[ACCEL]", help="An accelerator id or the start of ids, any case: H100, a100."
        ),
    ] = None,
    json_out: JsonOpt = False,
    fmt: FormatOpt = None,
) -> None:
    """Accelerator x provider x GPUs per node: the cheapest on-demand, spot and reserved $/h
    (flagged prices left out), the type that has it, and how many regions offer the shape."""
    found = gpu_grid(get_catalog(), accelerator)
    shape = output_format(fmt, json_out)
    if shape is Format.json:
        emit_json([_grid_json(r) for r in found])
        return
    # a column per reservation term some shape is priced on (most clouds' rows have none)
    terms = [t for t in RESERVED_TERMS if any(r.reserved_at(t) for r in found)]
    columns = [
        Column("accelerator", key=True),
        Column("cloud", drop_rank=6),
        Column("GPUs", "right", drop_rank=7),
        Column("on-demand $/h", "right", key=True),
        Column("cheapest at", drop_rank=3),
        Column("spot $/h", "right", drop_rank=4),
        *(
            Column(f"{RESERVED_TERMS[t]} $/h", "right", drop_rank=i + 1)
            for i, t in enumerate(terms)
        ),
        Column("regions", "right", drop_rank=5),
    ]
    rows = [_grid_cells(r, terms) for r in found]
    if shape is Format.csv:
        catalog_lists.gpu_csv(found)
        return
    what = f" matching {accelerator!r}" if accelerator else ""
    title = f"{len(found)} GPU shapes{what}: accelerator x cloud x GPUs per instance"
    print_table(console(), title, columns, rows)


def _grid_cells(r: GpuOffer, terms: list[Purchase]) -> tuple[str, ...]:
    reserved = {t: r.reserved_at(t) for t in terms}
    return (
        r.accelerator,
        r.provider,
        str(r.gpus),
        money(r.on_demand.hourly_usd) if r.on_demand else "-",
        f"{r.on_demand_type} {r.on_demand.region}" if r.on_demand else "-",
        money(r.spot.hourly_usd) if r.spot else "-",
        *(money(found[1].hourly_usd) if (found := reserved[t]) else "-" for t in terms),
        str(len(r.regions)),
    )


def _grid_json(r: GpuOffer) -> dict[str, Any]:
    def price(p: Price | None, it: str | None) -> dict[str, Any] | None:
        if p is None:
            return None
        return {"instance_type": it, "region": p.region, "hourly_usd": p.hourly_usd}

    reserved = {t: r.reserved_at(t) for t in RESERVED_TERMS}
    return {
        "accelerator": r.accelerator,
        "provider": r.provider,
        "gpu_count": r.gpus,
        "instance_types": list(r.instance_types),
        "on_demand": price(r.on_demand, r.on_demand_type),
        "spot": price(r.spot, r.spot_type),
        **{
            t.value: price(found[1], found[0]) if (found := reserved[t]) else None
            for t in RESERVED_TERMS
        },
        "regions": list(r.regions),
    }


RESERVED_TERMS = dict(zip(TERMS, ("1-yr", "3-yr"), strict=True))  # column labels


@app.command("show")
def show(entry_id: Annotated[str, typer.Argument(metavar="ID")], json_out: JsonOpt = False) -> None:
    """Show one accelerator or instance type."""
    entry = get_entry(get_catalog(), entry_id)
    data = entry.model_dump(mode="json")
    if json_out:
        emit_json(data)
        return
    kind = "accelerator" if isinstance(entry, Accelerator) else "instance type"
    table = Table(title=Text(f"{kind} {entry_id}"), show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    for key, value in data.items():
        table.add_row(Text(key), Text(_cell(key, value)))
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


# The options and answer every `catalog import` command shares.
SourceLabelOpt = Annotated[
    str | None, typer.Option("--source-label", help="What each price's `source` says")
]
DryRunOpt = Annotated[bool, typer.Option(help="Validate and summarise; write nothing.")]


def _import_data(result: ImportResult) -> dict[str, Any]:
    """An import's summary, the file it wrote (or would) and the loader's warnings."""
    data = {**result.summary.as_dict(), "file": str(result.path), "written": result.written}
    data["warnings"] = list(result.warnings)
    return data


@import_app.command("skypilot")
def import_skypilot(
    source: Annotated[str, typer.Argument(metavar="PATH|URL", help="A SkyPilot vms.csv.")],
    provider: Annotated[
        str | None,
        typer.Option(
            help="aws, gcp, azure, oci, lambda or runpod: the CSV's layout (default: from the path)"
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Directory to write <provider>.yaml into (required unless --dry-run, which "
            "compares with the shipped file).",
        ),
    ] = None,
    as_of: Annotated[
        str | None, typer.Option(help="Date the prices were published, YYYY-MM-DD (default: today)")
    ] = None,
    label: SourceLabelOpt = None,
    families: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated id prefixes the CSV covers (a snapshot of some families, "
            "e.g. p4d.,p5.): other types are kept as they are, not removed."
        ),
    ] = None,
    dry_run: DryRunOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Refresh <provider>.yaml from SkyPilot's catalog CSV; writes only if the result validates."""
    from advisor.cli.catalog_import import guess_provider, run_import, source_label

    if out is None and not dry_run:
        # the package's own catalog is not a place to write by default: an installed package
        # would be changed under every other user of it, and a clone's tracked file silently
        raise InputError(
            "--out DIR: name the directory to write into (from a clone, to refresh the shipped "
            "prices: --out catalog/instances); --dry-run compares with the shipped file",
            field="out",
        )
    result = run_import(
        source,
        provider or guess_provider(source),
        out or shipped_catalog_dir() / "instances",
        catalog=get_catalog(),
        as_of=_date(as_of),
        label=label or source_label(source),
        dry_run=dry_run,
        scope=tuple(f.strip() for f in (families or "").split(",") if f.strip()),
    )
    data = _import_data(result)
    if json_out:
        emit_json(data)
        return
    _print_import(data)


@import_app.command("ec2-reserved")
def import_ec2_reserved(
    source: Annotated[
        str,
        typer.Argument(
            metavar="PATH|URL",
            help="ec2instances.info's instances.json (https://instances.vantage.sh/instances.json) "
            "or a capture keeping its 1-year rate as `reserved`.",
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Directory holding the aws.yaml to add reserved prices to (required unless "
            "--dry-run, which checks against the shipped file).",
        ),
    ] = None,
    as_of: Annotated[
        str | None, typer.Option(help="Date the rates were read, YYYY-MM-DD (default: today)")
    ] = None,
    label: SourceLabelOpt = None,
    dry_run: DryRunOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Add AWS reserved prices (1- and 3-year Standard RIs, Linux, no upfront) to aws.yaml beside
    its on-demand and spot prices; writes only if the result validates."""
    from advisor.cli.catalog_import import run_reserved_import

    if out is None and not dry_run:
        raise InputError(
            "--out DIR: name the directory holding aws.yaml (from a clone, to refresh the shipped "
            "prices: --out catalog/instances); --dry-run checks against the shipped file",
            field="out",
        )
    result = run_reserved_import(
        source,
        out or shipped_catalog_dir() / "instances",
        as_of=_date(as_of),
        label=label or source,
        dry_run=dry_run,
    )
    data = _import_data(result)
    if json_out:
        emit_json(data)
        return
    _print_reserved(data)


def _print_reserved(data: dict[str, Any]) -> None:
    out = console()
    verb = "wrote" if data["written"] else "would write (dry run)"
    out.print(f"{verb} {data['file']}: {data['prices']} reserved prices", highlight=False)
    lines = [
        ("updated", [f"{k} ({n})" for k, n in data["updated"].items()]),
        ("no reserved rate in the source", data["without_reserved_prices"]),
        ("not in the catalog, skipped", data["not_in_catalog"]),
        (
            "reserved prices no longer listed, removed",
            [f"{k}: {', '.join(v)}" for k, v in data["removed"].items()],
        ),
        (
            "regions the catalog does not price, skipped",
            [f"{k}: {', '.join(v)}" for k, v in data["regions_without_other_prices"].items()],
        ),
    ]
    for label, items in lines:
        out.print(
            f"{label} ({len(items)}): {', '.join(items) or '-'}", highlight=False, markup=False
        )
    out.print(f"validated with the loader ({len(data['warnings'])} warning(s))", highlight=False)


def _date(text: str | None) -> dt.date:
    if text is None:
        return dt.date.today()
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise InputError(f"--as-of {text!r}: give a date as YYYY-MM-DD") from None


def _print_import(data: dict[str, object]) -> None:
    out = console()
    verb = "wrote" if data["written"] else "would write (dry run)"
    out.print(f"{verb} {data['file']}: {data['prices']} prices", highlight=False, markup=False)
    for key in ("added", "removed", "refreshed"):
        ids = data[key]
        assert isinstance(ids, list)
        out.print(f"{key} ({len(ids)}): {', '.join(ids) or '-'}", highlight=False, markup=False)
    moved = data["moved_over_10pct"]
    assert isinstance(moved, list)
    out.print(f"prices moved by more than 10% ({len(moved)}):", highlight=False)
    for m in moved:
        out.print(
            f"  {m['id']} {m['region']} {m['purchase']}: "
            f"{money(m['old_hourly_usd'])} -> {money(m['new_hourly_usd'])}",
            highlight=False,
            markup=False,
        )
    unknown = data["unknown_accelerators"]
    assert isinstance(unknown, dict)
    out.print(f"unknown accelerators ({len(unknown)}), not imported:", highlight=False)
    for name, why in sorted(unknown.items()):
        out.print(f"  {name}: {why}", highlight=False, markup=False)
    incomplete = data["incomplete"]
    assert isinstance(incomplete, dict)
    out.print(f"no whole price, not offered ({len(incomplete)}):", highlight=False)
    for type_id, why in sorted(incomplete.items()):
        out.print(f"  {type_id}: {why}", highlight=False, markup=False)
    out.print(f"validated with the loader ({len(data['warnings'])} warning(s))", highlight=False)  # type: ignore[arg-type]


@app.command("stale")
def stale(json_out: JsonOpt = False) -> None:
    """Prices older than ADVISOR_MAX_PRICE_AGE_DAYS (default 365), with their as_of and source."""
    days = CatalogSettings.from_env().max_price_age_days
    found = stale_prices(get_catalog(), days, dt.date.today())
    if json_out:
        emit_json(
            [
                {
                    "id": it.id,
                    "region": p.region,
                    "purchase": p.purchase.value,
                    "hourly_usd": p.hourly_usd,
                    "as_of": p.as_of.isoformat(),
                    "age_days": age,
                    "source": p.source,
                }
                for it, p, age in found
            ]
        )
        return
    columns = [
        Column("id", key=True),
        Column("region", drop_rank=3),
        Column("purchase", drop_rank=2),
        Column("as of", drop_rank=4),
        Column("age d", "right", drop_rank=1),
        Column("source", drop_rank=0),
    ]
    rows = [
        (it.id, p.region, p.purchase.value, p.as_of.isoformat(), str(age), p.source)
        for it, p, age in found
    ]
    print_table(console(), f"{len(found)} price(s) older than {days} days", columns, rows)


PURCHASE_WORDS = {
    Purchase.on_demand: "on-demand",
    Purchase.spot: "spot",
    Purchase.capacity_block: "capacity block",
}


def _from_cell(it: InstanceType) -> str:
    """The cheapest on-demand price, else the cheapest spot one, saying which (and if flagged)."""
    price = from_price(it.prices)
    if price is None:
        return "-"
    mark = " (flagged)" if price.flag else ""
    words = PURCHASE_WORDS.get(price.purchase, price.purchase.value)
    return f"{money(price.hourly_usd)} {words}{mark}"


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
        f"{p['region']!s:<16} {p['purchase']!s:<14} {money(p['hourly_usd']):>10}  "
        f"as of {p['as_of']}"
    )
    return line if p.get("flag") is None else f"{line}\n  FLAGGED: {p['flag']}"


PURCHASE_ORDER = {p.value: i for i, p in enumerate(Purchase)}  # on demand, spot, terms, blocks


def _cell(key: str, value: object) -> str:
    if key == "prices" and isinstance(value, list):
        # each region's ways to buy together, whatever order the file lists them in
        ordered = sorted(value, key=lambda p: (p["region"], PURCHASE_ORDER[p["purchase"]]))
        return "\n".join(_price_line(p) for p in ordered)
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items() if v is not None)
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return "-" if value in (None, "") else str(value)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


@app.command("ops")
def ops_tables(
    accelerator: Annotated[
        str | None, typer.Argument(metavar="[ACCEL]", help="Only this accelerator's tables.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """List the measured operator tables (`advisor probe --ops`) and what each one covers."""
    from advisor.catalog.ops import load_tables, model_tables

    catalog = get_catalog()
    if accelerator is not None and accelerator not in catalog.accelerators:
        raise InputError(unknown("accelerator", accelerator, list(catalog.accelerators)))
    dirs = CatalogSettings.from_env().directories()
    used = {(t.accelerator, t.measured_at) for t in model_tables().values()}
    found = [
        (path, t)
        for path, t in load_tables(dirs)
        if accelerator is None or t.accelerator == accelerator
    ]
    rows = [_ops_summary(path, t, (t.accelerator, t.measured_at) in used) for path, t in found]
    if json_out:
        emit_json(rows)
        return
    table = Table(title="operator tables")
    for col in ("accelerator", "mode", "measured", "stack", "rows", "used by the model", "file"):
        table.add_column(col, overflow="fold")
    for r in rows:
        counts = ", ".join(f"{n} {k}" for k, n in r["rows"].items() if n)
        table.add_row(
            Text(r["accelerator"] or "-"),
            r["mode"],
            r["measured_at"][:10],
            Text(f"torch {r['torch']}, CUDA {r['cuda'] or '-'}, driver {r['driver'] or '-'}"),
            Text(counts),
            "yes" if r["used"] else "no",
            Text(r["file"]),
        )
    console().print(table)
    if not rows:
        console().print("no operator table" + (f" for {accelerator}" if accelerator else ""))


def _ops_summary(path: Path, t: Any, used: bool) -> dict[str, Any]:
    from probes.ops_table import ROW_SECTIONS

    return {
        "accelerator": t.accelerator,
        "device_name": t.stack.device_name,
        "mode": t.mode,
        "measured_at": t.measured_at.isoformat(),
        "torch": t.stack.torch,
        "cuda": t.stack.cuda,
        "driver": t.stack.driver,
        "precisions": sorted({g.precision for g in t.gemm}),
        "rows": {s: len(getattr(t, s)) for s in ROW_SECTIONS},
        "used": used,
        "file": path.name,
    }
