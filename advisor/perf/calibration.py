"""The one efficiency rule, and the fleet's calibration it reads (from probe reports).

Efficiency (model FLOP utilisation for training, share of memory bandwidth for decode) is the
workload profile's base efficiency (catalog), times the fleet's median measured / expected
matmul_bf16 for the accelerator when at least `min_reports` probe reports give that ratio.

The GPU link is fed back the same way: a node report's LINK_CHECK is its 1 GiB all-reduce (else
its largest) over what the training model assumes of that link (advisor/fleet/node_verification.py),
and the fleet's vote of that ratio scales the link every plan places work on (`link_factor`);
the network between nodes likewise, from a several-node probe's NETWORK_CHECK
(advisor/fleet/cluster_verification.py) to the network every plan across nodes assumes
(`network_factor`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol

MIN_FLEET_REPORTS = 5  # fewer measured reports than this: the fleet's median is noise
# Fewer hosts voting than this: one or two machines (or names) would set the whole fleet's
# efficiency (advisor.fleet.statistics.host_vote: one vote per host).
MIN_FLEET_HOSTS = 3


@dataclass(frozen=True)
class Calibration:
    """The fleet's median measured / expected matmul_bf16 for one accelerator."""

    ratio: float
    reports: int
    # Hosts voting (one vote each: a host's median); None where not known (a summary from a
    # service before host votes, a calibration made by hand): the reports rule alone then.
    hosts: int | None = None
    # Distinct write tokens behind the voting hosts' reports: the other count of independent
    # sources (one token can name many hosts). None where not known (no tokens, older reports).
    tokens: int | None = None
    # The fleet's vote of LINK_CHECK for the same accelerator (the node reports that carry
    # matmul_bf16 carry it too), None where no node report measured a link against the plan.
    link: Calibration | None = None
    # The fleet's vote of NETWORK_CHECK (the all-reduce across nodes over the plan's figure for
    # the nodes' network), None where no several-node probe measured it against the plan.
    network: Calibration | None = None


@dataclass(frozen=True)
class Efficiency:
    value: float
    source: str  # one sentence: which rule gave the value
    calibrated: bool  # True when the fleet's ratio was applied


def calibrates(cal: Calibration | None, min_reports: int = MIN_FLEET_REPORTS) -> bool:
    """Whether the fleet's ratio is trusted: enough reports measured it, on enough hosts."""
    if cal is None or cal.reports < min_reports:
        return False
    return cal.hosts is None or cal.hosts >= MIN_FLEET_HOSTS


def efficiency(
    base: float,
    workload: str,
    cal: Calibration | None,
    min_reports: int = MIN_FLEET_REPORTS,
) -> Efficiency:
    """`base` (the profile of `workload`) x the fleet's ratio when `calibrates`, else `base`."""
    if cal is not None and calibrates(cal, min_reports):
        return Efficiency(
            base * cal.ratio,
            f"fleet-calibrated: {base:.2f} x the fleet's median measured/expected matmul_bf16 "
            f"{cal.ratio:.2f} over {cal.reports} probe reports"
            + (f" from {cal.hosts} hosts (one vote each)" if cal.hosts is not None else "")
            + (f" through {cal.tokens} write token(s)" if cal.tokens is not None else ""),
            True,
        )
    why = f"catalog default for {workload}"
    if cal is not None and cal.reports < min_reports:
        why += f" (the fleet has only {cal.reports} report(s), {min_reports} needed)"
    elif cal is not None:
        why += f" (the fleet's reports come from {cal.hosts} host(s), {MIN_FLEET_HOSTS} needed)"
    return Efficiency(base, why, False)


CALIBRATION_CHECK = "matmul_bf16"  # the probe check whose measured / expected scales efficiency
LINK_CHECK = "all_reduce_vs_plan"  # measured / planned bus bandwidth of a node's GPU link
# measured / planned bus bandwidth of the all-reduce across every GPU of several nodes
NETWORK_CHECK = "cross_node_all_reduce_vs_plan"
VOTED_CHECKS = (CALIBRATION_CHECK, LINK_CHECK, NETWORK_CHECK)


