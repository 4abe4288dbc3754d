"""Tables that fit the terminal (or 80 columns in a pipe or a log) without cutting what matters.

Key columns (ids, and the column the rows are sorted by) never wrap, never get an ellipsis and
are never dropped; the other columns fold their text, and when even that cannot fit, the least
useful ones are left out and a line says which (--json has every field).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # rich is imported when a table is drawn: --json output never pays for it
    from rich.console import Console
    from rich.table import Table

_EDGES = 3  # a cell's padding and its border
_FOLDED_MIN = 6  # narrowest a folded column is allowed to become before it is left out


@dataclass(frozen=True)
class Column:
    header: str
    justify: Literal["left", "right"] = "left"
    key: bool = False  # an id or the sort column: shown whole, always
    drop_rank: int = 0  # non-key columns are left out lowest rank first when space runs out
    min_width: int = _FOLDED_MIN  # narrowest it may be folded to before it is left out


def _width(header: str, cells: Sequence[str]) -> int:
    return max(len(line) for text in (header, *cells) for line in text.splitlines() or [""])


def fit_table(
    console: Console, title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]]
) -> tuple[Table, list[str]]:
    """The table, and the headers of the columns left out to keep the key columns whole."""
    widths = [_width(c.header, [r[i] for r in rows]) for i, c in enumerate(columns)]
    shown = list(range(len(columns)))

    def needed() -> int:
        return 1 + sum(
            widths[i] + _EDGES if columns[i].key else min(widths[i], columns[i].min_width) + _EDGES
            for i in shown
        )

    droppable = sorted((c.drop_rank, i) for i, c in enumerate(columns) if not c.key)
    dropped: list[str] = []
    for _, i in droppable:
        if needed() <= console.width:
            break
        shown.remove(i)
        dropped.append(columns[i].header)
    from rich.table import Table

    table = Table(title=title)
    for i in shown:
        c = columns[i]
        if c.key:
            table.add_column(c.header, justify=c.justify, no_wrap=True, min_width=widths[i])
        else:
            table.add_column(c.header, justify=c.justify, overflow="fold")
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    return table, dropped


def print_table(
    console: Console, title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]]
) -> None:
    table, dropped = fit_table(console, title, columns, rows)
    console.print(table)
    if dropped:
        console.print(
            f"(left out at {console.width} columns: {', '.join(dropped)}; --json has every field)",
            highlight=False,
            markup=False,
        )
