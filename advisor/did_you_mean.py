""" "Did you mean" suggestions, shared by catalog loading, lookups and input validation."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ' (did you mean X?)' for the closest choice, or '' when nothing is close."""
    options = list(choices)
    lowered = {c.lower(): c for c in options}
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return f" (did you mean {lowered[match[0]]!r}?)" if match else ""


def unknown(kind: str, word: str, choices: Iterable[str]) -> str:
    """A one-line message for an unknown value that lists what is valid."""
    options = sorted(choices)
    hint = did_you_mean(word, options)
    shown = ", ".join(options[:30]) + (", ..." if len(options) > 30 else "")
    return f"unknown {kind} {word!r}{hint}; valid: {shown}"
