"""The fleet's operator table of one accelerator: the tables its hosts measured with
`advisor probe --ops`, one vote per host, hosts far from the fleet left out. Pure.

Per row (an operator at one shape: every field of the row but its timing), each host's
measured median times (several tables of one host: their median, so a host that reports often
votes once) go to advisor.fleet.statistics.host_vote, the fleet calibration's vote: the median
over hosts, leaving out a host whose median is more than 3.5 spreads (1.4826 MAD, at least 2% of
the median) from the fleet's when three or more hosts measured the row. The fleet row keeps the
voted median, the interquartile range and coefficient of variation of the voting hosts' medians
(the spread across the fleet, not within one run), and the notes say how many hosts voted and
which were left out, row by row. The stack (torch, CUDA, driver) of the newest table is the
fleet table's; the notes list the others when hosts differ.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel

from advisor.fleet.statistics import HostVote, host_vote
from probes.ops_table import ROW_SECTIONS, OpsTable
from probes.stats import quantile

TIMING = frozenset({"median_us", "iqr_us", "cv"})
RowKey = tuple[str, tuple[tuple[str, object], ...]]  # (section, the row's shape fields)


@dataclass(frozen=True)
class FleetOpsTable:
    """The voted table, the hosts whose tables went in, and each host left out of a row."""

    table: OpsTable
    hosts: tuple[str, ...]
    ignored: tuple[tuple[str, str, str], ...]  # (row, host, why)


def _key(section: str, row: BaseModel) -> RowKey:
    shape = row.model_dump(exclude=set(TIMING))
    return section, tuple(sorted(shape.items()))


def _label(key: RowKey) -> str:
    section, shape = key
    return section + " " + ",".join(f"{k}={v}" for k, v in shape)


def _spread(medians: list[float]) -> tuple[float, float]:
    """Interquartile range and coefficient of variation of the voting hosts' medians."""
    ordered = sorted(medians)
    q1, q3 = quantile(ordered, 0.25), quantile(ordered, 0.75)
    iqr = (q3 or 0.0) - (q1 or 0.0)
    mean = statistics.fmean(ordered)
    cv = statistics.pstdev(ordered) / mean if len(ordered) > 1 and mean > 0 else 0.0
    return iqr, cv


def fleet_ops_table(host_tables: Iterable[tuple[str, OpsTable]]) -> FleetOpsTable | None:
    """The fleet table of the given (host, table) pairs, all of one accelerator; None when
    there is none. ValueError when the tables name different accelerators."""
    pairs = list(host_tables)
    if not pairs:
        return None
    accelerators = {t.accelerator for _, t in pairs}
    if len(accelerators) > 1:
        named = sorted(map(str, accelerators))
        raise ValueError(f"one accelerator's tables at a time, got {named}")
    times: dict[RowKey, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    rows: dict[RowKey, BaseModel] = {}
    for host, table in pairs:
        for section in ROW_SECTIONS:
            for row in getattr(table, section):
                key = _key(section, row)
                rows.setdefault(key, row)
                times[key][host].append(row.median_us)
    voted: dict[str, list[BaseModel]] = defaultdict(list)
    ignored: list[tuple[str, str, str]] = []
    for key, per_host in times.items():
        vote = host_vote((h, sorted(v)) for h, v in sorted(per_host.items()))
        voted[key[0]].append(_voted_row(rows[key], per_host, vote))
        ignored.extend((_label(key), i.host, i.why) for i in vote.ignored)
    newest = max((t for _, t in pairs), key=lambda t: t.measured_at)
    return FleetOpsTable(
        _table(newest, pairs, voted, len(ignored)),
        tuple(sorted({h for h, _ in pairs})),
        tuple(ignored),
    )


def _voted_row(row: BaseModel, per_host: Mapping[str, list[float]], vote: HostVote) -> BaseModel:
    left_out = {i.host for i in vote.ignored}
    kept = [quantile(sorted(v), 0.5) or 0.0 for h, v in per_host.items() if h not in left_out]
    iqr, cv = _spread(kept)
    assert vote.ratio is not None  # every row has at least one host's time
    return row.model_copy(update={"median_us": vote.ratio, "iqr_us": iqr, "cv": cv})


def _table(
    newest: OpsTable,
    pairs: list[tuple[str, OpsTable]],
    voted: Mapping[str, list[BaseModel]],
    left_out: int,
) -> OpsTable:
    hosts = sorted({h for h, _ in pairs})
    stacks = sorted(
        {f"torch {t.stack.torch}, CUDA {t.stack.cuda}, driver {t.stack.driver}" for _, t in pairs}
    )
    # the least detailed mode among the hosts' tables (the model uses full tables only)
    mode = min((t.mode for _, t in pairs), key=("tiny", "quick", "full").index)
    notes = [
        f"fleet table: {len(hosts)} host(s) voted ({', '.join(hosts[:8])}"
        + (f" and {len(hosts) - 8} more" if len(hosts) > 8 else "")
        + f"), {len(pairs)} table(s); {left_out} host time(s) left out as outliers",
    ]
    if len(stacks) > 1:
        notes.append("hosts ran different stacks: " + "; ".join(stacks))
    return newest.model_copy(
        update={
            "mode": mode,
            "duration_s": sum(t.duration_s for _, t in pairs),
            "notes": notes + list(newest.notes),
            **{section: voted.get(section, []) for section in ROW_SECTIONS},
        }
    )
