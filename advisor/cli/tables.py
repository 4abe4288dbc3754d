"""Tables that fit the terminal (or 80 columns in a pipe or a log) without cutting what matters.

Key columns (ids, and the column the rows are sorted by) never wrap, never get an ellipsis and
are never dropped; the other columns wrap between words but never inside one (a region or an
accelerator id in a cell is a word: "southamerica-west1" stays whole), and when even that cannot
fit, the least useful ones are left out and a line says which (--json has every field).
Commands show a few chosen columns by default and every column with --wide.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Literal, NamedTuple

import typer

if TYPE_CHECKING:  # rich is imported when a table is drawn: --json output never pays for it
    from rich.console import Console
    from rich.table import Table

# Rich's SIMPLE_HEAD box without its outer edges: a rule under the header, a space between
# columns and one of padding either side of each; no padding at the table's two edges. A
# table of n columns is their widths + 3n - 3 wide: frames (4n + 1 with the heavy box) cost
# the id or the region column at 80 columns.
_EDGES = 3
_FIXED = -3
_FOLDED_MIN = 6  # narrowest a folded column is allowed to become before it is left out


# A NamedTuple, not a frozen dataclass: a command imports this module to print anything, and a
# dataclass takes several times as long to make (its methods are compiled when the class is).
class Column(NamedTuple):
    header: str
    justify: Literal["left", "right"] = "left"
    key: bool = False  # an id or the sort column: shown whole, always
    drop_rank: int = 0  # non-key columns are left out lowest rank first when space runs out
    min_width: int = _FOLDED_MIN  # narrowest it may be folded to before it is left out


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


FormatOpt = Annotated[
    Format | None,
    typer.Option(
        "--format",
        "-f",
        rich_help_panel="Output",
        help="table (default), json (as --json) or csv (every column, one row a line).",
        case_sensitive=False,
    ),
]
WideOpt = Annotated[
    bool,
    typer.Option("--wide", rich_help_panel="Output", help="Every column (default: a chosen few)."),
]


def output_format(fmt: Format | None, json_out: bool) -> Format:
    """--json is --format json; both given and disagreeing is a usage error."""
    if json_out and fmt not in (None, Format.json):
        from advisor.errors import InputError

        raise InputError(f"--json and --format {fmt.value} disagree: give one of them")
    return Format.json if json_out else (fmt or Format.table)


def write_csv(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """CSV on stdout (RFC 4180 quoting; a cell of several lines keeps them, quoted)."""
    import csv  # here: only --format csv writes it

    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(headers)
    writer.writerows(rows)


def _width(header: str, cells: Sequence[str]) -> int:
    return max(len(line) for text in (header, *cells) for line in text.splitlines() or [""])


def _wrapped_header(header: str, cells: Sequence[str]) -> str:
    width = max(_width("", cells), _longest_word(header, []))
    return "\n".join(textwrap.wrap(header, width, break_on_hyphens=False)) or header


def _longest_word(header: str, cells: Sequence[str]) -> int:
    """The narrowest a wrapped column can be without cutting a word (an id, a region, a price)."""
    return max((len(word) for text in (header, *cells) for word in text.split()), default=1)


def fit_table(
    console: Console, title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]]
) -> tuple[Table, list[str]]:
    """The table, and the headers of the columns left out to keep the key columns whole."""
    # A key column's header wraps between its words to the column's cells ("to completion"
    # over "$197.87"): the cells stay on one line, whole.
    headers = [
        _wrapped_header(c.header, [r[i] for r in rows]) if c.key else c.header
        for i, c in enumerate(columns)
    ]
    widths = [_width(headers[i], [r[i] for r in rows]) for i, c in enumerate(columns)]
    words = [_longest_word(c.header, [r[i] for r in rows]) for i, c in enumerate(columns)]
    # a wrapped column: no narrower than its longest word, no wider than its widest line
    least = [min(widths[i], max(c.min_width, words[i])) for i, c in enumerate(columns)]
    shown = list(range(len(columns)))

    def needed() -> int:
        return _FIXED + sum((widths[i] if columns[i].key else least[i]) + _EDGES for i in shown)

    droppable = sorted((c.drop_rank, i) for i, c in enumerate(columns) if not c.key)
    dropped: list[str] = []
    for _, i in droppable:
        if needed() <= console.width:
            break
        shown.remove(i)
        dropped.append(columns[i].header)
    from rich import box
    from rich.table import Table
    from rich.text import Text

    # Every width is set here, not left to Rich: Rich collapses the widest wrapping column
    # first and below its longest word, which is how "southamerica-west1" came out cut. The
    # room left after each column's least goes to the most useful ones first.
    given = {i: widths[i] if columns[i].key else least[i] for i in shown}
    room = console.width - needed()
    for i in sorted(shown, key=lambda i: -columns[i].drop_rank):
        grow = max(0, min(room, widths[i] - given[i]))
        given[i] += grow
        room -= grow
    table = Table(title=Text(title), box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for i in shown:
        c = columns[i]
        if c.key:
            table.add_column(headers[i], justify=c.justify, no_wrap=True, width=given[i])
        else:
            table.add_column(c.header, justify=c.justify, overflow="fold", width=given[i])
    for row in rows:  # cells as Text: a `[...]` in a cell is text, not markup
        table.add_row(*(Text(row[i]) for i in shown))
    return table, dropped


def print_table(
    console: Console,
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    notes: Sequence[str] = (),
) -> None:
    """The table, then its notes (footnotes: what a mark in a cell means), then which columns
    were left out, each wrapped with an indent (print_wrapped)."""
    table, dropped = fit_table(console, title, columns, rows)
    console.print(table)
    for note in notes:
        print_wrapped(console, note)
    if dropped:
        print_wrapped(
            console,
            f"(left out at {console.width} columns: {', '.join(dropped)}; a wider terminal "
            f"shows them, --json has every field)",
        )


def print_wrapped(console: Console, text: str, first: str = "", rest: str | None = None) -> None:
    """Text wrapped to the console between words, never inside one (ids and hyphenated names
    stay whole), continuation lines indented under the first line's text: Rich's own wrapping
    starts them at column 0, where they read as new items. Never markup (a `[probe]` in the
    text is text)."""
    if not first:  # a note written with its own indent keeps it, and so do its lines
        body = text.lstrip(" ")
        first, text = text[: len(text) - len(body)], body
        if first and rest is None:
            rest = first + "  "
    rest = " " * len(first) if rest is None else rest
    for paragraph in text.split("\n"):
        lines = textwrap.wrap(
            paragraph,
            width=max(console.width, len(first) + 20),
            initial_indent=first,
            subsequent_indent=rest,
            break_long_words=False,
            break_on_hyphens=False,
        ) or [first.rstrip()]
        for line in lines:
            console.print(line, highlight=False, markup=False, soft_wrap=True)
        first = rest
