"""advisor's own exception tree.

Foreign exceptions (pydantic, yaml, OS) are translated into these at the edge.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

# A request field named inside a message, marked so that each interface renders it its own way
# (the CLI as --flag, the API as the JSON field). The separator never occurs in typed text.
_MARK = "\x1f"
# a pattern string: compiled by re (and cached there) when first used, not at every start-up
_MARKED = f"{_MARK}([a-z][a-z0-9_]*){_MARK}"


def field_name(name: str) -> str:
    """`name` (a request field, e.g. "params_b") marked for InputError.render."""
    return f"{_MARK}{name}{_MARK}"


def json_name(name: str) -> str:
    """A request field as the HTTP API and str() name it: its JSON key."""
    return name


def flag_name(name: str) -> str:
    """A request field as the CLI names it (params_b is --params-b); recommendation reasons,
    which are sentences for both interfaces, use these words too."""
    return "--" + name.replace("_", "-")


class AdvisorError(Exception):
    """Base of every error advisor raises on purpose."""


class InputError(AdvisorError):
    """Bad input from a user: unknown workload, negative memory, unknown region. CLI exit code 2.

    `field` is the request field it concerns, when one does; the message names fields through
    field_name, rendered by `render` in each interface's words (str() gives the JSON names)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        self.template = message
        self.field = field
        super().__init__(self.render(json_name))

    def render(self, name: Callable[[str], str]) -> str:
        return re.sub(_MARKED, lambda m: name(m.group(1)), self.template)


class NotFoundError(InputError):
    """An id that is not in the catalog; the message carries a "did you mean"."""


# A NamedTuple, not a frozen dataclass: every command imports this module, and a dataclass
# takes several times as long to make (its methods are compiled when the class is).
class CatalogIssue(NamedTuple):
    """One problem found while loading the catalog, located precisely."""

    file: str
    entry: str | None  # the entry's id, or its index when it has none
    field: str | None  # dotted path inside the entry
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.entry is not None:
            where += f": {self.entry}"
        if self.field:
            where += f": {self.field}"
        return f"{where}: {self.message}"


class CatalogError(AdvisorError):
    """The catalog could not be loaded; carries every issue found, not only the first."""

    def __init__(self, issues: list[CatalogIssue]) -> None:
        self.issues = issues
        lines = "\n".join(f"  - {issue}" for issue in issues)
        super().__init__(f"invalid catalog ({len(issues)} problem(s)):\n{lines}")
