"""Which nodes test the network together with --pairwise, round by round, so that a fleet of N
nodes takes O(N) tests in O(rounds + log N) rounds of concurrent tests rather than N(N-1)/2 pairs
one at a time. Pure: every rank computes the same plan from the same shared results.

1. Screen: `rounds` rounds of the circle method (round-robin tournament scheduling): each round
   N/2 disjoint pairs, all measured at once; no pair meets twice.
2. Isolate: a node in no fast test is a suspect; each suspect is paired with a node a fast test
   cleared (disjoint pairs, concurrently): slow again, the suspect is the slow node.
3. Bisect: all-reduce bus bandwidth does not depend on the ranks taking part (nccl-tests'
   normalisation), so the whole cluster should run at the pairs' speed. Slower with no slow node
   to explain it, the fault shows only at scale (a congested switch, a bad rail): both halves
   are measured at once and each slow half split again, down to the smallest slow group
   (O(log N) rounds).

A test is slow below SLOW_BELOW x the median of the screening pairs (gpu-fryer fails a GPU more
than 10% below its node's best; Megatron's straggler sniff test flags > 10% from the mean).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

SLOW_BELOW = 0.9
DEFAULT_ROUNDS = 2
Phase = Literal["screen", "isolate", "bisect"]


def circle_rounds(n: int, rounds: int) -> list[list[tuple[int, int]]]:
    """The first `rounds` rounds of the circle method over nodes 0..n-1 (at most n-1 rounds, or
    n with an odd n, where one node sits each round out)."""
    slots = list(range(n)) + ([-1] if n % 2 else [])
    m = len(slots)
    found = []
    for _ in range(min(rounds, m - 1)):
        pairs = [(slots[i], slots[m - 1 - i]) for i in range(m // 2)]
        found.append([(min(a, b), max(a, b)) for a, b in pairs if a >= 0 and b >= 0])
        slots = [slots[0], slots[-1], *slots[1:-1]]  # keep the first, rotate the rest
    return found


@dataclass
class Test:
    nodes: tuple[int, ...]
    phase: Phase
    round: int
    value: float | None = None  # bus bandwidth; None: the test failed


@dataclass
class PairwisePlan:
    """The adaptive schedule: `next_round()` gives disjoint node groups to measure at once,
    `record()` their results; None when every question is answered."""

    nodes: int
    rounds: int = DEFAULT_ROUNDS
    cluster_busbw: float | None = None  # the whole cluster's all-reduce, when measured
    tests: list[Test] = field(default_factory=list)
    _screen: list[list[tuple[int, int]]] = field(default_factory=list)
    _pending: list[tuple[int, ...]] = field(default_factory=list)  # bisection's next groups
    _bisected: bool = False
    _round: int = 0

    def __post_init__(self) -> None:
        self._screen = circle_rounds(self.nodes, self.rounds)

    @property
    def rounds_run(self) -> int:
        return self._round

    def baseline(self) -> float | None:
        values = [t.value for t in self.tests if t.phase == "screen" and t.value is not None]
        return statistics.median(values) if values else None

    def slow(self, t: Test) -> bool:
        base = self.baseline()
        return t.value is None or (base is not None and t.value < SLOW_BELOW * base)

    def cleared(self) -> set[int]:
        return {n for t in self.tests if not self.slow(t) for n in t.nodes}

    def suspects(self) -> list[int]:
        """Nodes that no fast test has cleared and no isolation test has judged yet."""
        judged = {t.nodes[0] for t in self.tests if t.phase == "isolate"}
        return [n for n in range(self.nodes) if n not in self.cleared() and n not in judged]

    def slow_nodes(self) -> list[int]:
        """Nodes slow with partners that fast tests cleared: the slow nodes (a slow pair of two
        uncleared nodes names neither)."""
        clear = self.cleared()
        found = set()
        for t in self.tests:
            rest = [n for n in t.nodes if n not in clear]
            if t.phase != "bisect" and self.slow(t) and len(rest) == 1:
                found.add(rest[0])
        return sorted(found)

    def slow_groups(self) -> list[tuple[int, ...]]:
        """Bisection's findings: slow groups whose halves were each fast (or too small to split):
        the fault lies in the network between their nodes."""
        found = []
        for t in self.tests:
            if t.phase != "bisect" or not self.slow(t):
                continue
            halves = [u for u in self.tests if u.phase == "bisect" and set(u.nodes) < set(t.nodes)]
            if not any(self.slow(u) for u in halves):
                found.append(t.nodes)
        return found

    def next_round(self) -> tuple[Phase, list[tuple[int, ...]]] | None:
        if self._round < len(self._screen):
            return "screen", list(self._screen[self._round])
        pairs = self._isolation_pairs()
        if pairs:
            return "isolate", pairs
        if self._pending:
            return "bisect", list(self._pending)
        if not self._bisected:
            self._bisected = True
            if self._cluster_is_slow():
                self._pending = list(_halves(tuple(range(self.nodes))))
                return "bisect", list(self._pending)
        return None

    def _cluster_is_slow(self) -> bool:
        base, whole = self.baseline(), self.cluster_busbw
        if base is None or whole is None or self.nodes < 4 or self.slow_nodes():
            return False  # a slow node already explains a slow cluster
        return whole < SLOW_BELOW * base

    def _isolation_pairs(self) -> list[tuple[int, ...]]:
        partners = sorted(self.cleared())
        return [(s, p) for s, p in zip(self.suspects(), partners, strict=False)]

    def record(
        self, phase: Phase, groups: Sequence[tuple[int, ...]], values: Sequence[float | None]
    ) -> None:
        done = [Test(g, phase, self._round, v) for g, v in zip(groups, values, strict=True)]
        self.tests += done
        self._round += 1
        if phase == "bisect":
            self._pending = [
                half for t in done if self.slow(t) and len(t.nodes) > 2 for half in _halves(t.nodes)
            ]


def _halves(group: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    mid = len(group) // 2
    return group[:mid], group[mid:]
