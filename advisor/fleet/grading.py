"""The one place the pass / warn / fail bands of measured / expected live.

The probe grades each check with them, the review colours the fleet's medians with them and draws
them as the chart's thresholds. Change a band here and every one of them follows.
"""

from __future__ import annotations

from typing import Literal

Grade = Literal["pass", "warn", "fail"]

# At or above 90% of the expectation a figure passes: run-to-run spread of a healthy GPU stays
# within a few per cent of its reference, so 10% below already means something is off.
PASS_AT = 0.90
# Below 75% it fails: DCGM's diagnostic plugins fail a GPU below 0.75 x the measured reference of
# its SKU; between the two it warns.
WARN_AT = 0.75


def grade(ratio: float, pass_at: float = PASS_AT, warn_at: float = WARN_AT) -> Grade:
    """pass at or above `pass_at`, warn at or above `warn_at`, fail below."""
    if ratio >= pass_at:
        return "pass"
    return "warn" if ratio >= warn_at else "fail"
