"""The fleet summary's aggregates, kept up to date in the transaction that stores each report
(advisor/store/sql.py), so that GET /v1/fleet/summary reads a few thousand aggregate rows
instead of every check of every report (tables: advisor/store/schema.py, created and filled
from the stored checks by migration 0008).

Counts are exact: reports per verdict, runs and failures per host, runs per check and status,
ratios left out of the plausible band. The ratios behind the medians are kept as a histogram of
relative width RATIO_STEP per (accelerator, check) bucket, with each bucket's count, lowest and
highest ratio: a quantile that falls on a bucket's lowest or highest ratio (always, for a bucket
of one or two) is exact, one inside a bucket of more is interpolated between them, off by less
than RATIO_STEP of the ratio (0.1%: a tenth of a matmul probe's run-to-run noise). The voted
checks' ratios (advisor.perf.calibration.VOTED_CHECKS: the matmul and the GPU link) are kept the
same way per host, for their votes of one per host.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import sqlalchemy as sa

from advisor.fleet.statistics import PLAUSIBLE_RATIO, ratio_of, vote_of_medians
from advisor.perf.calibration import CALIBRATION_CHECK, LINK_CHECK, VOTED_CHECKS
from advisor.store import bulk
from advisor.store.base import CheckRow, FleetSummary
from advisor.store.schema import (
    AGGREGATES,
    fleet_check_statuses,
    fleet_hosts,
    fleet_ratios,
    fleet_verdicts,
    fleet_vote_tokens,
    fleet_votes,
)
from probes.stats import quantile

RATIO_STEP = 1e-3  # a bucket's width, relative to its ratios
_LOG_STEP = math.log1p(RATIO_STEP)
IGNORED = -(10**6)  # the bucket of the ratios outside PLAUSIBLE_RATIO (counted, never read)
NO_ACCELERATOR = ""  # the key of runs that matched no accelerator (a key column is never NULL)


def bucket_of(ratio: float) -> int:
    return math.floor(math.log(ratio) / _LOG_STEP)


def acc_key(accelerator: str | None) -> str:
    return accelerator if accelerator is not None else NO_ACCELERATOR


@dataclass
class Deltas:
    """What one report adds to each aggregate table: rows keyed as the table is."""

    verdicts: dict[tuple[str, str], int] = field(default_factory=dict)
    hosts: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # [runs, failed]
    statuses: dict[tuple[str, str, str], int] = field(default_factory=dict)
    ratios: dict[tuple[str, str, int], list[float]] = field(default_factory=dict)  # n, lo, hi
    # (accelerator, voted check, host, bucket) and (accelerator, voted check, host, token)
    votes: dict[tuple[str, str, str, int], list[float]] = field(default_factory=dict)
    tokens: set[tuple[str, str, str, str]] = field(default_factory=set)


def _add_ratio(into: dict[Any, list[float]], key: tuple[Any, ...], r: float) -> None:
    kept = into.get(key)
    if kept is None:
        into[key] = [1, r, r]
    else:
        kept[0] += 1
        kept[1], kept[2] = min(kept[1], r), max(kept[2], r)


def deltas(reports: Iterable[tuple[str | None, str]], rows: Iterable[CheckRow]) -> Deltas:
    """The aggregates' deltas of some reports ((accelerator, verdict) each) and their checks."""
    d = Deltas()
    for accelerator, verdict in reports:
        key = (acc_key(accelerator), verdict)
        d.verdicts[key] = d.verdicts.get(key, 0) + 1
    for row in rows:
        _add_check(d, row)
    return d


def _add_check(d: Deltas, row: CheckRow) -> None:
    acc = acc_key(row.accelerator)
    host = d.hosts.setdefault((acc, row.host), [0, 0])
    host[0] += 1
    host[1] += row.status == "fail"
    skey = (acc, row.name, row.status)
    d.statuses[skey] = d.statuses.get(skey, 0) + 1
    ratio = ratio_of(row.measured, row.expected)
    if ratio is None:
        return
    if not PLAUSIBLE_RATIO.holds(ratio):
        _add_ratio(d.ratios, (acc, row.name, IGNORED), ratio)
        return
    _add_ratio(d.ratios, (acc, row.name, bucket_of(ratio)), ratio)
    if row.name in VOTED_CHECKS:
        _add_ratio(d.votes, (acc, row.name, row.host, bucket_of(ratio)), ratio)
        if row.token_id is not None:
            d.tokens.add((acc, row.name, row.host, row.token_id))


def _add_counts(table: sa.Table, excluded: Any) -> dict[str, Any]:
    """A counted table's SET clause: each count column plus the delta's."""
    return {c.name: c + excluded[c.name] for c in table.columns if not c.primary_key}


