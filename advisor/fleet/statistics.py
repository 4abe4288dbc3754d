"""Fleet statistics of probe checks: the one computation behind the service's fleet summary
(advisor.store) and the review's measured / expected table and outliers (advisor.review).

Pure and single-pass: each check of each run is read once; medians and percentiles of
measured / expected come from probes.stats.quantile (linear interpolation, numpy's default).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from probes.stats import quantile

# The accelerator key: the store files unmatched runs under None, the review under "unknown".
A = TypeVar("A", bound=Hashable)


@dataclass(frozen=True)
class PlausibleBand:
    """The measured / expected ratios that can be a measurement of the part the expectation is
    for; the others are ignored (and counted), so that a few bad reports cannot move a median."""

    low: float
    high: float
    why: str

    def holds(self, ratio: float) -> bool:
        return self.low <= ratio <= self.high  # False for NaN


PLAUSIBLE_RATIO = PlausibleBand(
    0.05,
    1.5,
    why="Expectations are datasheet peaks (or link rates), and real probe runs measure 0.1 to "
    "1.3 of them (benchmarks/results). Above 1.5 a part would beat its datasheet's peak by half "
    "again, which boost clocks cannot do: the report mixed units, read a sparse figure as dense "
    "or is made up. Below 0.05 the run measured something else than the part (a CPU fallback, a "
    "device shared or stalled); its failed status still counts against the host.",
)


# A host whose median ratio is this many spreads from the fleet's median is left out of the
# fleet's ratio: the modified z-score of Iglewicz and Hoaglin, |x - median| / (1.4826 MAD), whose
# 3.5 they recommend; 1.4826 makes the MAD a standard deviation for normal data.
OUTLIER_Z = 3.5
MAD_TO_SIGMA = 1.4826
# The spread is at least this share of the median: hosts that agree to the digit (a MAD of 0)
# would otherwise make a host 1% off an outlier. 2% is the run-to-run noise of a matmul probe
# (benchmarks/results: cv of 1-2%).
MIN_RELATIVE_SPREAD = 0.02
# Fewer hosts than this: no median to be far from (one or two votes), every host counts.
MIN_HOSTS_FOR_OUTLIERS = 3


@dataclass(frozen=True)
class IgnoredHost:
    host: str
    ratio: float  # the host's median measured / expected
    why: str


@dataclass(frozen=True)
class HostVote:
    """A check's fleet ratio with one vote per host: each host's median ratio, the median of
    those, leaving out hosts far from it (OUTLIER_Z). Many reports from one host, or a few hosts
    reporting made-up figures inside the plausible band, do not move it (counted
    one vote per report, six reports at 1.49 moved training estimates by 19%)."""

    ratio: float | None  # None without a host
    hosts: int  # the hosts voting
    runs: int  # their runs with a plausible ratio
    ignored: tuple[IgnoredHost, ...] = ()
    # The distinct write tokens the voting hosts' runs came through (sources_of), the other
    # count of independent sources: one token can name many hosts. None where no run says.
    tokens: int | None = None


def sources_of(host_tokens: Iterable[tuple[str, str | None]], vote: HostVote) -> HostVote:
    """`vote` (of host_vote) with its tokens counted: the distinct tokens among the (host,
    token id) pairs of its runs, leaving out the hosts the vote ignored; None when no pair names
    a token (reports stored without one)."""
    out = {i.host for i in vote.ignored}
    pairs = [(h, t) for h, t in host_tokens if t is not None]
    if not pairs:
        return vote
    return replace(vote, tokens=len({t for h, t in pairs if h not in out}))


def host_vote(host_ratios: Iterable[tuple[str, Sequence[float]]]) -> HostVote:
    """The vote over (host, that host's plausible ratios in ascending order)."""
    medians = [(h, m, len(r)) for h, r in host_ratios if (m := quantile(r, 0.5)) is not None]
    return vote_of_medians(medians)


def vote_of_medians(medians: Sequence[tuple[str, float, int]]) -> HostVote:
    """host_vote over (host, its median ratio, its runs): where the hosts' medians are kept
    already (the store's fleet aggregates, advisor/store/aggregates.py)."""
    if not medians:
        return HostVote(None, 0, 0)
    center = quantile(sorted(m for _, m, _ in medians), 0.5)
    assert center is not None  # (medians is not empty)
    kept, ignored = medians, []
    if len(medians) >= MIN_HOSTS_FOR_OUTLIERS:
        mad = quantile(sorted(abs(m - center) for _, m, _ in medians), 0.5) or 0.0
        spread = max(MAD_TO_SIGMA * mad, MIN_RELATIVE_SPREAD * abs(center))
        limit = OUTLIER_Z * spread
        # (as bounds on the median, not as |m - center|: the same comparisons as the service's
        # running vote, advisor.api.state, which finds them by bisection)
        low, high = center - limit, center + limit
        kept = [v for v in medians if low <= v[1] <= high]
        ignored = [
            IgnoredHost(
                h,
                m,
                f"its median {m:.3f} is {abs(m - center) / spread:.1f} spreads from the fleet's"
                f" {center:.3f} (more than {OUTLIER_Z:g}; spread {spread:.3f}: 1.4826 MAD, at"
                f" least {MIN_RELATIVE_SPREAD:.0%} of the median)",
            )
            for h, m, _ in medians
            if not low <= m <= high
        ]
    ratio = quantile(sorted(m for _, m, _ in kept), 0.5)
    return HostVote(ratio, len(kept), sum(n for _, _, n in kept), tuple(ignored))


class RunningVote:
    """host_vote kept up to date one ratio at a time, in O(log hosts) per ratio plus the hosts
    left out, for the service's in-memory calibration: recomputing host_vote over every host on
    each report would cost a fleet of 6,400 hosts milliseconds per report. Gives the very floats
    host_vote gives (the same formulas on the same sorted values)."""

    def __init__(self) -> None:
        self._ratios: dict[str, list[float]] = {}  # per host, ascending
        self._medians: list[tuple[float, str]] = []  # (host median, host), ascending
        self._runs = 0
        # per write token id: the hosts it reported for (sources_of counts the tokens)
        self._token_hosts: dict[str, set[str]] = {}

    def add_host(self, host: str, ratios: Sequence[float], token_ids: Iterable[str] = ()) -> None:
        """A host not voting yet, with its ratios (ascending) at once: a whole read of a fleet's
        ratios costs one median a host, not one a ratio."""
        if host in self._ratios or not ratios:
            raise ValueError(f"add_host: {host!r} votes already, or has no ratio")
        for token in token_ids:
            self._token_hosts.setdefault(token, set()).add(host)
        kept = self._ratios[host] = list(ratios)
        bisect.insort(self._medians, (quantile(kept, 0.5) or 0.0, host))
        self._runs += len(kept)

    def add(self, host: str, ratio: float, token_id: str | None = None) -> None:
        if token_id is not None:
            self._token_hosts.setdefault(token_id, set()).add(host)
        ratios = self._ratios.setdefault(host, [])
        if ratios:
            old = (quantile(ratios, 0.5) or 0.0, host)
            del self._medians[bisect.bisect_left(self._medians, old)]
        bisect.insort(ratios, ratio)
        bisect.insort(self._medians, (quantile(ratios, 0.5) or 0.0, host))
        self._runs += 1

    def vote(self) -> HostVote:
        """The vote's ratio, hosts and runs (not the hosts left out: see host_vote)."""
        medians = self._medians
        n = len(medians)
        if not n:
            return HostVote(None, 0, 0)
        center = _interpolated(lambda i: medians[i][0], n)
        lo, hi = 0, n
        if n >= MIN_HOSTS_FOR_OUTLIERS:
            # the deviations |m - center| as two ascending runs: below the center (read from
            # the center outwards) and from it upwards; their median by selection
            split = bisect.bisect_left(medians, center, key=lambda t: t[0])

            def below(i: int) -> float:
                return center - medians[split - 1 - i][0]

            def above(i: int) -> float:
                return medians[split + i][0] - center

            def deviation(k: int) -> float:
                return _kth_of_two(below, split, above, n - split, k)

            mad = _interpolated(deviation, n)
            spread = max(MAD_TO_SIGMA * mad, MIN_RELATIVE_SPREAD * abs(center))
            limit = OUTLIER_Z * spread
            lo = bisect.bisect_left(medians, center - limit, key=lambda t: t[0])
            hi = bisect.bisect_right(medians, center + limit, key=lambda t: t[0])
        left_out = (*medians[:lo], *medians[hi:])
        runs = self._runs - sum(len(self._ratios[h]) for _, h in left_out)
        ratio = _interpolated(lambda i: medians[lo + i][0], hi - lo) if hi > lo else None
        return self._with_tokens(HostVote(ratio, hi - lo, runs), {h for _, h in left_out})

    def _with_tokens(self, vote: HostVote, left_out: set[str]) -> HostVote:
        """sources_of over the tokens' hosts: O(tokens + hosts left out), not O(hosts)."""
        if not self._token_hosts:
            return vote
        kept = sum(1 for hosts in self._token_hosts.values() if not hosts <= left_out)
        return replace(vote, tokens=kept)


def _interpolated(value: Callable[[int], float], n: int) -> float:
    """probes.stats.quantile(values, 0.5) of n ascending values given by index."""
    pos = (n - 1) * 0.5
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return value(lo) + (value(hi) - value(lo)) * (pos - lo)


def _kth_of_two(
    a: Callable[[int], float], na: int, b: Callable[[int], float], nb: int, k: int
) -> float:
    """The k-th smallest (0-based) of two ascending sequences given by index, by bisection on
    how many of the first k + 1 come from `a`."""
    lo, hi = max(0, k + 1 - nb), min(k + 1, na)
    while True:
        i = (lo + hi) // 2
        j = k + 1 - i
        if i > 0 and j < nb and a(i - 1) > b(j):
            hi = i - 1
        elif j > 0 and i < na and b(j - 1) > a(i):
            lo = i + 1
        else:
            return max(a(i - 1) if i > 0 else -math.inf, b(j - 1) if j > 0 else -math.inf)


# One check: (name, status, measured, expected, unit); advisor.review.data.CheckResult is one.
Check = tuple[str, str, float | None, float | None, str | None]
# One probe run's checks: (accelerator, host, checks). Plain tuples, not classes: the review
# reads 170,000 checks and construction time counts.
RunChecks = tuple[A, str, Iterable[Check]]


@dataclass(frozen=True)
class CheckStats(Generic[A]):
    """One accelerator's check over the fleet."""

    accelerator: A
    check: str
    unit: str | None  # of the first run with a ratio
    runs: int  # every run of the check, whatever its status
    ratios: int  # runs with a measured and a non-zero expected value, inside PLAUSIBLE_RATIO
    ignored: int  # runs whose ratio is outside PLAUSIBLE_RATIO (not in the median)
    median: float | None  # of measured / expected; None without a ratio
    p10: float | None
    p90: float | None
    statuses: dict[str, int]  # runs per status, by status name
    vote: HostVote  # one vote per host (host_vote)


@dataclass(frozen=True)
class HostCheck(Generic[A]):
    """One host's runs of one check."""

    host: str
    accelerator: A
    check: str
    runs: int
    failed: int
    median: float | None  # of the host's ratios


@dataclass(frozen=True)
class FleetStatistics(Generic[A]):
    checks: dict[tuple[A, str], CheckStats[A]]  # sorted by accelerator (None last), then check
    hosts: list[HostCheck[A]]  # in order of first appearance

    def for_accelerator(self, accelerator: A) -> list[CheckStats[A]]:
        return [s for (acc, _), s in self.checks.items() if acc == accelerator]

    def hosts_of(self, accelerator: A) -> set[str]:
        return {h.host for h in self.hosts if h.accelerator == accelerator}

    def failing_hosts(self, accelerator: A) -> list[str]:
        """Hosts with at least one failed run of any check, sorted."""
        return sorted({h.host for h in self.hosts if h.accelerator == accelerator and h.failed})


def _key_order(key: tuple[Hashable, str]) -> tuple[bool, str, str]:
    acc, check = key
    return (acc is None, str(acc or ""), check)


def fleet_statistics(runs: Iterable[RunChecks[A]]) -> FleetStatistics[A]:
    """Per (accelerator, check): runs, status counts, median / p10 / p90 of measured / expected;
    per (host, accelerator, check): runs, failures and the host's median ratio."""
    fleet_ratios: dict[tuple[A, str], list[float]] = defaultdict(list)
    statuses: dict[tuple[A, str, str], int] = defaultdict(int)
    units: dict[tuple[A, str], str | None] = {}
    host_ratios: dict[tuple[str, A, str], list[float]] = defaultdict(list)
    host_runs: dict[tuple[str, A, str], int] = defaultdict(int)
    host_failed: dict[tuple[str, A, str], int] = defaultdict(int)
    ignored: dict[tuple[A, str], int] = defaultdict(int)
    plausible = PLAUSIBLE_RATIO.holds
    # One loop over every check of every run, flat keys: the review reads 170,000 checks here.
    for acc, host, checks in runs:
        for name, status, measured, expected, unit in checks:
            statuses[(acc, name, status)] += 1
            hk = (host, acc, name)
            host_runs[hk] += 1
            if status == "fail":
                host_failed[hk] += 1
            ratio = ratio_of(measured, expected)
            if ratio is not None:
                if not plausible(ratio):
                    ignored[(acc, name)] += 1
                    continue
                fleet_ratios[(acc, name)].append(ratio)
                host_ratios[hk].append(ratio)
                if (acc, name) not in units:
                    units[(acc, name)] = unit
    per_check: dict[tuple[A, str], dict[str, int]] = defaultdict(dict)
    for (acc, name, status), n in statuses.items():
        per_check[(acc, name)][status] = n
    by_check: dict[tuple[A, str], list[tuple[str, list[float]]]] = defaultdict(list)
    for (host, acc, name), ratios in host_ratios.items():
        by_check[(acc, name)].append((host, sorted(ratios)))
    checks_stats = {
        key: _check_stats(
            key,
            sorted(fleet_ratios.get(key, ())),
            ignored.get(key, 0),
            per_check[key],
            units.get(key),
            host_vote(by_check.get(key, ())),
        )
        for key in sorted(per_check, key=_key_order)
    }
    hosts = [
        HostCheck(hk[0], hk[1], hk[2], n, host_failed.get(hk, 0), _median(host_ratios.get(hk)))
        for hk, n in host_runs.items()
    ]
    return FleetStatistics(checks_stats, hosts)


def ratio_of(measured: float | None, expected: float | None) -> float | None:
    """measured / expected, where both are known and the expectation is not zero."""
    return measured / expected if measured is not None and expected else None


def _median(values: list[float] | None) -> float | None:
    return quantile(sorted(values), 0.5) if values else None


def _check_stats(
    key: tuple[A, str],
    ratios: list[float],
    ignored: int,
    statuses: dict[str, int],
    unit: str | None,
    vote: HostVote,
) -> CheckStats[A]:
    return CheckStats(
        accelerator=key[0],
        check=key[1],
        unit=unit,
        runs=sum(statuses.values()),
        ratios=len(ratios),
        ignored=ignored,
        median=quantile(ratios, 0.5),
        p10=quantile(ratios, 0.10),
        p90=quantile(ratios, 0.90),
        statuses=dict(sorted(statuses.items())),
        vote=vote,
    )
