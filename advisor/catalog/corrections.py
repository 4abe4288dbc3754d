"""Stored serving corrections (`advisor calibrate ingest --save DIR`) under the catalog:
`corrections/*.json` of each catalog directory, one file per accelerator x engine, validated by
advisor.perf.correction.StoredCorrection (extra="forbid"). The only place these files are read.
Per (accelerator, engine), the newest stored correction is the one used."""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import ValidationError

from advisor.catalog.settings import CatalogSettings
from advisor.errors import CatalogError, CatalogIssue
from advisor.perf.correction import StoredCorrection
from advisor.validation_errors import explain_validation

CORRECTIONS_DIR = "corrections"


def correction_path(directory: Path, accelerator: str, engine: str) -> Path:
    """Where `--save DIRECTORY` writes the correction of accelerator x engine."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in engine.lower())
    return directory / CORRECTIONS_DIR / f"{accelerator}--{safe}.json"


@functools.cache
def _corrections_in(dirs: tuple[Path, ...]) -> dict[tuple[str, str], StoredCorrection]:
    issues: list[CatalogIssue] = []
    chosen: dict[tuple[str, str], StoredCorrection] = {}
    for path in sorted(p for d in dirs for p in (d / CORRECTIONS_DIR).glob("*.json")):
        try:
            found = StoredCorrection.model_validate_json(path.read_bytes())
        except OSError as exc:
            issues.append(CatalogIssue(str(path), None, None, f"cannot read: {exc.strerror}"))
            continue
        except ValidationError as exc:
            for field, message in explain_validation(exc, StoredCorrection):
                issues.append(CatalogIssue(str(path), None, field, message))
            continue
        key = (found.accelerator, found.engine.lower())
        held = chosen.get(key)
        if held is None or found.created_at > held.created_at:
            chosen[key] = found
    if issues:
        raise CatalogError(issues)
    return chosen


def stored_correction(accelerator: str, engine: str) -> StoredCorrection | None:
    """The newest stored correction of accelerator x engine (engine names compared without
    case), or None."""
    dirs = tuple(CatalogSettings.from_env().directories())
    return _corrections_in(dirs).get((accelerator, engine.lower()))
