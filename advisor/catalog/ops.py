"""Measured operator tables (`advisor probe --ops`) under the catalog: `ops/*.json` of each
catalog directory, one file per accelerator x software stack, validated by probes.ops_table's
OpsTable (extra="forbid"). The only place these files are read.

The model uses, per accelerator, the newest table measured in full mode (quick tables are listed,
not used: their grid is too coarse for the model's interpolation).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from advisor.catalog.settings import CatalogSettings
from advisor.errors import CatalogError, CatalogIssue
from advisor.validation_errors import explain_validation
from probes.ops_table import OpsTable

OPS_DIR = "ops"


def table_files(dirs: list[Path]) -> list[Path]:
    return sorted(p for d in dirs for p in (d / OPS_DIR).glob("*.json"))


def load_tables(dirs: list[Path]) -> list[tuple[Path, OpsTable]]:
    """Every table under `dirs`; CatalogError naming each file and field that is wrong."""
    issues: list[CatalogIssue] = []
    tables = []
    for path in table_files(dirs):
        try:
            tables.append((path, OpsTable.model_validate_json(path.read_bytes())))
        except OSError as exc:
            issues.append(CatalogIssue(str(path), None, None, f"cannot read: {exc.strerror}"))
        except ValidationError as exc:
            for field, message in explain_validation(exc, OpsTable):
                issues.append(CatalogIssue(str(path), None, field, message))
    if issues:
        raise CatalogError(issues)
    return tables


@functools.cache
def _tables_in(dirs: tuple[Path, ...]) -> dict[str, OpsTable]:
    """The table the model uses per accelerator id: the newest full one."""
    chosen: dict[str, OpsTable] = {}
    for _path, table in load_tables(list(dirs)):
        if table.accelerator is None or table.mode != "full":
            continue
        held = chosen.get(table.accelerator)
        if held is None or table.measured_at > held.measured_at:
            chosen[table.accelerator] = table
    return chosen


def tables_enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the performance model reads the tables: on unless ADVISOR_OPERATOR_TABLES=off.
    On by default since, with the KV-cache writes and the sustained GEMM measured, the
    table-driven model is at least as close to every calibration file's published measurements
    as the calibrated roofline (benchmarks/bench_calibration.py --per-file, both recorded side
    by side); off gives the roofline everywhere, for comparison."""
    return environ.get(ENABLE_VARIABLE, "on").strip().lower() not in ("off", "0", "false", "no")


ENABLE_VARIABLE = "ADVISOR_OPERATOR_TABLES"


def model_tables(environ: Mapping[str, str] = os.environ) -> dict[str, OpsTable]:
    """Per accelerator id, the table the performance model reads (read once per directory set);
    empty unless tables_enabled."""
    if not tables_enabled(environ):
        return {}
    return _tables_in(tuple(CatalogSettings.from_env(environ).directories()))
