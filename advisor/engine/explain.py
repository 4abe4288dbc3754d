"""Nearest alternatives and the one-paragraph explanation of a result."""

from __future__ import annotations

from collections import Counter

from advisor.engine.result import Alternative, Rejection

CONSTRAINT_WORDS = {
    "power_budget_w": "the power budget",
    "max_hourly_usd": "the hourly budget",
    "interconnect_gb_s": "the interconnect requirement",
    "region": "the region",
    "provider": "the provider",
    "purchase": "the purchase option",
    "memory_gb": "the memory requirement",
    "gpu_count": "the GPU count",
}
CODE_WORDS = {
    "POWER_OVER_BUDGET": "the power budget",
    "OVER_BUDGET": "the hourly budget",
    "NO_HOURLY_PRICE": "the hourly budget",
    "INTERCONNECT_TOO_SLOW": "the interconnect requirement",
    "REGION_NOT_OFFERED": "the region",
    "PROVIDER_EXCLUDED": "the provider",
    "NOT_A_CLOUD_OFFERING": "the region/provider",
    "PURCHASE_UNAVAILABLE": "the purchase option",
    "MEMORY_INSUFFICIENT": "the memory requirement",
    "GPU_COUNT_TOO_HIGH": "the GPU count",
    "NO_GPU": "the GPU count",
    "NETWORK_TOO_SLOW": "the scale-out network",
    "GPU_MEMORY_TOO_SMALL": "the workload's memory per GPU",
    "NO_PRICE": "a missing price",
}
# Which relaxation is "nearest": the smallest raise of a ceiling, the smallest cut of a floor.
_CEILINGS = {"power_budget_w", "max_hourly_usd"}
_FLOORS = {"interconnect_gb_s", "memory_gb", "gpu_count"}


class AlternativeTracker:
    """Keeps, per constraint, the candidate that needs the smallest relaxation of it alone."""

    def __init__(self) -> None:
        self._best: dict[str, tuple[tuple[float, float, str], float | str | None, str]] = {}

    def offer(
        self, constraint: str, relax_to: float | str | None, hourly_usd: float, label: str
    ) -> None:
        numeric = float(relax_to) if isinstance(relax_to, int | float) else 0.0
        if constraint in _CEILINGS:
            closeness = numeric
        elif constraint in _FLOORS:
            closeness = -numeric
        else:
            closeness = 0.0
        key = (closeness, hourly_usd, label)
        current = self._best.get(constraint)
        if current is None or key < current[0]:
            self._best[constraint] = (key, relax_to, label)

    def alternatives(self) -> list[Alternative]:
        return [
            Alternative(c, to, label, _sentence(c, to, label))
            for c, (_, to, label) in sorted(self._best.items())
        ]


def _sentence(constraint: str, to: float | str | None, label: str) -> str:
    words = CONSTRAINT_WORDS.get(constraint, constraint)
    if to is None:
        return f"drop {words}: {label}"
    if isinstance(to, str):
        return f"change {words} to {to}: {label}"
    if constraint == "power_budget_w":
        return f"relax the power budget to {to:g} W: {label}"
    if constraint == "max_hourly_usd":
        return f"raise the hourly budget to ${to:,.2f}/h: {label}"
    if constraint == "interconnect_gb_s":
        return f"accept {to:g} GB/s of GPU interconnect: {label}"
    if constraint == "memory_gb":
        return f"reduce the memory requirement to {to:g} GB: {label}"
    return f"change {words} to {to:g}: {label}"


def explain_none(rejected: list[Rejection], alternatives: list[Alternative], workload: str) -> str:
    """Why nothing fits: which constraint rules out how many of the eligible candidates."""
    relevant = [r for r in rejected if "WORKLOAD_MISMATCH" not in r.codes]
    if not relevant:
        return f"No hardware in the catalog is eligible for {workload}."
    counts: Counter[str] = Counter()
    for r in relevant:
        counts.update({CODE_WORDS.get(code, code.lower()) for code in r.codes})
    parts = [
        f"{what} rules out {n}"
        for what, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    text = (
        f"No recommendation satisfies every constraint for {workload} "
        f"({len(relevant)} eligible candidate(s) rejected): " + "; ".join(parts) + "."
    )
    if alternatives:
        text += " Nearest alternatives: " + "; ".join(a.sentence for a in alternatives) + "."
    return text


def explain_chosen(count: int, shown: int, objective_words: str, workload: str) -> str:
    return (
        f"{count} feasible option(s) for {workload}; showing the best {shown} by {objective_words}."
    )
