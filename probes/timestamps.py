"""RFC 3339 date-times, the only time format reports and time filters accept.

pydantic's datetime also takes Unix seconds (`0`, `0.5`) and times without a zone; RFC 3339 has a
four-digit year and always an offset, so that every value is one instant. A value must also be
an instant that UTC can hold (0001-01-01T00:00:00+14:00 is in year 0 there).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def _rfc3339(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):  # built in Python (the probe itself)
        parsed = value
    elif isinstance(value, str) and _RFC3339.fullmatch(value):
        # Python reads at most microseconds: digits beyond them are cut, not rounded
        text = re.sub(r"(\.\d{6})\d+", r"\1", value)
        parsed = dt.datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    else:
        raise ValueError(
            "give an RFC 3339 date-time with a zone, like 2026-11-30T12:00:00Z, "
            f"not {str(value)[:40]!r}"
        )
    if parsed.tzinfo is None:
        raise ValueError("give the time's zone (Z or +hh:mm)")
    try:
        parsed.astimezone(dt.UTC)
    except OverflowError:
        raise ValueError(f"{value} is outside the years 1 to 9999 in UTC") from None
    return parsed


Rfc3339 = Annotated[dt.datetime, BeforeValidator(_rfc3339)]


# A report's own time: an RFC 3339 instant in the years 1000 to 8999, so that it is one UTC can
# hold whatever its offset (0001-01-01T02:00:03+03:00 is year 0 there) and the schema can say so
# (a pattern on the year; an instant's range is not expressible in JSON Schema). Time filters
# keep every instant UTC holds.
REPORT_YEARS = (1000, 8999)


def _report_time(value: Any) -> dt.datetime:
    parsed = _rfc3339(value)
    low, high = REPORT_YEARS
    if not low <= parsed.year <= high:
        raise ValueError(f"give a time in the years {low} to {high}, not {value}")
    return parsed


ReportTime = Annotated[
    dt.datetime,
    BeforeValidator(_report_time),
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": "^[1-8][0-9]{3}-"}),
]
