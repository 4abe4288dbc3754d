"""The catalog: models of its entries, loading from YAML, cross-checks, and pure queries."""

from advisor.catalog.loading import load_catalog
from advisor.catalog.queries import (
    Catalog,
    get_accelerator,
    get_entry,
    get_instance_type,
    list_accelerators,
    list_instance_types,
)
from advisor.catalog.settings import shipped_catalog_dir

__all__ = [
    "Catalog",
    "get_accelerator",
    "get_entry",
    "get_instance_type",
    "list_accelerators",
    "list_instance_types",
    "load_catalog",
    "shipped_catalog_dir",
]
