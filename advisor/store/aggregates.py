"""The fleet summary's and the review's aggregates, kept up to date in the transaction that
stores each report (advisor/store/sql.py), so that GET /v1/fleet/summary reads a few thousand
aggregate rows and the review (advisor/store/digest.py) about a hundred a host, instead of every
check of every report (tables: advisor/store/schema.py, created and filled from the stored
reports by migrations 0008 to 0010).

Counts are exact: reports per verdict, runs and failures per host, runs per check and status,
ratios left out of the plausible band. The ratios behind the medians are kept as a histogram of
relative width RATIO_STEP per (accelerator, check) bucket, with each bucket's count, lowest and
highest ratio: a quantile that falls on a bucket's lowest or highest ratio (always, for a bucket
of one or two) is exact, one inside a bucket of more is interpolated between them, off by less
than RATIO_STEP of the ratio (0.1%: a tenth of a matmul probe's run-to-run noise). The voted
checks' ratios (advisor.perf.calibration.VOTED_CHECKS: the matmul, the GPU link, the network)
are kept the same way per host, for their votes of one per host; every check's ratios per host
in wider buckets (HOST_RATIO_STEP), for the review's outliers. Each host's and GPU's latest
report is kept whole (what the review shows of it), replaced by a newer one only.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import sqlalchemy as sa

from advisor.fleet.digest import LatestGpu, LatestHost, latest_gpus, latest_host, newer
from advisor.fleet.records import ProbeRecord, StoredView, probe_record
from advisor.fleet.statistics import PLAUSIBLE_RATIO, ratio_of, vote_of_medians
from advisor.perf.calibration import CALIBRATION_CHECK, LINK_CHECK, NETWORK_CHECK, VOTED_CHECKS
from advisor.store import bulk
from advisor.store.base import CheckRow, FleetSummary, HostRatios, check_rows
from advisor.store.bulk import Upsert
from advisor.store.schema import (
    AGGREGATES,
    fleet_check_statuses,
    fleet_check_units,
    fleet_host_checks,
    fleet_host_ratios,
    fleet_latest_gpus,
    fleet_latest_hosts,
    fleet_ratios,
    fleet_verdicts,
    fleet_vote_tokens,
    fleet_votes,
)
from probes.report import ProbeReport
from probes.stats import quantile

RATIO_STEP = 1e-3  # a bucket's width, relative to its ratios
_LOG_STEP = math.log1p(RATIO_STEP)
# Each host's ratios of every check, for its median (the review's outliers), in buckets ten times
# as wide: a host's median is then off by less than 1% of it (a third of the review's
# OUTLIER_GAP), and a fleet of 1,000 hosts keeps about 100,000 such rows, not a million.
HOST_RATIO_STEP = 1e-2
_HOST_LOG_STEP = math.log1p(HOST_RATIO_STEP)
IGNORED = -(10**6)  # the bucket of the ratios outside PLAUSIBLE_RATIO (counted, never read)
NO_ACCELERATOR = ""  # the key of runs that matched no accelerator (a key column is never NULL)


def bucket_of(ratio: float) -> int:
    return math.floor(math.log(ratio) / _LOG_STEP)


def host_bucket_of(ratio: float) -> int:
    return math.floor(math.log(ratio) / _HOST_LOG_STEP)


def acc_key(accelerator: str | None) -> str:
    return accelerator if accelerator is not None else NO_ACCELERATOR


@dataclass
class Deltas:
    """What one report adds to each aggregate table: rows keyed as the table is."""

    verdicts: dict[tuple[str, str], int] = field(default_factory=dict)
    statuses: dict[tuple[str, str, str], int] = field(default_factory=dict)
    ratios: dict[tuple[str, str, int], list[float]] = field(default_factory=dict)  # n, lo, hi
    # (accelerator, voted check, host, bucket) and (accelerator, voted check, host, token)
    votes: dict[tuple[str, str, str, int], list[float]] = field(default_factory=dict)
    tokens: set[tuple[str, str, str, str]] = field(default_factory=set)
    # (accelerator, host, check) -> [runs, failed] (the summary's hosts, the review's too);
    # the review's (advisor/fleet/digest.py): (accelerator, host, check, host bucket) ->
    # [n, lo, hi]; (accelerator, check) -> unit;
    # host -> its latest report and earliest created_at; GPU key -> its latest report
    host_checks: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    host_ratios: dict[tuple[str, str, str, int], list[float]] = field(default_factory=dict)
    units: dict[tuple[str, str], str | None] = field(default_factory=dict)
    latest_hosts: dict[str, tuple[LatestHost, str]] = field(default_factory=dict)
    latest_gpus: dict[str, LatestGpu] = field(default_factory=dict)


def _add_ratio(into: dict[Any, list[float]], key: tuple[Any, ...], r: float) -> None:
    kept = into.get(key)
    if kept is None:
        into[key] = [1, r, r]
    else:
        kept[0] += 1
        kept[1], kept[2] = min(kept[1], r), max(kept[2], r)


def deltas(records: Iterable[ProbeRecord], rows: Iterable[CheckRow]) -> Deltas:
    """The aggregates' deltas of some reports (the store's records of them) and their checks."""
    d = Deltas()
    for record in records:
        _add_report(d, record)
    for row in rows:
        _add_check(d, row)
    return d


def _add_report(d: Deltas, r: ProbeRecord) -> None:
    acc = acc_key(r.accelerator)
    key = (acc, r.verdict)
    d.verdicts[key] = d.verdicts.get(key, 0) + 1
    for c in r.checks:
        ratio = ratio_of(c.measured, c.expected)
        if ratio is not None and PLAUSIBLE_RATIO.holds(ratio):
            d.units.setdefault((acc, c.name), c.unit)
    held = d.latest_hosts.get(r.host)
    first = min(filter(None, (r.created_at, held[1] if held else None)), default="")
    if held is None or newer(r.created_at, held[0].created_at):
        d.latest_hosts[r.host] = (latest_host(r), first)
    else:
        d.latest_hosts[r.host] = (held[0], first)
    for gpu_key, gpu in latest_gpus(r):
        seen = d.latest_gpus.get(gpu_key)
        if seen is None or newer(r.created_at, seen.created_at):
            d.latest_gpus[gpu_key] = gpu


def report_deltas(
    record: ProbeRecord, report: ProbeReport | StoredView, token_id: str | None
) -> Deltas:
    """deltas([record], check_rows(record.id, report, token_id)) without a CheckRow a check:
    what the store's write of one report adds (its 300 rows cost a quarter of the deltas)."""
    d = Deltas()
    _add_report(d, record)
    acc = acc_key(record.accelerator)
    for c in report.checks:
        _add_check_of(d, acc, record.host, c.name, c.status, (c.measured, c.expected), token_id)
    return d


