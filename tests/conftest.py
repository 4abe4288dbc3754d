from __future__ import annotations

import pytest

from advisor import Catalog, load_catalog


@pytest.fixture(scope="session")
def shipped() -> Catalog:
    return load_catalog(replace=False)


def _gpu_visible() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items or _gpu_visible():  # torch is imported only when a GPU test is collected
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible")
    for item in gpu_items:
        item.add_marker(skip)
