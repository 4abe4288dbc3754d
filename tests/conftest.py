from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from advisor import Catalog, load_catalog


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker gets a PostgreSQL schema of its own (the tests truncate and
    drop tables), before any test module reads ADVISOR_TEST_POSTGRES_URL at import."""
    worker = getattr(config, "workerinput", {}).get("workerid")
    url = os.environ.get("ADVISOR_TEST_POSTGRES_URL")
    if worker and url:
        os.environ["ADVISOR_TEST_POSTGRES_URL"] = worker_schema_url(url, f"pytest_{worker}")


def worker_schema_url(url: str, schema: str) -> str:
    """`url` with the schema `schema` (created if missing) first on its search path."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-csearch_path={schema}"))
    return urlunsplit(parts._replace(query=urlencode(query)))


@pytest.fixture(scope="session", autouse=True)
def _user_dirs_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The config file and caches the CLI reads (XDG directories) are the session's own, never
    the user's: a developer's ~/.config/advisor/config.toml must not change what a test sees."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
        patch.delenv("ADVISOR_CONFIG", raising=False)
        yield


@pytest.fixture(scope="session", autouse=True)
def _catalog_cache_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The CLI caches the validated catalog (ADVISOR_CACHE_DIR): in the tests, and in the commands
    they start, a directory of the session's own, never the user's ~/.cache/advisor."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ADVISOR_CACHE_DIR", str(tmp_path_factory.mktemp("advisor-cache")))
        yield


@pytest.fixture
def roofline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The datasheet roofline for every accelerator (ADVISOR_OPERATOR_TABLES=off), for a test
    whose expected figures are that model's arithmetic by hand (or the calibrated efficiency
    itself): with the measured tables read, the H100's and H200's figures come from them
    instead, whose own tests are tests/test_op_table_model.py's."""
    monkeypatch.setenv("ADVISOR_OPERATOR_TABLES", "off")


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
    # Tests marked slow (minutes on a busy machine) first: under pytest-xdist their files are
    # handed out first, so that the longest file does not start last and hold the run's end.
    items.sort(key=lambda item: "slow" not in item.keywords)
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items or _gpu_visible():  # torch is imported only when a GPU test is collected
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fresh_consoles() -> Iterator[None]:
    """The CLI makes its consoles once a process (advisor/cli/common.py), reading COLUMNS then;
    in the test process each test gets its own, so that one test's terminal width (an 80-column
    run before it in the same worker) is not another's."""
    from advisor.cli.common import console, err_console

    console.cache_clear()
    err_console.cache_clear()
    yield