def _add_check(d: Deltas, row: CheckRow) -> None:
    acc = acc_key(row.accelerator)
    _add_check_of(
        d, acc, row.host, row.name, row.status, (row.measured, row.expected), row.token_id
    )


def _add_check_of(
    d: Deltas,
    acc: str,
    host: str,
    name: str,
    status: str,
    measured_expected: tuple[float | None, float | None],
    token_id: str | None,
) -> None:
    mine = d.host_checks.setdefault((acc, host, name), [0, 0])
    mine[0] += 1
    mine[1] += status == "fail"
    skey = (acc, name, status)
    d.statuses[skey] = d.statuses.get(skey, 0) + 1
    ratio = ratio_of(*measured_expected)
    if ratio is None:
        return
    if not PLAUSIBLE_RATIO.holds(ratio):
        _add_ratio(d.ratios, (acc, name, IGNORED), ratio)
        return
    _add_ratio(d.ratios, (acc, name, bucket_of(ratio)), ratio)
    _add_ratio(d.host_ratios, (acc, host, name, host_bucket_of(ratio)), ratio)
    if name in VOTED_CHECKS:
        _add_ratio(d.votes, (acc, name, host, bucket_of(ratio)), ratio)
        if token_id is not None:
            d.tokens.add((acc, name, host, token_id))


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


