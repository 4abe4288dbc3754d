"""The validated catalog cached for the CLI: a hit skips the YAML, anything that could change the
answer misses, and a broken or unwritable cache never changes an answer or an error."""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
import pytest
import yaml

from advisor.catalog import Catalog, loading
from advisor.catalog.loading import catalog_cache_dir, load_catalog
from advisor.errors import CatalogError
from tests.factories import TODAY, mini_catalog_data, write_catalog
from tests.factories import acc as rented_acc

REPO = Path(__file__).resolve().parents[1]


def acc(id: str, **kw: Any) -> dict[str, Any]:
    """An accelerator this test adds without an instance type: it says why (the catalog's
    instance-or-reason rule)."""
    return rented_acc(id, no_instance_reason="added by the test, not rented", **kw)


@dataclass
class YamlCalls:
    count: int = 0


@pytest.fixture(autouse=True)
def _cache_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ADVISOR_NO_CACHE", raising=False)
    monkeypatch.delenv("ADVISOR_CATALOG", raising=False)
    monkeypatch.delenv("ADVISOR_CATALOG_MODE", raising=False)
    monkeypatch.delenv("ADVISOR_MAX_PRICE_AGE_DAYS", raising=False)


@pytest.fixture
def yaml_calls(monkeypatch: pytest.MonkeyPatch) -> YamlCalls:
    """Counts the files the loader parses: 0 on a hit, one per file on a miss."""
    calls = YamlCalls()
    real = yaml.load

    def counting(stream: Any, Loader: Any) -> Any:
        calls.count += 1
        return real(stream, Loader=Loader)

    monkeypatch.setattr(yaml, "load", counting)
    return calls


def cached_files(cache: Path) -> list[Path]:
    return sorted(cache.glob("catalog-*.pickle"))


def mini(tmp_path: Path) -> Path:
    return write_catalog(tmp_path / "mini", mini_catalog_data())


def load_mini(directory: Path, cache: Path | None, **kw: Any) -> Catalog:
    args: dict[str, Any] = {"replace": True, "today": TODAY, "max_age_days": 365, **kw}
    return load_catalog(directory, cache_dir=cache, **args)


def test_a_hit_returns_an_equal_catalog_without_reading_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, cache = mini(tmp_path), tmp_path / "cache"
    uncached = load_mini(directory, None)
    first = load_mini(directory, cache)
    assert len(cached_files(cache)) == 1

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("a cache hit parsed YAML")

    monkeypatch.setattr(yaml, "load", refuse)
    second = load_mini(directory, cache)
    assert second == first == uncached
    assert second is not first and second.warnings == first.warnings
    assert second.sources == (str(directory),)


def test_the_shipped_catalog_with_its_warnings_round_trips(
    tmp_path: Path, yaml_calls: YamlCalls, shipped: Catalog
) -> None:
    cache = tmp_path / "cache"
    first = load_catalog(cache_dir=cache)
    parsed = yaml_calls.count
    assert parsed > 0
    second = load_catalog(cache_dir=cache)
    assert yaml_calls.count == parsed  # nothing parsed the second time
    assert second == first == shipped


def test_repeated_text_is_one_object_in_the_catalog_and_in_its_cache(tmp_path: Path) -> None:
    """Every price of a snapshot repeats its `source`: one object per distinct text, through the
    pickle too (pickle writes an object once however often it is referenced)."""
    cache = tmp_path / "cache"
    for catalog in (load_catalog(cache_dir=cache), load_catalog(cache_dir=cache)):
        prices = [p for it in catalog.instance_types.values() for p in it.prices]
        texts = {p.source for p in prices}
        assert len(prices) > 10 * len(texts)
        assert len({id(p.source) for p in prices}) == len(texts)
    [cached] = cache.glob("*.pickle")
    assert cached.stat().st_size < 1_000_000  # 1.6 MB with a copy of the text per price


class _Loose(pydantic.BaseModel):
    """A model with extra values: the cache's compact form cannot hold it."""

    model_config = pydantic.ConfigDict(extra="allow")
    a: int


def _states(x: Any, y: Any) -> int:
    """The models of two catalogs compared by their pickled state, walking both alike."""
    assert type(x) is type(y)
    if isinstance(x, pydantic.BaseModel):
        assert x.__getstate__() == y.__getstate__()
        return 1 + _states(x.__dict__, y.__dict__)
    if isinstance(x, dict):
        assert list(x) == list(y)
        return sum(_states(x[k], y[k]) for k in x)
    if isinstance(x, list | tuple):
        assert len(x) == len(y)
        return sum(_states(u, v) for u, v in zip(x, y, strict=True))
    assert x == y
    return 0


