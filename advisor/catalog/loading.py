"""Reads catalog YAML from disk and validates it into a Catalog. The only core module doing I/O."""

from __future__ import annotations

import datetime as dt
import os
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from advisor.catalog.cross_checks import Origin, cross_check, price_flags, sanity_thresholds
from advisor.catalog.models import (
    Accelerator,
    InstanceType,
    ModelPreset,
    NodeSystem,
    PriceSanity,
    ProbeExpectation,
    SpotInterruption,
    WorkloadProfile,
)
from advisor.catalog.queries import Catalog
from advisor.did_you_mean import did_you_mean
from advisor.errors import CatalogError, CatalogIssue, InputError
from advisor.validation_errors import explain_validation

SECTIONS: dict[str, type[BaseModel]] = {
    "accelerators": Accelerator,
    "instance_types": InstanceType,
    "workloads": WorkloadProfile,
    "probe_expectations": ProbeExpectation,
    "models": ModelPreset,
    "systems": NodeSystem,
    "spot_interruptions": SpotInterruption,
    "price_sanity": PriceSanity,
}
DEFAULT_MAX_PRICE_AGE_DAYS = 365

# libyaml's loader when PyYAML was built with it (several times faster); both are safe loaders.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def shipped_catalog_dir() -> Path:
    """The catalog inside the installed package, or the checkout's catalog/ in development."""
    package = Path(__file__).resolve().parents[1]  # advisor/
    packaged = package / "_catalog_data"
    return packaged if packaged.is_dir() else package.parent / "catalog"


def catalog_dirs(
    user_dir: str | os.PathLike[str] | None = None,
    replace: bool | None = None,
    environ: Mapping[str, str] = os.environ,
) -> list[Path]:
    """The directories to read, in order: the shipped one unless replaced, then the user's."""
    if user_dir is None:
        user_dir = environ.get("ADVISOR_CATALOG") or None
    if replace is None:
        mode = environ.get("ADVISOR_CATALOG_MODE", "extend")
        if mode not in ("extend", "replace"):
            raise InputError(f"ADVISOR_CATALOG_MODE={mode!r}; valid: extend, replace")
        replace = mode == "replace"
    if user_dir is None:
        if replace:
            raise InputError("replacing the shipped catalog needs a catalog directory (--catalog)")
        return [shipped_catalog_dir()]
    path = Path(user_dir)
    if not path.is_dir():
        raise InputError(f"catalog directory {str(path)!r} does not exist or is not a directory")
    return [path] if replace else [shipped_catalog_dir(), path]


def max_price_age_days(environ: Mapping[str, str] = os.environ) -> int:
    raw = environ.get("ADVISOR_MAX_PRICE_AGE_DAYS")
    if raw is None:
        return DEFAULT_MAX_PRICE_AGE_DAYS
    try:
        days = int(raw)
    except ValueError:
        days = -1
    if days < 0:
        raise InputError(f"ADVISOR_MAX_PRICE_AGE_DAYS={raw!r}; give a whole number of days >= 0")
    return days


def load_catalog(
    catalog_dir: str | os.PathLike[str] | None = None,
    *,
    replace: bool | None = None,
    max_age_days: int | None = None,
    today: dt.date | None = None,
) -> Catalog:
    """Load, validate and cross-check the catalog. Raises CatalogError listing every problem."""
    dirs = catalog_dirs(catalog_dir, replace)
    issues: list[CatalogIssue] = []
    broken: set[str] = set()  # ids of entries that failed on their own: no cascade of errors
    layers: list[dict[str, dict[str, tuple[BaseModel, Origin]]]] = []
    for layer_index, directory in enumerate(dirs):
        layer: dict[str, dict[str, tuple[BaseModel, Origin]]] = {s: {} for s in SECTIONS}
        files = sorted([*directory.rglob("*.yaml"), *directory.rglob("*.yml")])
        if not files:
            issues.append(CatalogIssue(str(directory), None, None, "no *.yaml files found"))
        for path in files:
            _load_file(path, layer, issues, layer_index, broken)
        layers.append(layer)

    merged: dict[str, dict[str, tuple[BaseModel, Origin]]] = {s: {} for s in SECTIONS}
    for layer in layers:  # later layers (the user's) replace earlier entries with the same id
        for section, entries in layer.items():
            merged[section].update(entries)

    warnings = cross_check(
        merged,
        issues,
        broken=broken,
        max_age_days=max_price_age_days() if max_age_days is None else max_age_days,
        today=today or dt.date.today(),
    )
    sanity = sanity_thresholds(merged, issues)
    if issues:
        raise CatalogError(issues)
    instance_types = {
        k: typing.cast(InstanceType, v[0]) for k, v in merged["instance_types"].items()
    }
    if sanity is not None:
        instance_types = _flagged(instance_types, sanity)
    return Catalog(
        accelerators={k: typing.cast(Accelerator, v[0]) for k, v in merged["accelerators"].items()},
        instance_types=instance_types,
        workloads={k: typing.cast(WorkloadProfile, v[0]) for k, v in merged["workloads"].items()},
        probe_expectations={
            k: typing.cast(ProbeExpectation, v[0]) for k, v in merged["probe_expectations"].items()
        },
        models={k: typing.cast(ModelPreset, v[0]) for k, v in merged["models"].items()},
        systems={k: typing.cast(NodeSystem, v[0]) for k, v in merged["systems"].items()},
        spot_interruptions={
            k: typing.cast(SpotInterruption, v[0]) for k, v in merged["spot_interruptions"].items()
        },
        warnings=tuple(warnings),
        sources=tuple(str(d) for d in dirs),
    )


