"""advisor: recommends hardware for a workload from a validated catalog, and verifies machines.

The public surface is small; everything else is private to the package. Names are imported on
first use, so `import advisor` (and every CLI command) pays only for what it touches.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from advisor.catalog import Catalog, load_catalog
    from advisor.engine import Result, recommend
    from advisor.errors import AdvisorError, CatalogError, InputError, NotFoundError
    from advisor.request import Workload

_WHERE = {
    "AdvisorError": "advisor.errors",
    "Catalog": "advisor.catalog",
    "CatalogError": "advisor.errors",
    "InputError": "advisor.errors",
    "NotFoundError": "advisor.errors",
    "Result": "advisor.engine",
    "Workload": "advisor.request",
    "load_catalog": "advisor.catalog",
    "recommend": "advisor.engine",
}
__all__ = [
    "AdvisorError",
    "Catalog",
    "CatalogError",
    "InputError",
    "NotFoundError",
    "Result",
    "Workload",
    "load_catalog",
    "recommend",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'advisor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