def apply(conn: sa.Connection, d: Deltas) -> None:
    """Add `d` to the tables, a statement a table (advisor/store/bulk.py), tables in one fixed
    order and each table's rows in key order: simultaneous writers lock the rows they share in
    the same order (no deadlock on PostgreSQL). The rows of the report's own host come first;
    the fleet-wide counts and histograms, which every writer updates, come last, so that a
    writer holds their locks for the least time before its commit."""
    bulk.upsert_all(
        conn,
        [
            Upsert(
                fleet_host_checks,
                ("accelerator", "host", "name"),
                [
                    {"accelerator": a, "host": h, "name": n, "runs": v[0], "failed": v[1]}
                    for (a, h, n), v in d.host_checks.items()
                ],
                _add_counts,
            ),
            _histogram(fleet_votes, ("accelerator", "name", "host", "bucket"), d.votes),
            _histogram(fleet_host_ratios, ("accelerator", "host", "name", "bucket"), d.host_ratios),
            Upsert(
                fleet_vote_tokens,
                ("accelerator", "name", "host", "token_id"),
                [
                    {"accelerator": a, "name": n, "host": h, "token_id": t}
                    for a, n, h, t in d.tokens
                ],
                None,
            ),
            Upsert(
                fleet_latest_hosts,
                ("host",),
                [_latest_host_row(h, first) for h, first in d.latest_hosts.values()],
                _if_newer,
            ),
            Upsert(
                fleet_latest_gpus,
                ("gpu_key",),
                [_latest_gpu_row(k, g) for k, g in d.latest_gpus.items()],
                _if_newer,
            ),
            Upsert(
                fleet_check_units,
                ("accelerator", "name"),
                [{"accelerator": a, "name": n, "unit": u} for (a, n), u in d.units.items()],
                None,
            ),
            Upsert(
                fleet_verdicts,
                ("accelerator", "verdict"),
                [
                    {"accelerator": a, "verdict": v, "reports": n}
                    for (a, v), n in d.verdicts.items()
                ],
                _add_counts,
            ),
            Upsert(
                fleet_check_statuses,
                ("accelerator", "name", "status"),
                [
                    {"accelerator": a, "name": n, "status": s, "runs": runs}
                    for (a, n, s), runs in d.statuses.items()
                ],
                _add_counts,
            ),
            _histogram(fleet_ratios, ("accelerator", "name", "bucket"), d.ratios),
        ],
    )


def _histogram(table: sa.Table, keys: tuple[str, ...], rows: dict[Any, list[float]]) -> Upsert:
    """Histogram buckets (key -> [n, lo, hi]) merged into `table`."""
    named = [
        {**dict(zip(keys, k, strict=True)), "n": n, "lo": lo, "hi": hi}
        for k, (n, lo, hi) in rows.items()
    ]
    return Upsert(table, keys, named, _merge_buckets)


def _latest_host_row(h: LatestHost, first: str) -> dict[str, Any]:
    return {
        "host": h.host,
        "created_at": h.created_at or "",
        "first_at": first,
        "verdict": h.verdict,
        "driver_version": h.driver_version,
        "failed_ranks": h.failed_ranks,
        "gpus": json.dumps([list(g) for g in h.gpus]),
    }


def _latest_gpu_row(key: str, g: LatestGpu) -> dict[str, Any]:
    return {
        "gpu_key": key,
        "host": g.host,
        "created_at": g.created_at or "",
        "matched": g.matched,
        "gpu": g.gpu.gpu,
        "name": g.gpu.name,
        "verdict": g.gpu.verdict,
    }


def _if_newer(table: sa.Table, excluded: Any) -> dict[str, Any]:
    """A latest report's SET clause: the stored row replaced where the new one is newer
    (advisor.fleet.digest.newer); the earliest time kept (an empty one is none)."""
    is_newer = excluded.created_at >= table.c.created_at
    out: dict[str, Any] = {
        c.name: sa.case((is_newer, excluded[c.name]), else_=c)
        for c in table.columns
        if not c.primary_key and c.name != "first_at"
    }
    if "first_at" in table.c:
        first, mine = table.c.first_at, excluded.first_at
        earlier = sa.or_(first == "", sa.and_(mine != "", mine < first))
        out["first_at"] = sa.case((earlier, mine), else_=first)
    return out


REBUILD_PAGE = 20_000  # checks read at a time by `rebuild` (about 300 a node report)


