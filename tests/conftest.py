from __future__ import annotations

from collections.abc import Iterator

import pytest

from advisor import Catalog, load_catalog


@pytest.fixture(scope="session", autouse=True)
def _catalog_cache_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The CLI caches the validated catalog (ADVISOR_CACHE_DIR): in the tests, and in the commands
    they start, a directory of the session's own, never the user's ~/.cache/advisor."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ADVISOR_CACHE_DIR", str(tmp_path_factory.mktemp("advisor-cache")))
        yield


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
