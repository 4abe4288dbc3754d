"""Host identity: one spelling per host, so that a fleet counts hosts and not spellings, and
which hosts a write token may report for. Pure.

One write token once counted as six hosts by writing `h1`, `H1`, `\u04bb1` (Cyrillic shha),
`h1` with a zero-width space, `h1.` and ` h1`, and six invented hosts outvoted five honest ones
in the calibration. A host name is therefore normalised before it is stored or compared: surrounding
whitespace and invisible format characters (zero-width spaces and joiners, soft hyphens, byte
order marks) removed, Unicode NFKC (full-width and compatibility forms to their plain letters),
case folded, the trailing dot of a fully qualified name dropped. A name that still holds a
character that looks like a Latin letter or digit but is not one (Unicode's confusables, via
confusable_homoglyphs), or whitespace inside it, is refused as ambiguous: it could be mistaken
for another host's name.
"""

from __future__ import annotations

import fnmatch
import unicodedata
from collections.abc import Mapping, Sequence

from advisor.errors import InputError

MAX_HOST_CHARS = 253  # a DNS name's longest


def normalise_host(name: str, field: str = "inventory.hostname") -> str:
    """The one spelling of host `name`; InputError naming `field` when it is empty, holds
    whitespace inside, or holds characters that can be mistaken for other ones."""
    visible = "".join(ch for ch in name if unicodedata.category(ch) != "Cf").strip()
    host = unicodedata.normalize("NFKC", visible).casefold().strip()
    host = host.removesuffix(".")
    if not host:
        raise InputError(f"host name {name!r} is empty once normalised", field=field)
    if any(ch.isspace() for ch in host):
        raise InputError(f"host name {name!r} holds whitespace", field=field)
    if len(host) > MAX_HOST_CHARS:
        raise InputError(f"host name is longer than {MAX_HOST_CHARS} characters", field=field)
    if not host.isascii():
        lookalike = _lookalike(host)
        if lookalike is not None:
            raise InputError(
                f"host name {name!r} is ambiguous: {lookalike}; use the name's ASCII (IDNA) "
                "spelling",
                field=field,
            )
    return host


def _lookalike(host: str) -> str | None:
    """A sentence naming the first character of `host` that looks like a Latin or common one
    and is not, or None."""
    from confusable_homoglyphs import confusables  # its tables load on first use

    found = confusables.is_confusable(host, greedy=False, preferred_aliases=["latin", "common"])
    if not found:
        return None
    first = found[0]
    like = first["homoglyphs"][0]
    return (
        f"{first['character']!r} ({first['alias'].lower()}) looks like {like['c']!r} "
        f"({like['n'].lower()})"
    )


def host_allowed(host: str, patterns: Sequence[str]) -> bool:
    """Whether normalised `host` matches one of `patterns` (shell globs, matched against the
    normalised spelling: `gpu-*.dc1`)."""
    return any(fnmatch.fnmatchcase(host, normalise_host(p, "pattern")) for p in patterns)


def token_may_report(host: str, token: str, bindings: Mapping[str, Sequence[str]]) -> bool:
    """Whether `token` may report for normalised `host`: a token bound to hosts (`bindings`,
    token -> globs) for those alone, a token without a binding for any host."""
    patterns = bindings.get(token)
    return patterns is None or host_allowed(host, patterns)