def rebuild(conn: sa.Connection) -> None:
    """Every aggregate emptied and filled again from the stored reports and checks (the
    migrations that create or reshape them). Each stored text is read again (StoredView), a
    page of reports at a time with their checks."""
    for table in AGGREGATES:
        # checkfirst: a table that outlived the probe tables (dropped by an operator, migrated
        # again) is kept, as 0003 keeps the utilisation table
        table.create(conn, checkfirst=True)
        conn.execute(table.delete())
    # Each report's write token: its own column, or before migration 0011 its check rows' (read
    # once, grouped: that table has no index on report_id)
    before_0011 = "probe_checks" in sa.inspect(conn).get_table_names()
    tokens: dict[str, str] = {}
    if before_0011:
        grouped = "SELECT report_id, MAX(token_id) FROM probe_checks GROUP BY report_id"
        tokens = {i: t for i, t in conn.execute(sa.text(grouped)) if t is not None}
    page_q = sa.text(
        f"SELECT id, body, {'NULL' if before_0011 else 'token_id'} FROM probe_reports"
        " WHERE id > :after ORDER BY id LIMIT :n"
    )
    after = ""  # keyset pages by report id
    while True:
        page = conn.execute(page_q, {"after": after, "n": max(REBUILD_PAGE // 300, 1)}).all()
        if not page:
            return
        views = [(i, StoredView.model_validate_json(body), token) for i, body, token in page]
        records = [probe_record(i, view) for i, view, _ in views]
        rows = [
            row for i, view, token in views for row in check_rows(i, view, token or tokens.get(i))
        ]
        apply(conn, deltas(records, rows))
        after = page[-1].id


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


def summaries(
    conn: sa.Connection, accelerator: str | None, check: str | None = None
) -> list[FleetSummary]:
    """The fleet summary (the figures of a scan of every check: tests/fleet_scan.py) from the
    aggregates;
    with `check`, that check's alone (its hosts and failing hosts, every report's verdict)."""

    def rows(table: sa.Table) -> Sequence[Any]:
        stmt = sa.select(table)
        if accelerator is not None:
            stmt = stmt.where(table.c.accelerator == acc_key(accelerator))
        if check is not None and "name" in table.c:
            stmt = stmt.where(table.c.name == check)
        return conn.execute(stmt).all()

    verdicts: dict[str, dict[str, int]] = defaultdict(dict)
    for acc, verdict, n in rows(fleet_verdicts):
        if n:
            verdicts[acc][verdict] = n
    hosts: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for acc, host, failed in _host_failures(conn, accelerator, check):
        hosts[acc].append((host, failed))
    statuses: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for acc, name, status, n in rows(fleet_check_statuses):
        statuses[acc][name][status] = n
    ratios: dict[tuple[str, str], list[tuple[int, int, float, float]]] = defaultdict(list)
    for acc, name, bucket, n, lo, hi in rows(fleet_ratios):
        ratios[(acc, name)].append((bucket, n, lo, hi))
    voted = host_votes(rows(fleet_votes), rows(fleet_vote_tokens))
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
            _vote_of(voted, acc, NETWORK_CHECK, statuses[acc]),
        )
        for acc in order
    ]


def _host_failures(
    conn: sa.Connection, accelerator: str | None, check: str | None
) -> Sequence[Any]:
    """(accelerator, host, failed runs) of every host that ran a check (`check`, where given),
    from its checks' counts."""
    t = fleet_host_checks.c
    stmt = sa.select(t.accelerator, t.host, sa.func.sum(t.failed)).group_by(t.accelerator, t.host)
    if accelerator is not None:
        stmt = stmt.where(t.accelerator == acc_key(accelerator))
    if check is not None:
        stmt = stmt.where(t.name == check)
    return conn.execute(stmt).all()


def host_ratios(conn: sa.Connection, check: str) -> list[HostRatios]:
    """One voted check's ratios per (accelerator, host) from its histogram (BucketValues), with
    the host's write tokens; runs that matched no accelerator are left out, as the votes do."""
    tokens: dict[tuple[str, str], list[str]] = defaultdict(list)
    t = fleet_vote_tokens.c
    for acc, host, token in conn.execute(
        sa.select(t.accelerator, t.host, t.token_id).where(t.name == check)
    ):
        tokens[(acc, host)].append(token)
    v = fleet_votes.c
    stmt = (
        sa.select(v.accelerator, v.host, v.bucket, v.n, v.lo, v.hi)
        .where(v.name == check, v.accelerator != NO_ACCELERATOR)
        .order_by(v.accelerator, v.host, v.bucket)
    )
    return [
        HostRatios(
            acc, host, list(BucketValues(r[2:] for r in found)), tuple(sorted(tokens[(acc, host)]))
        )
        for (acc, host), found in itertools.groupby(conn.execute(stmt), key=lambda r: (r[0], r[1]))
    ]


def host_votes(vote_rows: Sequence[Any], token_rows: Sequence[Any]) -> dict[tuple[str, str], Any]:
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
    """The service's wording of one check (GET /v1/fleet/summary; tests/fleet_scan.py words a
    scan's alike)."""
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
