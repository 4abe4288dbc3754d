"""Text the service shows to anyone (/readyz): what is wrong, without the server's file paths.

Error messages from the catalog loader and the store name files ("/srv/advisor/catalog/x.yaml:
...") because an operator reading the log needs them; an unauthenticated probe endpoint must not
disclose the server's layout. Known directories become the setting that names them, any other
absolute path its last component.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from advisor.api.settings import Settings
from advisor.catalog.settings import shipped_catalog_dir

# An absolute path: "/" starting a word (not inside a URL or a relative path), one or more
# directories, then the last component, which is kept.
_ABSOLUTE = re.compile(r"(?<![\w:/.~-])/(?:[^\s'\"/:]+/)+(?P<name>[^\s'\"/:]*)")


def server_directories(settings: Settings) -> dict[str, str]:
    """The directories the service reads, by the name an operator knows them by."""
    named = {"shipped catalog": str(shipped_catalog_dir())}
    if settings.catalog_dir:
        named["ADVISOR_CATALOG"] = settings.catalog_dir
    return named


@dataclass(frozen=True, slots=True)
class Redactor:
    """Text without the server's paths: each spelling of a known directory (as given, absolute,
    resolved) by its name, longest first so that a subdirectory goes before its parent, any
    other absolute path by its last component. The spellings are worked out once, when the
    service starts: resolving a path reads the file system, and per /readyz answer that was a
    quarter of its CPU."""

    spellings: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, directories: Mapping[str, str]) -> Redactor:
        spellings: dict[str, str] = {}
        for label, directory in directories.items():
            path = Path(directory)
            for spelling in (directory, str(path), str(path.absolute()), str(path.resolve())):
                spellings[spelling.rstrip("/") or spelling] = label
        ordered = sorted(spellings.items(), key=lambda item: len(item[0]), reverse=True)
        return cls(tuple(ordered))

    def __call__(self, text: str) -> str:
        for spelling, label in self.spellings:
            text = text.replace(spelling, label)
        return _ABSOLUTE.sub(lambda m: m.group("name") or "/", text)
