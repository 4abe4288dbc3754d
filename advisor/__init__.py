"""advisor: recommends hardware for a workload from a validated catalog, and verifies machines.

The public surface is small; everything else is private to the package.
"""

from advisor.catalog import Catalog
from advisor.engine import Result, recommend
from advisor.errors import AdvisorError, CatalogError, InputError, NotFoundError
from advisor.loader import load_catalog
from advisor.workload import Workload

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
