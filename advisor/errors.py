"""advisor's own exception tree.

Foreign exceptions (pydantic, yaml, OS) are translated into these at the edge.
"""

from __future__ import annotations

from dataclasses import dataclass


class AdvisorError(Exception):
    """Base of every error advisor raises on purpose."""


class InputError(AdvisorError):
    """Bad input from a user: unknown workload, negative memory, unknown region. CLI exit code 2."""


class NotFoundError(InputError):
    """An id that is not in the catalog; the message carries a "did you mean"."""


@dataclass(frozen=True)
class CatalogIssue:
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
