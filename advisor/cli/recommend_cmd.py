"""`advisor recommend`: the rule engine from the command line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from advisor.cli import sizing_opts as opts
from advisor.cli.common import console, emit_json, get_catalog, kept, money
from advisor.cli.tables import (
    Column,
    Format,
    FormatOpt,
    WideOpt,
    output_format,
    print_table,
    print_wrapped,
    write_csv,
)
from advisor.engine import Recommendation, Result, SizedFigures
from advisor.engine import recommend as run_engine
from advisor.engine.objective import OBJECTIVE_WORDS
from advisor.errors import InputError
from advisor.request import RecommendRequest, parse_request

EmitOpt = Annotated[
    str | None,
    typer.Option(
        "--emit",
        help="Print the launch file of the best option instead: skypilot (task YAML) or dstack "
        "(task configuration), checked against their schemas.",
        rich_help_panel="Output",
    ),
]


@opts.request_options(RecommendRequest)
def recommend(
    fields: dict[str, Any],
    json_out: opts.JsonOut = False,
    fmt: FormatOpt = None,
    wide: WideOpt = False,
    emit: EmitOpt = None,
    server: opts.Server = None,
) -> None:
    """Recommend hardware for a workload; exit 1 when nothing satisfies the constraints."""
    shape = output_format(fmt, json_out)
    if emit is not None and emit not in ("skypilot", "dstack"):
        raise InputError(f"--emit: {emit!r} is not one of 'skypilot', 'dstack'", field="emit")
    # The request model's validator (built on its first use) and the catalog's candidate index
    # (built by the first query) live as long as the process: built with the collector off.
    with kept():
        parsed = parse_request(RecommendRequest, fields)
    fleet = opts.fleet_from_server(server) if parsed.sized else None
    catalog = get_catalog()
    with kept():
        result = run_engine(catalog, parsed, fleet, listed=parsed.show_rejected)
    if emit is not None and result.recommendations:
        print(launch_file(result.recommendations[0], emit, parsed, catalog), end="")
    elif shape is Format.json:
        emit_json(result.to_dict())
    elif shape is Format.csv:
        write_csv(*csv_rows(result))
    else:
        render(result, parsed.show_rejected, wide)
    if not result.ok:
        raise typer.Exit(1)


def launch_file(rec: Recommendation, kind: str, w: RecommendRequest, catalog: Any) -> str:
    """The launch file of one recommendation as YAML, refused (exit 2) if it breaks the tool's
    schema (advisor/deploy/launch.py)."""
    import yaml

    from advisor.deploy import launch

    name = w.model or w.workload.replace("_", "-")
    name = "".join(ch if ch.isalnum() else "-" for ch in name.lower())[:40]
    if kind == "skypilot":
        doc = launch.skypilot_task(rec, name)
    else:
        doc = launch.dstack_task(rec, name, catalog.accelerators.get(rec.accelerator))
    found = launch.problems(doc, "skypilot" if kind == "skypilot" else "dstack")
    if found:
        raise InputError(f"--emit {kind}: the file breaks the schema: {'; '.join(found)}")
    return launch.commitment_comment(rec) + yaml.safe_dump(doc, sort_keys=False)


def _money(value: float, digits: int) -> str:
    return f"${value:,.{digits}f}"


# Per objective: the header of the column the rows are sorted by, how its figure is written
# (with `digits` decimals), and the figure before the soft-preference penalty. The cells show
# Recommendation.ranked_value, the figure the engine sorted by, so the column reads in order.
SORT_COLUMNS: dict[
    str, tuple[str, Callable[[float, int], str], Callable[[Recommendation], float | None]]
] = {
    "cheapest": ("$/h", _money, lambda r: r.hourly_usd),
    "cost_to_completion": (
        "to completion",
        _money,
        lambda r: r.sizing.cost_to_completion_usd if r.sizing else None,
    ),
    "cost_per_million_tokens": (
        "$/M tokens",
        _money,
        lambda r: r.sizing.cost_per_million_tokens_usd if r.sizing else None,
    ),
    "time": (
        "hours",
        lambda v, d: f"{v:,.{d - 1}f}",
        lambda r: r.sizing.hours if r.sizing else None,
    ),
}
TIE_MARK = "="  # after a ranked figure: equal to the row above's
PENALTY_MARK = "*"  # after a ranked figure: it includes a soft-preference penalty


def render(result: Result, show_rejected: bool, wide: bool = False, reasons_for: int = 3) -> None:
    out = console()
    if result.recommendations:
        _recommendation_table(result, wide)
        for n, r in enumerate(result.recommendations[:reasons_for], 1):
            out.print(f"#{n} {_option(r)}", style="bold", highlight=False, markup=False)
            for reason in r.reasons:
                print_wrapped(out, reason, "  - ")
            if r.price_flag is not None:
                print_wrapped(out, f"flagged price: {r.price_flag}", "  - ")
    print_wrapped(out, result.explanation)
    if not result.recommendations and result.alternatives:
        for alt in result.alternatives:
            print_wrapped(out, alt.sentence, "  - ")
    if show_rejected and result.rejected:
        print_table(
            out,
            f"{len(result.rejected)} rejected",
            [Column("id", key=True), Column("codes", drop_rank=1), Column("reasons", drop_rank=2)],
            [(rej.id, ", ".join(rej.codes), "\n".join(rej.reasons)) for rej in result.rejected],
        )
    if result.rejected_count:
        counts = "; ".join(f"{c.words} {c.count}" for c in result.rejected_summary[:4])
        listed = "listed above" if show_rejected else "--show-rejected lists them"
        print_wrapped(
            out,
            f"{result.rejected_count} of the {result.rejected_count + result.feasible_types} "
            f"candidates (instance types and edge devices) rejected, by constraint: {counts} "
            f"({listed})",
        )


def ranked_cells(result: Result) -> tuple[str, list[str], list[str]]:
    """The sort column's header, its cells (the ranked figure, with enough decimals that
    different figures never read alike; an exact tie marked), and its footnotes."""
    recs = result.recommendations
    values = [r.ranked_value for r in recs]
    tied = {i for i in range(1, len(values)) if values[i] == values[i - 1]}
    if result.objective not in SORT_COLUMNS:  # performance objectives: the score is the rank
        notes = _penalty_notes(result, None) + _tie_note(tied, "score")
        return "score", [_marked(_score(r), r, i in tied) for i, r in enumerate(recs)], notes
    header, write, _ = SORT_COLUMNS[result.objective]
    for digits in (2, 3, 4):
        cells = [write(v, digits) for v in values]
        alike = any(
            cells[i] == cells[i + 1] and values[i] != values[i + 1] for i in range(len(cells) - 1)
        )
        if not alike:
            break
    notes = _penalty_notes(result, write, digits) + _tie_note(tied, header)
    cells = [_marked(c, recs[i], i in tied) for i, c in enumerate(cells)]
    return header, cells, notes


def _tie_note(tied: set[int], header: str) -> list[str]:
    if not tied:
        return []
    return [
        f"{TIE_MARK} tied with the row above on {header}; ties are ranked by the lower $/h, "
        "then the id."
    ]


def _marked(cell: str, r: Recommendation, tied: bool) -> str:
    """A ranked figure with its marks: * a penalty is in it, = it ties the row above."""
    return cell + (PENALTY_MARK if r.penalty_factor != 1 else "") + (TIE_MARK if tied else "")


def _penalty_notes(
    result: Result, write: Callable[[float, int], str] | None, digits: int = 2
) -> list[str]:
    """One note per penalised row: the figure as priced and the penalty that ranked it lower."""
    penalised = [(n, r) for n, r in enumerate(result.recommendations, 1) if r.penalty_factor != 1]
    if not penalised:
        return []
    notes = [
        f"{PENALTY_MARK} ranked with a soft-preference penalty: the workload prefers what this "
        "option lacks, so its figure counts that much worse:"
    ]
    _, _, unpenalised = SORT_COLUMNS.get(result.objective, ("", None, lambda r: None))
    for n, r in penalised:
        why = "; ".join(x.removeprefix("scored ") for x in r.reasons if x.startswith("scored "))
        before = unpenalised(r) if write is not None else None
        figure = (
            f"{write(before, digits)} as priced x {r.penalty_factor:.2f} = "
            f"{write(r.ranked_value, digits)}"
            if write is not None and before is not None
            else f"score x 1/{r.penalty_factor:.2f}"
        )
        notes.append(f"  #{n} {_option(r)}: {figure} ({why})")
    return notes


def _recommendation_table(result: Result, wide: bool) -> None:
    """Rows best first; the option id and the column they are sorted by are always whole. By
    default the chosen few (what, on what, where, the ranked figure); --wide adds the rest:
    what a served model's option delivers, nodes, $/h, power and score."""
    sort_header, sort_cells, notes = ranked_cells(result)
    recs = result.recommendations
    penalised = any(r.penalty_factor != 1 for r in recs)
    # One purchase option for every row is said once, in the title, not on every row.
    purchases = {r.purchase for r in recs}
    one_purchase = purchases.pop() if len(purchases) == 1 else None
    cells: list[tuple[Column, Callable[[Recommendation], str]]] = [
        (Column("hardware", drop_rank=4, min_width=10), _hardware),
        (Column("where", drop_rank=5, min_width=16), lambda r: _where(r, one_purchase is None)),
    ]
    if wide:
        if penalised:
            cells.append((Column("penalty", "right", drop_rank=6), _penalty))
        if any(r.sizing and r.sizing.itl_ms is not None for r in recs):
            cells += SERVING_COLUMNS
        cells += [
            (Column("$/h", "right", drop_rank=3), lambda r: money(r.hourly_usd)),
            (Column("power W", "right", drop_rank=0), lambda r: f"{r.power_w:g}"),
            (Column("score", "right", drop_rank=2), _score),
        ]
        if penalised and result.objective in SORT_COLUMNS:
            _, _, before = SORT_COLUMNS[result.objective]
            cells.append(
                (
                    Column(f"{sort_header} as priced", "right", drop_rank=1),
                    lambda r: money(before(r)),
                )
            )
    # The sort column is not repeated among the others.
    cells = [(c, f) for c, f in cells if c.header != sort_header]
    columns = [Column("#", key=True), Column("option", key=True)]
    columns += [Column(sort_header, "right", key=True), *(c for c, _ in cells)]
    rows = [
        [str(n), _option(r), sort_cells[n - 1], *(f(r) for _, f in cells)]
        for n, r in enumerate(recs, 1)
    ]
    if not wide:
        notes = [*notes, "(--wide adds what each option delivers, nodes, $/h, power and score)"]
    title = f"{result.workload}: best by {OBJECTIVE_WORDS[result.objective]}"
    if one_purchase is not None:
        title += f", {one_purchase} prices"
    print_table(console(), title, columns, rows, notes)