def _flagged(
    instance_types: dict[str, InstanceType], sanity: PriceSanity
) -> dict[str, InstanceType]:
    """The instance types with each doubtful price's flag set (once, at load: the engine reads
    Price.flag per offering)."""
    flags = price_flags(instance_types.values(), sanity)
    by_type: dict[str, dict[int, str]] = {}
    for (it_id, index), reason in flags.items():
        by_type.setdefault(it_id, {})[index] = reason
    out = dict(instance_types)
    for it_id, reasons in by_type.items():
        it = instance_types[it_id]
        prices = tuple(
            p.model_copy(update={"flag": reasons[i]}) if i in reasons else p
            for i, p in enumerate(it.prices)
        )
        out[it_id] = it.model_copy(update={"prices": prices})
    return out


def _load_file(
    path: Path,
    layer: dict[str, dict[str, tuple[BaseModel, Origin]]],
    issues: list[CatalogIssue],
    layer_index: int,
    broken: set[str],
) -> None:
    name = str(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        issues.append(CatalogIssue(name, None, None, f"YAML syntax error{where}: {problem}"))
        return
    except (OSError, UnicodeDecodeError) as exc:
        issues.append(CatalogIssue(name, None, None, f"cannot read: {exc}"))
        return
    if data is None:
        return
    if not isinstance(data, dict):
        issues.append(CatalogIssue(name, None, None, "top level must be a mapping of sections"))
        return
    for section, entries in data.items():
        model = SECTIONS.get(section)
        if model is None:
            hint = did_you_mean(str(section), SECTIONS)
            valid = ", ".join(SECTIONS)
            msg = f"unknown section {section!r}{hint}; valid: {valid}"
            issues.append(CatalogIssue(name, None, None, msg))
            continue
        if not isinstance(entries, list):
            issues.append(CatalogIssue(name, None, section, "must be a list of entries"))
            continue
        for index, raw in enumerate(entries):
            _load_entry(name, section, model, index, raw, layer, issues, layer_index, broken)


def _load_entry(
    file: str,
    section: str,
    model: type[BaseModel],
    index: int,
    raw: Any,
    layer: dict[str, dict[str, tuple[BaseModel, Origin]]],
    issues: list[CatalogIssue],
    layer_index: int,
    broken: set[str],
) -> None:
    label = f"{section}[{index}]"
    if isinstance(raw, dict) and isinstance(raw.get("id"), str):
        label = raw["id"]
    if not isinstance(raw, dict):
        issues.append(CatalogIssue(file, label, None, "entry must be a mapping"))
        return
    try:
        entry = model.model_validate(raw, context={"catalog_file": True})
    except ValidationError as exc:
        issues.extend(CatalogIssue(file, label, f, m) for f, m in explain_validation(exc, model))
        broken.add(label)
        return
    entry_id: str = getattr(entry, "id")  # noqa: B009 - every section model has an id
    previous = layer[section].get(entry_id)
    if previous is not None:
        msg = f"duplicate id (also defined in {previous[1].file})"
        issues.append(CatalogIssue(file, entry_id, "id", msg))
        return
    layer[section][entry_id] = (entry, Origin(file, layer_index))