def test_the_cache_gives_back_each_model_as_pydantic_pickles_it(
    tmp_path: Path, shipped: Catalog
) -> None:
    """The cache stores models compactly (loading.py _CachePickler): each comes back with the
    state pydantic's own pickling restores, the prices sharing their fields set and their dates,
    a copy with an update leaving the shared set alone; a model with extra values is pickled as
    pickle pickles it."""
    cache = tmp_path / "cache"
    load_catalog(cache_dir=cache)
    cached = load_catalog(cache_dir=cache)
    reference = pickle.loads(pickle.dumps(shipped))  # pydantic's own pickling
    fields = [f.name for f in dataclasses.fields(Catalog)]  # not what a query left on it
    assert (
        _states([getattr(reference, f) for f in fields], [getattr(cached, f) for f in fields])
        > 3000
    )
    prices = [p for it in cached.instance_types.values() for p in it.prices]
    assert len({id(p.model_fields_set) for p in prices}) <= 2  # 3,400 prices, one set each before
    assert len({id(p.as_of) for p in prices}) == len({p.as_of for p in prices})
    first, second = prices[0], prices[1]
    assert first.model_fields_set is second.model_fields_set
    given = set(first.model_fields_set)
    changed = first.model_copy(update={"flag": "checked"})
    assert changed.flag == "checked" and first.model_fields_set == given == second.model_fields_set
    loose = _Loose(a=1, b=2)
    back = pickle.loads(loading._dumps(loose))  # type: ignore[arg-type]
    assert back == loose and back.__pydantic_extra__ == {"b": 2}


# --- Every input of the answer is in the key --------------------------------------------------
# The base: the shipped catalog extended by a user directory holding one file.


def _edit_file(user: Path, tmp_path: Path) -> dict[str, Any]:
    write_catalog(user, {"accelerators": [acc("extra-gpu", memory_gb=96)]}, "a.yaml")
    return {}


def _new_overlay_file(user: Path, tmp_path: Path) -> dict[str, Any]:
    write_catalog(user, {"accelerators": [acc("another-gpu")]}, "b.yml")
    return {}


def _new_file_in_a_subfolder(user: Path, tmp_path: Path) -> dict[str, Any]:
    write_catalog(user / "more", {"accelerators": [acc("deep-gpu")]}, "c.yaml")
    return {}


def _another_day(user: Path, tmp_path: Path) -> dict[str, Any]:
    return {"today": TODAY + dt.timedelta(days=1)}


def _a_day_past_every_price(user: Path, tmp_path: Path) -> dict[str, Any]:
    return {"today": TODAY + dt.timedelta(days=3650)}


def _shorter_max_age(user: Path, tmp_path: Path) -> dict[str, Any]:
    return {"max_age_days": 1}


def _max_age_from_the_environment(user: Path, tmp_path: Path) -> dict[str, Any]:
    os.environ["ADVISOR_MAX_PRICE_AGE_DAYS"] = "2"  # the autouse fixture restores it
    return {"max_age_days": None}


def _same_files_in_another_directory(user: Path, tmp_path: Path) -> dict[str, Any]:
    copy = shutil.copytree(user, tmp_path / "elsewhere")
    return {"catalog_dir": copy}  # sources and warnings name the directory


def _replace_instead_of_extend(user: Path, tmp_path: Path) -> dict[str, Any]:
    write_catalog(user, mini_catalog_data(), "a.yaml")
    return {"replace": True}


def _same_bytes_under_another_name(user: Path, tmp_path: Path) -> dict[str, Any]:
    (user / "a.yaml").rename(user / "z.yaml")
    return {}


def _same_size_edit_with_its_times_put_back(user: Path, tmp_path: Path) -> dict[str, Any]:
    """What `rsync -t` or `touch -r` can leave: other bytes, the same size, the same mtime."""
    path = user / "a.yaml"
    before = path.stat()
    _edit_file(user, tmp_path)  # memory_gb 80 -> 96: the same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    return {}