def link_factor(
    cal: Calibration | None, min_reports: int = MIN_FLEET_REPORTS
) -> tuple[float, str] | None:
    """The share of its planned bus bandwidth the fleet's nodes of this accelerator deliver over
    their GPU link, and why, when the fleet's vote `calibrates`; None otherwise (the plan keeps
    the catalog's link)."""
    return _vote_factor(cal.link if cal else None, min_reports, "all-reduce")


def network_factor(
    cal: Calibration | None, min_reports: int = MIN_FLEET_REPORTS
) -> tuple[float, str] | None:
    """The share of its planned bus bandwidth the fleet's all-reduce across nodes of this
    accelerator reaches, and why, when the fleet's vote `calibrates`; None otherwise (the plan
    keeps the catalog's network)."""
    return _vote_factor(cal.network if cal else None, min_reports, "all-reduce across nodes")


def _vote_factor(vote: Calibration | None, min_reports: int, what: str) -> tuple[float, str] | None:
    if vote is None or not calibrates(vote, min_reports):
        return None
    why = (
        f"the fleet's median measured / planned {what} bus bandwidth {vote.ratio:.2f} over "
        f"{vote.reports} node reports"
        + (f" from {vote.hosts} hosts (one vote each)" if vote.hosts is not None else "")
        + (f" through {vote.tokens} write token(s)" if vote.tokens is not None else "")
    )
    return vote.ratio, why


def calibration_from(
    ratio_median: object, runs: int, hosts: int | None = None, tokens: int | None = None
) -> Calibration | None:
    """One accelerator's calibration from its CALIBRATION_CHECK statistics over the fleet (the
    store's summary and the review's rows alike); None without a positive median."""
    if isinstance(ratio_median, bool) or not isinstance(ratio_median, int | float):
        return None
    return Calibration(float(ratio_median), runs, hosts, tokens) if ratio_median > 0 else None


class Vote(Protocol):
    """A check's vote of one per host (advisor.fleet.statistics.HostVote)."""

    @property
    def ratio(self) -> float | None: ...
    @property
    def runs(self) -> int: ...
    @property
    def hosts(self) -> int: ...
    @property
    def tokens(self) -> int | None: ...


def calibration_of(vote: Vote | None) -> Calibration | None:
    """A host vote as a calibration; None without a vote or a positive ratio."""
    if vote is None:
        return None
    return calibration_from(vote.ratio, vote.runs, vote.hosts, vote.tokens)


def calibrations(fleet: list[dict[str, Any]]) -> dict[str, Calibration]:
    """Calibration per accelerator from fleet summaries (GET /v1/fleet/summary, or the store),
    with the GPU link's and the network's votes where the summary has them."""
    out = {}
    for summary in fleet:
        acc = summary.get("accelerator")
        vote = summary.get("calibration")
        if acc and vote is not None:  # a service with host votes: its own calibration
            cal = _summary_vote(vote)
            if cal is not None:
                link = _summary_vote(summary.get("link_calibration"))
                network = _summary_vote(summary.get("network_calibration"))
                out[str(acc)] = dataclasses.replace(cal, link=link, network=network)
            continue
        stats = (summary.get("checks") or {}).get(CALIBRATION_CHECK) or {}
        # the runs whose ratio the median is of (a service before "ratios": every run)
        measured = stats.get("ratios", stats.get("count"))
        cal = calibration_from(stats.get("ratio_median"), int(measured or 0))
        if acc and cal is not None:
            out[str(acc)] = cal
    return out


def _summary_vote(vote: Any) -> Calibration | None:
    """A summary's vote as the service words it, or as the store's own summary holds it (a
    HostVote: calibration_of)."""
    if not isinstance(vote, dict):
        return calibration_of(vote)
    hosts, tokens = vote.get("hosts"), vote.get("tokens")
    return calibration_from(
        vote.get("ratio"),
        int(vote.get("reports") or 0),
        int(hosts or 0),
        None if tokens is None else int(tokens),
    )
