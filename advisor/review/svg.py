"""Inline SVG charts as strings. Pure; every text that reaches the markup is escaped.

Each chart is a self-contained <svg> with a viewBox (it scales to its container), a <title> for
screen readers, and a <title> per bar (the browser's tooltip). No scripts, no external fonts.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from advisor.fleet.grading import PASS_AT, WARN_AT

COLOURS = {
    "pass": "#2e7d32",
    "warn": "#f9a825",
    "fail": "#c62828",
    "none": "#90a4ae",
    "neutral": "#5c7cba",
    "best": "#1b5e20",
}
INK = "#263238"
GRID = "#cfd8dc"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif"
WIDTH = 760
LABEL_W = 250  # left column for row labels
VALUE_W = 70  # right column for the value text
ROW_H = 22
TOP = 30
BOTTOM = 14
LABEL_CHARS = 34
CHAR_W = 8.0  # px a 12 px sans-serif character may take (capitals, underscores): no label clipped


def esc(text: object) -> str:
    """Escape for XML/HTML text and attribute values (both quote kinds)."""
    return html.escape(str(text), quote=True)


def _clip(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _label_chars(label_w: float) -> int:
    """Characters that fit left of the bars (the label ends 8 px before them)."""
    return max(8, int((label_w - 10) / CHAR_W))


def _f(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _open(chart_id: str, title: str, height: float, width: int = WIDTH) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{esc(chart_id)}" '
        f'role="img" aria-labelledby="{esc(chart_id)}-title" viewBox="0 0 {width} {_f(height)}" '
        f'width="100%" preserveAspectRatio="xMinYMin meet" font-family="{esc(FONT)}" '
        f'font-size="12" fill="{INK}">',
        f'<title id="{esc(chart_id)}-title">{esc(title)}</title>',
    ]


@dataclass(frozen=True)
class RatioBar:
    label: str
    median: float
    p10: float
    p90: float
    band: str  # pass | warn | fail | none
    tooltip: str
    group: str = ""  # bars of one group share a header row (e.g. the accelerator)


def ratio_chart(
    bars: Sequence[RatioBar],
    chart_id: str = "ratios",
    title: str = "Measured / expected, fleet median with p10-p90",
    pass_at: float = PASS_AT,
    warn_at: float = WARN_AT,
    label_w: int = 150,
) -> str:
    """Horizontal bars of the median ratio, p10-p90 whiskers, a 100% reference line and the
    pass / warn thresholds as dashed lines. The axis runs to at least 120%."""
    top_value = max([1.2, *(b.p90 for b in bars), *(b.median for b in bars)])
    top_value = min(math.ceil(top_value * 10) / 10, 3.0)
    x0, x1 = label_w, WIDTH - VALUE_W
    groups = len({b.group for b in bars if b.group})
    height = TOP + ROW_H * max(len(bars) + groups, 1) + BOTTOM

    def x(v: float) -> float:
        return x0 + (x1 - x0) * max(0.0, min(v, top_value)) / top_value

    out = _open(chart_id, title, height)
    bottom = height - BOTTOM
    step = 0.25 if top_value <= 1.5 else 0.5
    tick = 0.0
    while tick <= top_value + 1e-9:
        out.append(
            f'<line x1="{_f(x(tick))}" y1="{TOP - 4}" x2="{_f(x(tick))}" y2="{_f(bottom)}" '
            f'stroke="{GRID}" stroke-width="1"/>'
            f'<text x="{_f(x(tick))}" y="{TOP - 8}" text-anchor="middle" font-size="11">'
            f"{tick:.0%}</text>"
        )
        tick += step
    for value, colour, name in (
        (warn_at, COLOURS["warn"], "warn"),
        (pass_at, COLOURS["pass"], "pass"),
    ):
        out.append(
            f'<line x1="{_f(x(value))}" y1="{TOP - 4}" x2="{_f(x(value))}" y2="{_f(bottom)}" '
            f'stroke="{colour}" stroke-width="1.5" stroke-dasharray="4 3">'
            f"<title>{esc(name)} threshold: {value:.0%} of expected</title></line>"
        )
    row = 0
    group = ""
    for b in bars:
        if b.group and b.group != group:
            group = b.group
            y = TOP + row * ROW_H
            out.append(
                f'<rect x="0" y="{_f(y + 1)}" width="{WIDTH}" height="{ROW_H - 2}" '
                f'fill="#eceff1"/><text x="8" y="{_f(y + ROW_H / 2 + 4)}" font-weight="600">'
                f"{esc(_clip(group, 90))}</text>"
            )
            row += 1
        y = TOP + row * ROW_H
        row += 1
        mid = y + ROW_H / 2
        colour = COLOURS.get(b.band, COLOURS["none"])
        out.append(f"<g><title>{esc(b.tooltip)}</title>")
        out.append(
            f'<text x="{x0 - 8}" y="{_f(mid + 4)}" text-anchor="end">'
            f"{esc(_clip(b.label, _label_chars(label_w)))}</text>"
        )
        out.append(
            f'<rect x="{x0}" y="{_f(y + 4)}" width="{_f(max(x(b.median) - x0, 1))}" '
            f'height="{ROW_H - 8}" fill="{colour}" fill-opacity="0.85"/>'
        )
        lo, hi = x(b.p10), x(b.p90)
        out.append(
            f'<line x1="{_f(lo)}" y1="{_f(mid)}" x2="{_f(hi)}" y2="{_f(mid)}" stroke="{INK}" '
            f'stroke-width="1.5"/>'
            f'<line x1="{_f(lo)}" y1="{_f(mid - 5)}" x2="{_f(lo)}" y2="{_f(mid + 5)}" '
            f'stroke="{INK}" stroke-width="1.5"/>'
            f'<line x1="{_f(hi)}" y1="{_f(mid - 5)}" x2="{_f(hi)}" y2="{_f(mid + 5)}" '
            f'stroke="{INK}" stroke-width="1.5"/>'
        )
        out.append(f'<text x="{x1 + 8}" y="{_f(mid + 4)}">{b.median:.0%}</text></g>')
    out.append(
        f'<line x1="{_f(x(1.0))}" y1="{TOP - 4}" x2="{_f(x(1.0))}" y2="{_f(bottom)}" '
        f'stroke="{INK}" stroke-width="2"><title>100% of expected</title></line>'
    )
    if not bars:
        out.append(
            f'<text x="{x0}" y="{TOP + 15}">no checks with a measured and expected value</text>'
        )
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    tooltip: str
    colour: str = COLOURS["neutral"]


def bar_chart(
    bars: Sequence[Bar],
    chart_id: str,
    title: str,
    value_text: Callable[[float], str] = lambda v: f"{v:,.0f}",
    width: int = WIDTH,
    label_w: int = LABEL_W,
) -> str:
    """Horizontal bars from zero, in the order given, each with its value at the right."""
    x0, x1 = label_w, width - VALUE_W - 10
    height = TOP + ROW_H * max(len(bars), 1) + BOTTOM
    top_value = max([b.value for b in bars if b.value > 0] or [1.0])
    out = _open(chart_id, title, height, width)
    limit = _label_chars(label_w)
    out.append(
        f'<line x1="{x0}" y1="{TOP - 4}" x2="{x0}" y2="{_f(height - BOTTOM)}" stroke="{INK}" '
        f'stroke-width="1"/>'
    )
    for i, b in enumerate(bars):
        y = TOP + i * ROW_H
        mid = y + ROW_H / 2
        w = (x1 - x0) * max(b.value, 0.0) / top_value
        out.append(f"<g><title>{esc(b.tooltip)}</title>")
        out.append(
            f'<text x="{x0 - 8}" y="{_f(mid + 4)}" text-anchor="end">'
            f"{esc(_clip(b.label, limit))}</text>"
        )
        out.append(
            f'<rect x="{x0}" y="{_f(y + 4)}" width="{_f(max(w, 1))}" height="{ROW_H - 8}" '
            f'fill="{esc(b.colour)}"/>'
        )
        out.append(
            f'<text x="{_f(x0 + max(w, 1) + 6)}" y="{_f(mid + 4)}">{esc(value_text(b.value))}'
            "</text></g>"
        )
    if not bars:
        out.append(f'<text x="{x0 + 8}" y="{TOP + 15}">nothing to show</text>')
    out.append(f'<text x="{x0}" y="{TOP - 12}" font-weight="600">{esc(title)}</text>')
    out.append("</svg>")
    return "".join(out)