def _a_copy_moved_over_it(user: Path, tmp_path: Path) -> dict[str, Any]:
    """An editor's save: a new file of the same size and mtime renamed over the old one."""
    path, new = user / "a.yaml", tmp_path / "new.yaml"
    write_catalog(tmp_path, {"accelerators": [acc("extra-gpu", memory_gb=96)]}, new.name)
    shutil.copystat(path, new)
    os.replace(new, path)
    return {}


def _past_its_tick(path: Path) -> None:
    """Waits until a change made now is stamped later than `path`'s last change: the file
    system's clock ticks (a few ms on Linux) and a change within the tick stamps the same
    time, which a settled file (SETTLED_NS) is trusted not to have."""
    probe = path.parent.parent / "tick"
    while True:
        probe.write_bytes(b"")
        if probe.stat().st_ctime_ns > path.stat().st_ctime_ns:
            probe.unlink()
            return
        time.sleep(0.001)


# A settling time no test outlasts: "recent" files stay recent however slowly a busy machine
# runs the test (with the default 5 s, a file written at a test's start settled between two of
# its loads, and its key moved from its bytes to its stat: one more miss than the test expects).
NEVER_SETTLED_NS = 10**18


@pytest.fixture(params=["recent", "settled"])
def settled(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both ways a catalog file is in the key: by its bytes while it was changed recently, by
    its stat once it has settled (loading.py _stamp); here every file has settled at once, or
    none for the test's length."""
    settles = request.param == "settled"
    monkeypatch.setattr(loading, "SETTLED_NS", 0 if settles else NEVER_SETTLED_NS)
    return settles


@pytest.mark.parametrize(
    "change",
    [
        _edit_file,
        _new_overlay_file,
        _new_file_in_a_subfolder,
        _another_day,
        _a_day_past_every_price,
        _shorter_max_age,
        _max_age_from_the_environment,
        _same_files_in_another_directory,
        _replace_instead_of_extend,
        _same_bytes_under_another_name,
        _same_size_edit_with_its_times_put_back,
        _a_copy_moved_over_it,
    ],
)
def test_anything_that_could_change_the_answer_misses(
    change: Callable[[Path, Path], dict[str, Any]],
    settled: bool,
    tmp_path: Path,
    yaml_calls: YamlCalls,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ADVISOR_MAX_PRICE_AGE_DAYS", "365")
    user = write_catalog(tmp_path / "user", {"accelerators": [acc("extra-gpu")]}, "a.yaml")
    cache = tmp_path / "cache"
    base: dict[str, Any] = {"catalog_dir": user, "replace": False, "today": TODAY}
    base["max_age_days"] = 365
    load_catalog(**base, cache_dir=cache)
    before = yaml_calls.count
    if settled:
        _past_its_tick(user / "a.yaml")

    changed = {**base, **change(user, tmp_path)}
    got = load_catalog(**changed, cache_dir=cache)

    assert yaml_calls.count > before, "a changed input was answered from the cache"
    assert got == load_catalog(**changed)  # the same answer as without a cache
    assert len(cached_files(cache)) == 1  # the older file is removed
    again = yaml_calls.count
    assert load_catalog(**changed, cache_dir=cache) == got
    assert yaml_calls.count == again  # and the new inputs now hit


def test_answers_that_differ_do_differ(tmp_path: Path) -> None:
    """The misses above are not only re-reads: the cached answer would have been wrong."""
    user = write_catalog(tmp_path / "user", {"accelerators": [acc("extra-gpu")]}, "a.yaml")
    cache = tmp_path / "cache"
    old = load_catalog(user, replace=False, today=TODAY, max_age_days=365, cache_dir=cache)
    _edit_file(user, tmp_path)
    new = load_catalog(user, replace=False, today=TODAY, max_age_days=365, cache_dir=cache)
    assert (old.accelerators["extra-gpu"].memory_gb, new.accelerators["extra-gpu"].memory_gb) == (
        80,
        96,
    )
    later = TODAY + dt.timedelta(days=3650)  # every price older than the max age
    stale = load_catalog(user, replace=False, today=later, max_age_days=365, cache_dir=cache)
    assert len(stale.warnings) > len(new.warnings)
    assert any("older than 365 days" in w for w in stale.warnings)


def _refuse_reading_catalog_files(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: Path) -> bytes:
        raise AssertionError(f"read {path}")

    monkeypatch.setattr(loading, "_read_bytes", refuse)


def test_a_hit_on_settled_files_reads_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files last changed more than SETTLED_NS ago are in the key by their stat alone."""
    directory, cache = mini(tmp_path), tmp_path / "cache"
    monkeypatch.setattr(loading, "SETTLED_NS", 0)
    first = load_mini(directory, cache)
    _refuse_reading_catalog_files(monkeypatch)
    assert load_mini(directory, cache) == first


def test_a_recently_changed_file_is_keyed_by_its_bytes(
    tmp_path: Path, yaml_calls: YamlCalls, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a file system whose coarse clock stamped two edits alike (the same size, times, inode),
    a file changed within SETTLED_NS is still told apart by its bytes; every file is read where
    the stat is not trusted (STAT_TRUSTED)."""
    monkeypatch.setattr(loading, "SETTLED_NS", NEVER_SETTLED_NS)
    user = write_catalog(tmp_path / "user", {"accelerators": [acc("extra-gpu")]}, "a.yaml")
    real_stat = os.stat
    now = time.time_ns()
    first = real_stat(user / "a.yaml")
    frozen = os.stat_result((*first[:7], now // 10**9, now // 10**9, now // 10**9), {})
    frozen_ns = {"st_mtime_ns": now, "st_ctime_ns": now}

    class Unmoved:  # the first edit's stat, after the second edit too
        def __getattr__(self, name: str) -> Any:
            return frozen_ns.get(name, getattr(frozen, name))

    def coarse(path: Any, *args: Any, **kw: Any) -> Any:
        return Unmoved() if Path(path) == user / "a.yaml" else real_stat(path, *args, **kw)

    monkeypatch.setattr(os, "stat", coarse)
    cache = tmp_path / "cache"
    args: dict[str, Any] = {"replace": False, "today": TODAY, "max_age_days": 365}
    old = load_catalog(user, cache_dir=cache, **args)
    _edit_file(user, tmp_path)  # memory_gb 80 -> 96: the same size
    before = yaml_calls.count
    new = load_catalog(user, cache_dir=cache, **args)
    assert yaml_calls.count > before
    assert (old.accelerators["extra-gpu"].memory_gb, new.accelerators["extra-gpu"].memory_gb) == (
        80,
        96,
    )
    monkeypatch.setattr(loading, "STAT_TRUSTED", False)  # Windows: the bytes are read
    monkeypatch.setattr(loading, "SETTLED_NS", 0)
    load_catalog(user, cache_dir=cache, **args)
    _refuse_reading_catalog_files(monkeypatch)
    with pytest.raises(AssertionError, match="read .*yaml"):
        load_catalog(user, cache_dir=cache, **args)


@pytest.fixture
def fresh_fingerprint() -> Iterator[None]:
    loading._code_fingerprint.cache_clear()
    yield
    loading._code_fingerprint.cache_clear()


def test_another_pydantic_version_misses(
    tmp_path: Path, yaml_calls: YamlCalls, monkeypatch: pytest.MonkeyPatch, fresh_fingerprint: None
) -> None:
    directory, cache = mini(tmp_path), tmp_path / "cache"
    load_mini(directory, cache)
    before = yaml_calls.count
    monkeypatch.setattr(pydantic, "VERSION", "0.0.0-other")
    loading._code_fingerprint.cache_clear()
    load_mini(directory, cache)
    assert yaml_calls.count > before


def test_edited_validation_code_misses(
    settled: bool,
    tmp_path: Path,
    yaml_calls: YamlCalls,
    monkeypatch: pytest.MonkeyPatch,
    fresh_fingerprint: None,
) -> None:
    """The fingerprint reads every .py file of advisor/catalog/ (by its stat once settled, as a
    catalog file): a copy of the package, edited, its size and mtime put back."""
    package = shutil.copytree(Path(loading.__file__).parent, tmp_path / "catalog_pkg")
    monkeypatch.setattr(loading, "__file__", str(package / "loading.py"))
    directory, cache = mini(tmp_path), tmp_path / "cache"
    load_mini(directory, cache)
    load_mini(directory, cache)
    before = yaml_calls.count  # one miss, then one hit
    models = package / "models.py"
    if settled:
        _past_its_tick(models)
    old, text = models.stat(), models.read_text()
    models.write_text(text.replace("Field(ge=0)", "Field(ge=1)", 1))  # a changed validator
    os.utime(models, ns=(old.st_atime_ns, old.st_mtime_ns))
    assert models.read_text() != text
    assert (models.stat().st_size, models.stat().st_mtime_ns) == (old.st_size, old.st_mtime_ns)
    loading._code_fingerprint.cache_clear()
    load_mini(directory, cache)
    assert yaml_calls.count > before


def test_catalog_files_are_what_rglob_finds(tmp_path: Path) -> None:
    """Every entry named *.yaml or *.yml, a directory too (its read is then reported), none
    inside a symlinked directory, hidden ones and dangling links included."""
    top, other = tmp_path / "top", tmp_path / "other"
    for path in ("a.yaml", ".h.yml", "sub/b.yml", "sub/deeper/c.yaml", "n.txt", "d.yaml/e.yaml"):
        (top / path).parent.mkdir(parents=True, exist_ok=True)
        (top / path).write_text("")
    other.mkdir()
    (other / "o.yaml").write_text("")
    (top / "link").symlink_to(other)
    (top / "lf.yaml").symlink_to(other / "o.yaml")
    (top / "dangling.yaml").symlink_to(tmp_path / "missing.yaml")
    (top / "sub" / "loop").symlink_to(top)
    found = loading._catalog_files(top)
    assert found == sorted(p for p in top.rglob("*") if p.name.endswith((".yaml", ".yml")))
    assert [p.relative_to(top).as_posix() for p in found] == [
        ".h.yml",
        "a.yaml",
        "d.yaml",
        "d.yaml/e.yaml",
        "dangling.yaml",
        "lf.yaml",
        "sub/b.yml",
        "sub/deeper/c.yaml",
    ]


# --- A broken cache never changes an answer ------------------------------------------------------


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda good: b"", id="empty"),
        pytest.param(lambda good: b"not a pickle at all", id="garbage"),
        pytest.param(lambda good: good[: len(good) // 2], id="truncated"),
        pytest.param(lambda good: pickle.dumps({"accelerators": {}}), id="wrong-type"),
        pytest.param(
            lambda good: good.replace(b"advisor.catalog.queries", b"advisor.catalog.nowhere"),
            id="class-that-moved",
        ),
    ],
)
def test_a_corrupt_cache_file_is_ignored_and_replaced(
    spoil: Callable[[bytes], bytes], tmp_path: Path, yaml_calls: YamlCalls
) -> None:
    directory, cache = mini(tmp_path), tmp_path / "cache"
    good = load_mini(directory, cache)
    [path] = cached_files(cache)
    path.write_bytes(spoil(path.read_bytes()))
    before = yaml_calls.count

    assert load_mini(directory, cache) == good
    assert yaml_calls.count > before  # loaded from the YAML
    assert cached_files(cache) == [path]
    assert pickle.loads(path.read_bytes()) == good  # and replaced by a good one


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="chown needs root")
def test_a_cache_file_owned_by_someone_else_is_never_unpickled(tmp_path: Path) -> None:
    directory, cache = mini(tmp_path), tmp_path / "cache"
    good = load_mini(directory, cache)
    [path] = cached_files(cache)
    planted = Catalog(accelerators={}, instance_types={}, workloads={})
    path.write_bytes(pickle.dumps(planted))
    os.chown(path, 12345, 12345)
    assert load_mini(directory, cache) == good


def _cache_dir_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "cache").write_text("a file, not a directory")
    return tmp_path / "cache"


def _cache_dir_under_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "file").write_text("a file, not a directory")
    return tmp_path / "file" / "cache"


