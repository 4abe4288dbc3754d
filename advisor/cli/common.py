"""State and helpers shared by the CLI commands."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import cache
from typing import Any

from rich.console import Console

from advisor.catalog import Catalog
from advisor.loader import load_catalog


@dataclass
class _State:
    catalog_dir: str | None = None
    replace: bool | None = None
    debug: bool = False


STATE = _State()


@cache
def err_console() -> Console:
    return Console(stderr=True)


@cache
def console() -> Console:
    return Console()


def get_catalog() -> Catalog:
    catalog = load_catalog(STATE.catalog_dir, replace=STATE.replace)
    for warning in catalog.warnings:
        err_console().print(f"[yellow]warning:[/] {warning}", highlight=False)
    return catalog


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"