def _merge_buckets(table: sa.Table, excluded: Any) -> dict[str, Any]:
    """A histogram bucket's SET clause: counts added, lowest and highest kept."""
    return {
        "n": table.c.n + excluded.n,
        "lo": sa.case((excluded.lo < table.c.lo, excluded.lo), else_=table.c.lo),
        "hi": sa.case((excluded.hi > table.c.hi, excluded.hi), else_=table.c.hi),
    }


def _keyed(keys: tuple[str, ...], rows: dict[Any, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**dict(zip(keys, k, strict=True)), **v} for k, v in rows.items()]


def apply(conn: sa.Connection, d: Deltas) -> None:
    """Add `d` to the tables, a statement a table (advisor/store/bulk.py), tables in one fixed
    order and each table's rows in key order: simultaneous writers lock the rows they share in
    the same order (no deadlock on PostgreSQL)."""
    counted = (
        (
            fleet_verdicts,
            ("accelerator", "verdict"),
            {k: {"reports": n} for k, n in d.verdicts.items()},
        ),
        (
            fleet_hosts,
            ("accelerator", "host"),
            {k: {"runs": v[0], "failed": v[1]} for k, v in d.hosts.items()},
        ),
        (
            fleet_check_statuses,
            ("accelerator", "name", "status"),
            {k: {"runs": n} for k, n in d.statuses.items()},
        ),
    )
    for table, keys, rows in counted:
        bulk.upsert_many(conn, table, keys, _keyed(keys, rows), _add_counts)
    histograms: tuple[tuple[sa.Table, tuple[str, ...], dict[Any, list[float]]], ...] = (
        (fleet_ratios, ("accelerator", "name", "bucket"), d.ratios),
        (fleet_votes, ("accelerator", "name", "host", "bucket"), d.votes),
    )
    for table, columns, ratio_rows in histograms:
        histogram = {k: {"n": v[0], "lo": v[1], "hi": v[2]} for k, v in ratio_rows.items()}
        bulk.upsert_many(conn, table, columns, _keyed(columns, histogram), _merge_buckets)
    if d.tokens:
        names = ("accelerator", "name", "host", "token_id")
        bulk.upsert_many(
            conn,
            fleet_vote_tokens,
            names,
            [dict(zip(names, k, strict=True)) for k in d.tokens],
            None,
        )


REBUILD_PAGE = 20_000  # check rows read at a time by `rebuild`


