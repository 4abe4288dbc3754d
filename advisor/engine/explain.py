"""Nearest alternatives and the one-paragraph explanation of a result."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from advisor.engine.checks import CODE_WORDS
from advisor.engine.constraints import RELAXATIONS
from advisor.engine.result import Alternative


class AlternativeTracker:
    """Keeps, per constraint, the candidate that needs the smallest relaxation of it alone."""

    def __init__(self) -> None:
        self._best: dict[
            tuple[str, str], tuple[tuple[float, float, str], float | str | None, str]
        ] = {}

    def offer(
        self, constraint: str, relax_to: float | str | None, hourly_usd: float, label: str
    ) -> None:
        relaxation = RELAXATIONS[constraint]
        key = (relaxation.closeness(relax_to), hourly_usd, label)
        slot = (constraint, str(relax_to) if relaxation.per_value else "")
        current = self._best.get(slot)
        if current is None or key < current[0]:
            self._best[slot] = (key, relax_to, label)

    def may_keep(self, constraint: str, relax_to: float | str | None, hourly_usd: float) -> bool:
        """Whether offer() with these values and some label could keep it: False when the kept
        candidate is nearer or cheaper already, whatever the label (so a caller need not write
        one)."""
        relaxation = RELAXATIONS[constraint]
        slot = (constraint, str(relax_to) if relaxation.per_value else "")
        current = self._best.get(slot)
        return current is None or (relaxation.closeness(relax_to), hourly_usd) <= current[0][:2]

    def alternatives(self) -> list[Alternative]:
        return [
            Alternative(
                constraint=c,
                relax_to=to,
                candidate=label,
                sentence=RELAXATIONS[c].sentence(to, label),
            )
            for (c, _), (_, to, label) in sorted(self._best.items())
        ]


def explain_none(
    code_counts: Mapping[tuple[str, ...], int], alternatives: list[Alternative], workload: str
) -> str:
    """Why nothing fits: which constraint rules out how many of the eligible candidates.
    `code_counts`: the rejected candidates by their codes."""
    relevant = {codes: n for codes, n in code_counts.items() if "WORKLOAD_MISMATCH" not in codes}
    if not relevant:
        return f"No hardware in the catalog is eligible for {workload}."
    counts: Counter[str] = Counter()
    for codes, n in relevant.items():
        for what in {CODE_WORDS.get(code, code.lower()) for code in codes}:
            counts[what] += n
    parts = [
        f"{what} rules out {n}"
        for what, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    text = (
        f"No recommendation satisfies every constraint for {workload} "
        f"({sum(relevant.values())} eligible candidate(s) rejected): " + "; ".join(parts) + "."
    )
    if alternatives:
        text += " Nearest alternatives: " + "; ".join(a.sentence for a in alternatives) + "."
    return text


def explain_chosen(
    offerings: int,
    types: int,
    shown: int,
    objective_words: str,
    workload: str,
    each_offering: bool = False,
) -> str:
    """What was shown out of what: rows are instance types at their best offering (or, with
    each_offering, offerings), so both counts are named and the rows counted in their unit."""
    rows = "offering(s)" if each_offering else "type(s), each at its best offering"
    return (
        f"{types} instance type(s) feasible for {workload} ({offerings} priced offering(s): "
        f"type x region x purchase); showing the best {shown} {rows}, by {objective_words}."
    )
