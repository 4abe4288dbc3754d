""" "Did you mean" suggestions, shared by catalog loading, lookups and input validation."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

FAMILY_SHOWN = 4  # choices of one family named in a hint; the rest are counted


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ' (did you mean X?)' for the closest choice, or '' when nothing is close.

    The word's own family comes first: choices that begin with it ("h200" -> h200-nvl,
    h200-sxm; "europe" -> europe-west1, ...), since string similarity alone puts b200 next to
    h200 and one arbitrary europe-west9 next to "europe"; then the closest by similarity."""
    options = list(choices)
    lowered = {c.lower(): c for c in options}
    key = word.lower()
    family = sorted(c for low, c in lowered.items() if low.startswith(key) and low != key)
    if family:
        return _family_hint(family)
    match = difflib.get_close_matches(key, list(lowered), n=1, cutoff=0.6)
    if match:
        return f" (did you mean {lowered[match[0]]!r}?)"
    # A misspelt start of ids ("h1OO" for the h100 family): the word against each choice's
    # start of the same length, where whole-id similarity is diluted by the rest of the id. The
    # first letter must agree: 'objective' is not a misspelt start of 'active_params_b'.
    if len(key) >= 3:
        starts = {low[: len(key)] for low in lowered if len(low) > len(key) and low[0] == key[0]}
        near = difflib.get_close_matches(key, sorted(starts), n=1, cutoff=0.5)
        if near:
            return _family_hint(sorted(c for low, c in lowered.items() if low.startswith(near[0])))
    return ""


def _family_hint(family: list[str]) -> str:
    named = ", ".join(repr(c) for c in family[:FAMILY_SHOWN])
    more = f" and {len(family) - FAMILY_SHOWN} more" if len(family) > FAMILY_SHOWN else ""
    one = "" if len(family) == 1 else "one of "
    return f" (did you mean {one}{named}{more}?)"


def unknown(kind: str, word: str, choices: Iterable[str]) -> str:
    """A one-line message for an unknown value that lists what is valid."""
    options = sorted(choices)
    hint = did_you_mean(word, options)
    shown = ", ".join(options[:30]) + (", ..." if len(options) > 30 else "")
    return f"unknown {kind} {word!r}{hint}; valid: {shown}"