def rebuild(conn: sa.Connection) -> None:
    """Every aggregate emptied and filled again from the stored reports and checks (the
    migrations that create or reshape them)."""
    for table in AGGREGATES:
        # checkfirst: a table that outlived the probe tables (dropped by an operator, migrated
        # again) is kept, as 0003 keeps the utilisation table
        table.create(conn, checkfirst=True)
        conn.execute(table.delete())
    reports = conn.execute(sa.text("SELECT accelerator, verdict FROM probe_reports")).all()
    apply(conn, deltas([tuple(r) for r in reports], ()))
    # keyset pages of the checks by report id, whole reports at a time ((report_id, name) is
    # not unique)
    after = ""
    while True:
        ids = (
            conn.execute(
                sa.text("SELECT id FROM probe_reports WHERE id > :after ORDER BY id LIMIT :n"),
                {"after": after, "n": max(REBUILD_PAGE // 300, 1)},
            )
            .scalars()
            .all()
        )
        if not ids:
            return
        rows = conn.execute(
            sa.text(
                "SELECT report_id, host, accelerator, name, status, measured, expected, token_id"
                " FROM probe_checks WHERE report_id >= :first AND report_id <= :last"
            ),
            {"first": ids[0], "last": ids[-1]},
        ).all()
        apply(conn, deltas((), [CheckRow(*r) for r in rows]))
        after = ids[-1]


class BucketValues(Sequence[float]):
    """The ascending ratios of a histogram (bucket order), value by rank: a bucket's first and
    last ranks are its lowest and highest ratios, the ranks between them interpolated."""

    def __init__(self, buckets: Iterable[tuple[int, int, float, float]]) -> None:
        self._buckets = sorted(buckets)  # (bucket, n, lo, hi)
        self._ends: list[int] = []  # cumulative counts
        total = 0
        for _, n, _, _ in self._buckets:
            total += n
            self._ends.append(total)

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    @overload
    def __getitem__(self, i: int) -> float: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[float]: ...
    def __getitem__(self, i: int | slice) -> float | Sequence[float]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        b = bisect.bisect_right(self._ends, i)
        _, n, lo, hi = self._buckets[b]
        rank = i - (self._ends[b] - n)
        if rank == 0 or n == 1:
            return lo
        if rank == n - 1:
            return hi
        return lo + (hi - lo) * rank / (n - 1)

    def __iter__(self) -> Iterator[float]:
        return (self[i] for i in range(len(self)))


def reports_counted(conn: sa.Connection) -> int:
    """How many reports the aggregates hold (each adds one verdict)."""
    stmt = sa.select(sa.func.coalesce(sa.func.sum(fleet_verdicts.c.reports), 0))
    return int(conn.execute(stmt).scalar_one())


def summaries(conn: sa.Connection, accelerator: str | None) -> list[FleetSummary]:
    """The fleet summary (advisor.store.base.summarize_fleet's figures) from the aggregates."""

    def rows(table: sa.Table) -> Sequence[Any]:
        stmt = sa.select(table)
        if accelerator is not None:
            stmt = stmt.where(table.c.accelerator == acc_key(accelerator))
        return conn.execute(stmt).all()

    verdicts: dict[str, dict[str, int]] = defaultdict(dict)
    for acc, verdict, n in rows(fleet_verdicts):
        if n:
            verdicts[acc][verdict] = n
    hosts: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for acc, host, _, failed in rows(fleet_hosts):
        hosts[acc].append((host, failed))
    statuses: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for acc, name, status, n in rows(fleet_check_statuses):
        statuses[acc][name][status] = n
    ratios: dict[tuple[str, str], list[tuple[int, int, float, float]]] = defaultdict(list)
    for acc, name, bucket, n, lo, hi in rows(fleet_ratios):
        ratios[(acc, name)].append((bucket, n, lo, hi))
    voted = _host_votes(rows(fleet_votes), rows(fleet_vote_tokens))
    order = sorted(verdicts, key=lambda a: (a == NO_ACCELERATOR, a))
    return [
        FleetSummary(
            acc or None,
            sum(verdicts[acc].values()),
            len(hosts[acc]),
            verdicts[acc],
            {
                name: _figures(by_status, ratios.get((acc, name), []))
                for name, by_status in sorted(statuses[acc].items())
            },
            sorted(h for h, failed in hosts[acc] if failed),
            _vote_of(voted, acc, CALIBRATION_CHECK, statuses[acc]),
            _vote_of(voted, acc, LINK_CHECK, statuses[acc]),
        )
        for acc in order
    ]


def _host_votes(vote_rows: Sequence[Any], token_rows: Sequence[Any]) -> dict[tuple[str, str], Any]:
    """Each (accelerator, voted check)'s vote of one per host, from fleet_votes and its tokens."""
    per_host: dict[tuple[str, str], dict[str, list[tuple[int, int, float, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for acc, name, host, bucket, n, lo, hi in vote_rows:
        per_host[(acc, name)][host].append((bucket, n, lo, hi))
    tokens: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for acc, name, host, token in token_rows:
        tokens[(acc, name)].append((host, token))
    return {key: _vote(hosts, tokens.get(key, [])) for key, hosts in per_host.items()}


def _vote_of(
    voted: dict[tuple[str, str], Any], acc: str, check: str, statuses: dict[str, Any]
) -> Any:
    """A voted check's vote where the accelerator ran it (an empty vote where none of its runs
    had a plausible ratio); None where it never ran it."""
    if check not in statuses:
        return None
    return voted.get((acc, check)) or _vote(None, [])


def _figures(
    by_status: dict[str, int], buckets: list[tuple[int, int, float, float]]
) -> dict[str, float | int | None]:
    """advisor.store.base._summary_figures's wording of one check."""
    ignored = sum(n for b, n, _, _ in buckets if b == IGNORED)
    values = BucketValues(b for b in buckets if b[0] != IGNORED)
    return {
        "count": sum(by_status.values()),
        "ratios": len(values),
        "ratio_median": quantile(values, 0.5),
        "ratio_p10": quantile(values, 0.10),
        "ratio_p90": quantile(values, 0.90),
        "ratios_ignored": ignored,
        **{f"status_{k}": n for k, n in sorted(by_status.items())},
    }


def _vote(
    per_host: dict[str, list[tuple[int, int, float, float]]] | None,
    host_tokens: list[tuple[str, str]],
) -> Any:
    from advisor.fleet.statistics import sources_of

    medians = []
    for host, buckets in sorted((per_host or {}).items()):
        values = BucketValues(buckets)
        median = quantile(values, 0.5)
        if median is not None:
            medians.append((host, median, len(values)))
    return sources_of(host_tokens, vote_of_medians(medians))
