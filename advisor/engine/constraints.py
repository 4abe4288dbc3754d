"""The constraint registry's vocabulary: what a hard constraint is, and how each request field that
can be relaxed is worded and compared. The entries themselves live in advisor/engine/checks.py.

A new constraint is one `Constraint` entry there (and, if it reads a new request field, one
`Relaxation` here): the explanation's words, the nearest-alternative sentence and the
candidate-group signature all derive from the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

if TYPE_CHECKING:
    from advisor.catalog.models import WorkloadProfile
    from advisor.request import Workload


class Direction(StrEnum):
    """How a request field is relaxed, and so which alternative is "nearest"."""

    ceiling = "ceiling"  # raise it: the smallest raise is nearest (budgets)
    floor = "floor"  # lower it: the smallest cut is nearest (memory, GPU count, bandwidth)
    equality = "equality"  # change it to another value (region, provider, purchase)
    fixed = "fixed"  # nothing in the request relaxes it


# A NamedTuple, not a frozen dataclass: the engine imports it for every request, and a dataclass
# takes several times as long to make (its methods are compiled when the class is).
class Relaxation(NamedTuple):
    """A request field that can be relaxed: its words and its alternative sentence."""

    field: str
    direction: Direction
    words: str  # "the power budget"
    to_value: str | None = None  # "relax the power budget to {to:g} W" (None: "change ... to")
    per_value: bool = False  # one alternative per value it can change to, not one in all

    def closeness(self, relax_to: float | str | None) -> float:
        """Lower is nearer: the smallest raise of a ceiling, the smallest cut of a floor."""
        numeric = float(relax_to) if isinstance(relax_to, int | float) else 0.0
        if self.direction == Direction.ceiling:
            return numeric
        if self.direction == Direction.floor:
            return -numeric
        return 0.0

    def sentence(self, to: float | str | None, label: str) -> str:
        if to is None:
            return f"drop {self.words}: {label}"
        if isinstance(to, str):
            return f"change {self.words} to {to}: {label}"
        if self.to_value is not None:
            return f"{self.to_value.format(to=to)}: {label}"
        return f"change {self.words} to {to:g}: {label}"


RELAXATIONS: dict[str, Relaxation] = {
    r.field: r
    for r in (
        Relaxation(
            "power_budget_w",
            Direction.ceiling,
            "the power budget",
            "relax the power budget to {to:g} W",
        ),
        Relaxation(
            "max_hourly_usd",
            Direction.ceiling,
            "the hourly budget",
            "raise the hourly budget to ${to:,.2f}/h",
        ),
        Relaxation(
            "interconnect_gb_s",
            Direction.floor,
            "the interconnect requirement",
            "accept {to:g} GB/s of GPU interconnect",
        ),
        Relaxation(
            "memory_gb",
            Direction.floor,
            "the memory requirement",
            "reduce the memory requirement to {to:g} GB",
        ),
        Relaxation("gpu_count", Direction.floor, "the GPU count"),
        Relaxation(
            "max_ttft_ms",
            Direction.ceiling,
            "the time-to-first-token target",
            "the lowest TTFT any option reaches is {to:g} ms: raise --max-ttft-ms to it",
        ),
        Relaxation(
            "max_itl_ms",
            Direction.ceiling,
            "the inter-token latency target",
            "the lowest ITL any option reaches is {to:g} ms: raise --max-itl-ms to it",
        ),
        Relaxation(
            "deadline_days",
            Direction.ceiling,
            "the deadline",
            "the fastest any option finishes is {to:g} days: raise --deadline-days to {to:g}",
        ),
        Relaxation(
            "budget_usd",
            Direction.ceiling,
            "the total budget",
            "the cheapest any option completes the run for is ${to:,.0f}: raise --budget-usd to "
            "{to:.0f}",
        ),
        Relaxation("max_gpus", Direction.ceiling, "the GPU limit", "raise --max-gpus to {to:g}"),
        Relaxation("region", Direction.equality, "the region"),
        Relaxation("provider", Direction.equality, "the provider"),
        Relaxation("purchase", Direction.equality, "the purchase option"),
        # Prices the sanity checks doubt (Price.flag) are out unless the request includes them.
        Relaxation(
            "include_flagged_prices",
            Direction.equality,
            "the exclusion of flagged prices (--include-flagged-prices)",
        ),
        # A full fine-tune that fits nowhere: LoRA and QLoRA are each worth naming with what
        # they need (advisor/planning/fit.py Fit.lighter_methods).
        Relaxation("method", Direction.equality, "the fine-tuning method", per_value=True),
    )
}


class Violation(NamedTuple):
    code: str
    constraint: str | None  # the request field that could be relaxed; None = not relaxable
    sentence: str
    relax_to: float | str | None = None


class Finding(NamedTuple):
    """What a check function reports when its constraint fails."""

    sentence: str
    relax_to: float | str | None = None
    relaxable: bool = True  # False: this failure is not one a relaxation of the field helps
    field: str | None = None  # relaxed through this request field, not the entry's own


Case = TypeVar("Case")


class Constraint(NamedTuple, Generic[Case]):  # a NamedTuple as Relaxation is
    """One hard constraint: a code, the request field that relaxes it (None: not relaxable),
    the words the explanation counts it under, the candidate attributes its check reads (the
    candidate-group signature is built from them), the check itself, and when it can fail at
    all (`applies`, None: always)."""

    code: str
    field: str | None
    words: str
    check: Callable[[Case], Finding | None]
    reads: tuple[str, ...] = ()
    # A condition on the request alone without which the check never fails (no power budget,
    # no power check). The engine drops such entries once per request, not once per candidate:
    # most requests set few fields, and the checks run for every candidate group.
    # tests/test_constraints.py holds each to its check on every group of the shipped catalog.
    applies: Callable[[Workload, WorkloadProfile], bool] | None = None
    # The check reads the candidate and the workload profile alone, never the request or the
    # placement: the engine works out once per catalog and profile which candidate groups it
    # fails, and runs it per request only on those (tests/test_constraints.py holds each such
    # check to reading nothing else).
    request_free: bool = False
    # The check fails only where the placement spans nodes (Placement.spans_nodes): the engine
    # skips it on the groups a request fits inside one node, most of them for everyday sizes
    # (tests/test_constraints.py holds each such check to finding nothing elsewhere).
    spans_only: bool = False

    @property
    def direction(self) -> Direction:
        return RELAXATIONS[self.field].direction if self.field else Direction.fixed


def applicable(
    registry: Sequence[Constraint[Case]], w: Workload, p: WorkloadProfile
) -> tuple[Constraint[Case], ...]:
    """The entries that can fail for this request: the others never find anything here."""
    return tuple(e for e in registry if e.applies is None or e.applies(w, p))


def violations(registry: Sequence[Constraint[Case]], case: Case) -> list[Violation]:
    """Every failure, in registry order: knowing a candidate fails *only* one constraint is what
    lets the engine suggest its nearest relaxation."""
    out = []
    for entry in registry:
        found = entry.check(case)
        if found is not None:
            field = (found.field or entry.field) if found.relaxable else None
            out.append(Violation(entry.code, field, found.sentence, found.relax_to))
    return out