def _penalty(r: Recommendation) -> str:
    return "-" if r.penalty_factor == 1 else f"+{r.penalty_factor - 1:.0%}"


def csv_rows(result: Result) -> tuple[list[str], list[list[object]]]:
    """Every field of each recommendation, one row each (sizing figures flattened)."""
    headers = [
        "rank", "option", "accelerator", "gpu_count", "nodes", "provider", "region", "purchase",
        "hourly_usd", "ranked_value", "penalty_factor", "score", "power_w",
    ]  # fmt: skip
    sized = [
        name for name in SizedFigures.model_fields if any(r.sizing for r in result.recommendations)
    ]
    rows: list[list[object]] = []
    for n, r in enumerate(result.recommendations, 1):
        row: list[object] = [
            n, r.instance_type or r.device, r.accelerator, r.gpu_count, r.nodes, r.provider,
            r.region, r.purchase, r.hourly_usd, r.ranked_value, r.penalty_factor, r.score,
            r.power_w,
        ]  # fmt: skip
        row += [getattr(r.sizing, name) if r.sizing else None for name in sized]
        rows.append(row)
    return headers + sized, rows


def _serving(r: Recommendation, figure: Callable[[SizedFigures], str]) -> str:
    return figure(r.sizing) if r.sizing is not None and r.sizing.itl_ms is not None else "-"


