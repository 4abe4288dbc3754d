"""A trace of requests, their arrival times and lengths, read from a file for the serving
simulation (perf/serving_sim.py) in place of Poisson arrivals of one length.

Two formats, told by the first non-blank character: JSON lines (`{"arrival_s": 0.12,
"input_tokens": 512, "output_tokens": 128}` a line) or CSV with the header
`arrival_s,input_tokens,output_tokens`. Arrivals are seconds from the trace's start; the rows
are served in arrival order. A bad row is an InputError naming its line and field.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from advisor.errors import InputError

if TYPE_CHECKING:  # imported where a trace is read or replayed: every request model imports
    # this module for TraceRow, and most commands never simulate serving
    from advisor.perf.serving_sim import Request

TRACE_FIELDS = ("arrival_s", "input_tokens", "output_tokens")
MAX_TRACE_REQUESTS = 1_000_000  # a bound on what one simulation reads


class TraceRow(BaseModel):
    """One request of a trace file."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    arrival_s: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    input_tokens: Annotated[int, Field(ge=1, le=10_000_000)]
    output_tokens: Annotated[int, Field(ge=1, le=10_000_000)]


def _row(line: int, raw: object) -> Request:
    try:
        row = TraceRow.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "row"
        raise InputError(f"trace line {line}: {where}: {first['msg']}", field="trace") from None
    from advisor.perf.serving_sim import Request

    return Request(row.arrival_s, row.input_tokens, row.output_tokens)


def _json_lines(text: str) -> list[Request]:
    out: list[Request] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"trace line {n}: not JSON: {e.msg}", field="trace") from None
        out.append(_row(n, raw))
    return out


def _csv(text: str) -> list[Request]:
    import csv
    import io

    reader = csv.DictReader(io.StringIO(text))
    header = tuple(reader.fieldnames or ())
    if header != TRACE_FIELDS:
        raise InputError(
            f"trace line 1: the CSV header must be {','.join(TRACE_FIELDS)}, got "
            f"{','.join(header) or 'nothing'}",
            field="trace",
        )
    return [_row(n, dict(r)) for n, r in enumerate(reader, start=2)]


def read_trace(text: str) -> list[Request]:
    """The requests of a trace file's text, in arrival order (module doc)."""
    body = text.lstrip()
    rows = _json_lines(text) if body.startswith("{") else _csv(body)
    if not rows:
        raise InputError("trace: no requests", field="trace")
    if len(rows) > MAX_TRACE_REQUESTS:
        raise InputError(
            f"trace: {len(rows)} requests, at most {MAX_TRACE_REQUESTS} are simulated",
            field="trace",
        )
    return sorted(rows, key=lambda r: r.arrival_s)


def trace_rate_per_s(trace: list[Request]) -> float:
    """The trace's mean arrival rate: requests after the first over the time they span."""
    span = trace[-1].arrival_s - trace[0].arrival_s
    return (len(trace) - 1) / span if span > 0 else float("inf")


class Trace:
    """A trace as the simulation replays it: its requests in arrival order, compared and hashed
    by a digest of them (memo keys hold it, not the rows)."""

    def __init__(self, requests: list[Request]) -> None:
        if not requests:
            raise InputError("trace: no requests", field="trace")
        self.requests = tuple(sorted(requests, key=lambda r: r.arrival_s))
        rows = ";".join(f"{r.arrival_s!r},{r.input_tokens},{r.output_tokens}" for r in requests)
        self.digest = hashlib.sha256(rows.encode()).hexdigest()
        self.rate_per_s = trace_rate_per_s(list(self.requests))
        n = len(self.requests)
        self.input_tokens = max(1, round(sum(r.input_tokens for r in self.requests) / n))
        self.output_tokens = max(1, round(sum(r.output_tokens for r in self.requests) / n))
        # the prompt length a prompt token sees on average (attention's work grows with it)
        squares = sum(r.input_tokens**2 for r in self.requests)
        self.attention_prompt_len = round(squares / sum(r.input_tokens for r in self.requests))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Trace) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def arrivals(self, rate_per_s: float, count: int, speculative: float = 1.0) -> list[Request]:
        """The first `count` requests with their times scaled so that they arrive at
        `rate_per_s` on average (the trace's own rate: unscaled), starting at 0; with
        speculation committing `speculative` tokens an iteration, each output is counted in
        iterations (advisor/perf/speculative.py iterations_for)."""
        if not math.isfinite(self.rate_per_s):
            raise InputError("trace: every request arrives at once: no rate", field="trace")
        from advisor.perf.serving_sim import Request

        scale = self.rate_per_s / rate_per_s
        start = self.requests[0].arrival_s
        return [
            Request(
                (r.arrival_s - start) * scale,
                r.input_tokens,
                1 + math.ceil((r.output_tokens - 1) / speculative),
            )
            for r in self.requests[:count]
        ]