def _read_only_file_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    def refuse(*_: Any) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "replace", refuse)
    return tmp_path / "cache"


def _disk_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    real = Path.write_bytes

    def full(self: Path, data: Any) -> int:
        real(self, data[:10])  # what a full disk leaves: part of the file
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    return tmp_path / "cache"


def _directory_without_write_permission(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if hasattr(os, "getuid") and os.getuid() == 0:
        pytest.skip("root writes into a read-only directory")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o500)
    return cache


@pytest.mark.parametrize(
    "unwritable",
    [
        _cache_dir_is_a_file,
        _cache_dir_under_a_file,
        _read_only_file_system,
        _disk_full,
        _directory_without_write_permission,
    ],
)
def test_an_unwritable_cache_still_loads(
    unwritable: Callable[[Path, pytest.MonkeyPatch], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    directory = mini(tmp_path)
    expected = load_mini(directory, None)
    cache = unwritable(tmp_path, monkeypatch)
    assert load_mini(directory, cache) == expected
    assert load_mini(directory, cache) == expected
    if cache.is_dir():  # nothing left behind: no cache file, no temporary file
        assert list(cache.iterdir()) == []


# --- Errors are never cached ----------------------------------------------------------------------


def _broken(data: dict[str, Any]) -> dict[str, Any]:
    data["accelerators"][0]["memory_gb"] = "lots"
    return data


def test_a_catalog_with_an_error_is_never_cached_and_still_raises(tmp_path: Path) -> None:
    directory = write_catalog(tmp_path / "mini", _broken(mini_catalog_data()))
    cache = tmp_path / "cache"
    with pytest.raises(CatalogError) as uncached:
        load_mini(directory, None)
    for _ in range(2):
        with pytest.raises(CatalogError) as cached:
            load_mini(directory, cache)
        assert str(cached.value) == str(uncached.value)
        assert "memory_gb" in str(cached.value)
        assert cached_files(cache) == []


def test_a_cached_catalog_does_not_hide_a_later_error(tmp_path: Path) -> None:
    directory, cache = mini(tmp_path), tmp_path / "cache"
    load_mini(directory, cache)
    write_catalog(directory, _broken(mini_catalog_data()))
    with pytest.raises(CatalogError, match="memory_gb"):
        load_mini(directory, cache)


def test_an_unreadable_catalog_file_is_reported_as_without_a_cache(tmp_path: Path) -> None:
    directory = mini(tmp_path)
    (directory / "dangling.yaml").symlink_to(tmp_path / "missing.yaml")
    with pytest.raises(CatalogError) as uncached:
        load_mini(directory, None)
    with pytest.raises(CatalogError) as cached:
        load_mini(directory, tmp_path / "cache")
    assert str(cached.value) == str(uncached.value) and "cannot read" in str(cached.value)


# --- ADVISOR_NO_CACHE ------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "caches"), [("1", False), ("0", True), ("", True)])
def test_advisor_no_cache(value: str, caches: bool, tmp_path: Path, yaml_calls: YamlCalls) -> None:
    """ADVISOR_NO_CACHE is the CLI's: it leaves the CLI no cache directory to read or write."""
    directory, cache = mini(tmp_path), tmp_path / "cache"
    load_mini(directory, cache)  # a cache file is there
    where = catalog_cache_dir({"ADVISOR_CACHE_DIR": str(cache), "ADVISOR_NO_CACHE": value})
    assert (where == cache) is caches
    before = yaml_calls.count
    load_mini(directory, where)
    assert (yaml_calls.count == before) is caches  # with "1" the YAML is read despite the file

    if not caches:  # and nothing is written
        other = write_catalog(tmp_path / "other", mini_catalog_data())
        shutil.rmtree(cache)
        load_mini(other, where)
        assert not cache.exists()


# --- The CLI's cache directory ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"ADVISOR_CACHE_DIR": "/c/adv", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/c/adv"),
        ({"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/advisor"),
        ({"ADVISOR_CACHE_DIR": "", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/advisor"),
        # the XDG spec: a relative XDG_CACHE_HOME is invalid and ignored
        ({"XDG_CACHE_HOME": "rel", "HOME": "/h"}, "/h/.cache/advisor"),
        ({"HOME": "/h"}, "/h/.cache/advisor"),
    ],
)
def test_cli_cache_directory(
    environ: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", environ["HOME"])  # Path.home() reads HOME
    assert catalog_cache_dir(environ) == Path(expected)


def test_the_cli_caches_and_answers_the_same(tmp_path: Path) -> None:
    cache = tmp_path / "cli-cache"
    env = {**os.environ, "ADVISOR_CACHE_DIR": str(cache), "COLUMNS": "200"}
    env.pop("ADVISOR_NO_CACHE", None)
    argv = [sys.executable, "-m", "advisor", "recommend", "--workload", "fine_tuning"]
    argv += ["--memory-gb", "80", "--json"]
    runs = [
        subprocess.run(argv, capture_output=True, text=True, env=e, timeout=60, cwd=REPO)
        for e in (env, env, {**env, "ADVISOR_NO_CACHE": "1"})
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr
    assert len(cached_files(cache)) == 1
    miss, hit, uncached = (json.loads(r.stdout) for r in runs)
    assert miss == hit == uncached
    assert runs[0].stderr == runs[1].stderr == runs[2].stderr  # the same warnings