def _replicas_cell(s: SizedFigures) -> str:
    """Replicas x the GPUs of one: its TP degree inside a node, or an expert- or pipeline-
    parallel replica's GPUs over several nodes (whose TP is attention's or a stage's)."""
    replicas = s.replicas or 1
    return f"{replicas} x {s.gpus_needed // replicas}"


# What a served model's option delivers (advisor/perf/inference.py), in the table.
SERVING_COLUMNS: list[tuple[Column, Callable[[Recommendation], str]]] = [
    (
        Column("TTFT ms", "right", drop_rank=14),
        lambda r: _serving(r, lambda s: f"{s.ttft_ms:,.0f}"),
    ),
    (Column("ITL ms", "right", drop_rank=15), lambda r: _serving(r, lambda s: f"{s.itl_ms:,.1f}")),
    (
        Column("tokens/s", "right", drop_rank=13),
        lambda r: _serving(r, lambda s: f"{s.tokens_per_s or 0:,.0f}"),
    ),
    (
        Column("replicas x GPUs", "right", drop_rank=12),
        lambda r: _serving(r, _replicas_cell),
    ),
    (
        Column("$/M tokens", "right", drop_rank=11),
        lambda r: money(r.sizing.cost_per_million_tokens_usd if r.sizing else None),
    ),
]


def _score(r: Recommendation) -> str:
    return f"{r.score:.2f}"


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _option(r: Recommendation) -> str:
    if r.instance_type is None:
        return f"{r.device} ({r.power_mode or 'default'} mode)"
    return f"{r.instance_type} (flagged price)" if r.price_flag else r.instance_type


def _where(r: Recommendation, purchase: bool = True) -> str:
    if not r.provider:
        return "edge device"
    return f"{r.provider} {r.region} {r.purchase}" if purchase else f"{r.provider} {r.region}"


def _hardware(r: Recommendation) -> str:
    """GPUs x accelerator, and the nodes they span: 32 A100s on 4 nodes is not one machine."""
    if not r.gpu_count:
        return r.accelerator if r.nodes == 1 else f"{r.accelerator} x {r.nodes} nodes"
    if r.nodes == 1:
        return f"{r.gpu_count} x {r.accelerator}"
    return f"{r.nodes} nodes x {r.gpu_count // r.nodes} x {r.accelerator}"
