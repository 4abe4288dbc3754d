"""Reads catalog YAML from disk and validates it into a Catalog. The only core module doing I/O.

With a cache directory (the CLI passes one), the validated Catalog is kept there as a pickle keyed
by a hash of everything the answer depends on, so that a command does not parse and validate the
YAML again while nothing changed (the catalog grows several times larger). The catalog files are
in the key by their stat where it can be trusted (_stamp), else by their bytes.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib.util
import io
import os
import pickle
import sys
import time
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pydantic
from pydantic import BaseModel, ValidationError

from advisor.catalog.models import (
    Accelerator,
    InstanceType,
    ModelPreset,
    NodeSystem,
    ProbeExpectation,
    SpotInterruption,
    WorkloadProfile,
)
from advisor.catalog.queries import Catalog
from advisor.catalog.settings import CatalogSettings, shipped_catalog_dir
from advisor.did_you_mean import did_you_mean
from advisor.errors import CatalogError, CatalogIssue
from advisor.outputs import write_atomically
from advisor.validation_errors import explain_validation

if TYPE_CHECKING:  # the cross-checks run only when the YAML is read: not on a cache hit
    from advisor.catalog.cross_checks import Origin
    from advisor.catalog.curation import PriceSanity


@functools.cache
def sections() -> dict[str, type[BaseModel]]:
    """Each YAML section's model, in the order errors list them. The curated sections' models
    (advisor/catalog/curation.py) are imported here: a cache hit never reads a section."""
    from advisor.catalog.curation import NodeFact, PriceSanity

    return {
        "accelerators": Accelerator,
        "instance_types": InstanceType,
        "workloads": WorkloadProfile,
        "probe_expectations": ProbeExpectation,
        "models": ModelPreset,
        "systems": NodeSystem,
        "spot_interruptions": SpotInterruption,
        "node_facts": NodeFact,  # merged into instance_types at load (apply_node_facts)
        "price_sanity": PriceSanity,
    }


Files = list[tuple[Path, bytes | OSError]]  # one directory's catalog files: path, bytes or error
CACHE_PREFIX = "catalog-"
CACHE_SUFFIX = ".pickle"


def catalog_dirs(
    user_dir: str | os.PathLike[str] | None = None,
    replace: bool | None = None,
    environ: Mapping[str, str] = os.environ,
) -> list[Path]:
    """The directories to read: the arguments where given, else the environment's settings."""
    return _settings(user_dir, replace, CatalogSettings.from_env(environ)).directories()


def _settings(
    user_dir: str | os.PathLike[str] | None, replace: bool | None, base: CatalogSettings
) -> CatalogSettings:
    """`base` with the arguments a caller gave in its place."""
    changes: dict[str, object] = {}
    if user_dir is not None:
        changes["catalog_dir"] = str(user_dir)
    if replace is not None:
        changes["catalog_mode"] = "replace" if replace else "extend"
    return base.model_copy(update=changes)


def catalog_cache_dir(environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where the validated catalog is cached, for the CLI and `advisor serve` alike:
    ADVISOR_CACHE_DIR, else $XDG_CACHE_HOME/advisor (an absolute path, as the XDG base-directory
    spec requires), else ~/.cache/advisor; None when ADVISOR_NO_CACHE is set (other than 0) or
    there is no home directory to put it in."""
    if environ.get("ADVISOR_NO_CACHE", "") not in ("", "0"):
        return None
    explicit = environ.get("ADVISOR_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = environ.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "advisor"
    try:
        return Path.home() / ".cache" / "advisor"
    except RuntimeError:  # no HOME and no password entry
        return None


def load_catalog(
    catalog_dir: str | os.PathLike[str] | None = None,
    *,
    replace: bool | None = None,
    max_age_days: int | None = None,
    today: dt.date | None = None,
    cache_dir: Path | None = None,
    settings: CatalogSettings | None = None,
) -> Catalog:
    """Load, validate and cross-check the catalog. Raises CatalogError listing every problem.

    The arguments override `settings` (default: the environment's, CatalogSettings.from_env).
    With `cache_dir`, a Catalog validated earlier from the same
    inputs is returned from there, and a fresh one is stored there; a catalog with problems is
    never stored. The cache never changes an answer or an error: any failure to read or write it
    means the normal load.
    """
    settings = _settings(catalog_dir, replace, settings or CatalogSettings.from_env())
    dirs = settings.directories()
    max_age = settings.max_price_age_days if max_age_days is None else max_age_days
    day = today or dt.date.today()  # one date for the key and the staleness check
    paths = [_catalog_files(directory) for directory in dirs]
    # Each file is read once: the bytes a key holds (a file it could not trust the stat of)
    # are the bytes parsed.
    read: dict[Path, bytes | OSError] = {}
    if cache_dir is None:
        return _load(dirs, _contents(paths, read), max_age, day)
    key = _cache_key(dirs, paths, max_age, day, read)
    if key is None:  # a file (or the code) we cannot read: the normal load reports a file
        return _load(dirs, _contents(paths, read), max_age, day)
    path = cache_dir / f"{CACHE_PREFIX}{key}{CACHE_SUFFIX}"
    cached = _read_cache(path)
    if cached is not None:
        return cached
    # raises CatalogError: nothing is stored
    catalog = _load(dirs, _contents(paths, read), max_age, day)
    _write_cache(path, catalog)
    return catalog


def _catalog_files(directory: Path) -> list[Path]:
    """Every *.yaml and *.yml under `directory`: what rglob("*.yaml") and rglob("*.yml") find
    (entries of any kind by their name, no symlinked directory entered, unreadable directories
    passed over), in one os.walk of the tree: half the time of one rglob, which makes a Path of
    every entry."""
    found = []
    for root, dirs, files in os.walk(directory):
        found += [Path(root, name) for name in (*dirs, *files) if name.endswith((".yaml", ".yml"))]
    return sorted(found)


def _read_bytes(path: Path) -> bytes | OSError:
    try:
        return path.read_bytes()
    except OSError as exc:  # reported by _load_file, in its place among the other problems
        return exc


def _contents(paths: list[list[Path]], read: dict[Path, bytes | OSError]) -> list[Files]:
    """Each directory's files with their bytes: those in `read` (read for the key) as read."""
    return [[(p, read[p] if p in read else _read_bytes(p)) for p in layer] for layer in paths]


def _load(dirs: list[Path], files: list[Files], max_age: int, today: dt.date) -> Catalog:
    from advisor.catalog.cross_checks import apply_node_facts, cross_check, sanity_thresholds

    issues: list[CatalogIssue] = []
    broken: set[str] = set()  # ids of entries that failed on their own: no cascade of errors
    layers: list[dict[str, dict[str, tuple[BaseModel, Origin]]]] = []
    strings: dict[str, str] = {}  # one object per distinct text across the files (_shared)
    for layer_index, (directory, paths) in enumerate(zip(dirs, files, strict=True)):
        layer: dict[str, dict[str, tuple[BaseModel, Origin]]] = {s: {} for s in sections()}
        if not paths:
            issues.append(CatalogIssue(str(directory), None, None, "no *.yaml files found"))
        for path, content in paths:
            _load_file(path, content, layer, issues, layer_index, broken, strings)
        layers.append(layer)

    merged: dict[str, dict[str, tuple[BaseModel, Origin]]] = {s: {} for s in sections()}
    for layer in layers:  # later layers (the user's) replace earlier entries with the same id
        for section, entries in layer.items():
            merged[section].update(entries)

    shipped = str(shipped_catalog_dir())
    fact_warnings = apply_node_facts(merged, issues, shipped if dirs[0] == Path(shipped) else None)
    warnings = fact_warnings + cross_check(
        merged, issues, broken=broken, max_age_days=max_age, today=today
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


# --- The cache of validated catalogs -------------------------------------------------------------
# Pickle is acceptable here because only our own user cache directory is read (the CLI's
# ADVISOR_CACHE_DIR, else $XDG_CACHE_HOME/advisor, else ~/.cache/advisor, created 0700), and a
# file in it is unpickled only when it belongs to the user running the command: the same user's
# files are its only input, so it can do nothing that user could not do already.


def _write_field(update: Callable[[bytes], None], data: bytes) -> None:
    """Length-prefixed, so that no two different sequences of fields hash the same bytes."""
    update(len(data).to_bytes(8, "big"))
    update(data)


@functools.cache
def _code_fingerprint() -> bytes | None:
    """What turns the YAML into a Catalog besides the files: the code of advisor/catalog/ (models,
    validators, cross-checks, the Catalog class), pydantic, PyYAML and the Python running them,
    each source file by its stat or its bytes as a catalog file is (_file_field). None (no
    caching) when that code cannot be read as source."""
    import pydantic_core

    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    sources = sorted(package.rglob("*.py"))
    if not sources:
        return None
    now_ns = time.time_ns()
    for source in sources:
        _write_field(digest.update, source.relative_to(package).as_posix().encode())
        if _file_field(digest.update, source, now_ns, {}) is not None:
            return None
    versions = (
        pydantic.VERSION,
        pydantic_core.__version__,
        sys.version,
        str(pickle.HIGHEST_PROTOCOL),
    )
    for version in versions:
        _write_field(digest.update, version.encode())
    # PyYAML without importing it (importing costs more than a cache hit): its __init__.py holds
    # its version, and its files show whether the libyaml loader is there.
    spec = importlib.util.find_spec("yaml")
    if spec is None or spec.origin is None:
        return None
    origin = Path(spec.origin)
    if _file_field(digest.update, origin, now_ns, {}) is not None:
        return None
    try:
        _write_field(digest.update, "\n".join(sorted(os.listdir(origin.parent))).encode())
    except OSError:
        return None
    return digest.digest()


# A file of the key (a catalog file, a source file of the code that reads them) whose last change
# (ctime and mtime) is older than this is keyed by its stat. A file system stamps a change to its
# timestamp granularity (a clock tick on Linux, up to 2 s on FAT) by its own clock (a file
# server's, for a network file system): a second edit of a file within that tick of the first,
# leaving its size, could leave its stat as it was. A recent change is keyed by the bytes, as
# every file was before, until it is this old.
SETTLED_NS = 5_000_000_000
STAT_TRUSTED = os.name != "nt"  # Windows' st_ctime is when a file was made, not last changed


def _stamp(path: Path, now_ns: int) -> bytes | OSError | None:
    """What the cache key holds of a settled file instead of its bytes: its size, its
    modification and change times, inode and device, as CPython trusts a .pyc by its source's
    mtime and size (the change time besides: an edit, a copy or a rename onto the file moves it,
    and no program can set it back). None where the stat cannot be trusted and the bytes are
    hashed instead: a file changed within SETTLED_NS of now (or in the future), and every file
    where STAT_TRUSTED is not. The OSError when it cannot be stat'ed."""
    if not STAT_TRUSTED:
        return None
    try:
        st = os.stat(path)
    except OSError as exc:
        return exc
    if now_ns - max(st.st_mtime_ns, st.st_ctime_ns) < SETTLED_NS:
        return None
    return b"%d %d %d %d %d" % (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _cache_key(
    dirs: list[Path],
    paths: list[list[Path]],
    max_age: int,
    today: dt.date,
    read: dict[Path, bytes | OSError],
) -> str | None:
    """sha256 over every input of the answer; None (no caching) when a catalog file or the code
    cannot be read. Each file is in it by its stat (_stamp) or, where that cannot be trusted,
    by its bytes, read into `read` for the load to parse.

    The directories themselves are part of it (not only the files' paths inside them): the
    Catalog records them in `sources` and its warnings name the files by their full paths.
    """
    code = _code_fingerprint()
    if code is None:
        return None
    now_ns = time.time_ns()
    digest = hashlib.sha256()
    _write_field(digest.update, code)
    _write_field(digest.update, today.isoformat().encode())
    _write_field(digest.update, str(max_age).encode())
    for layer_index, (directory, files) in enumerate(zip(dirs, paths, strict=True)):
        _write_field(digest.update, f"layer {layer_index}: {directory}".encode())
        for path in files:
            _write_field(digest.update, path.relative_to(directory).as_posix().encode())
            if _file_field(digest.update, path, now_ns, read) is not None:
                return None
    return digest.hexdigest()


def _file_field(
    update: Callable[[bytes], None], path: Path, now_ns: int, read: dict[Path, bytes | OSError]
) -> OSError | None:
    """One file in a key: its stat where that can be trusted (_stamp), else its bytes, read into
    `read`; the OSError (nothing written) when it can be neither stat'ed nor read."""
    stamp = _stamp(path, now_ns)
    kind = b"stat"
    if stamp is None:
        stamp = read[path] = _read_bytes(path)
        kind = b"bytes"
    if isinstance(stamp, OSError):
        return stamp
    _write_field(update, kind)
    _write_field(update, stamp)
    return None


def _read_cache(path: Path) -> Catalog | None:
    try:
        with path.open("rb") as file:
            if hasattr(os, "getuid") and os.fstat(file.fileno()).st_uid != os.getuid():
                return None  # not ours: never unpickled
            data = file.read()
        catalog = pickle.loads(data)
    except Exception:  # missing, unreadable, truncated, corrupt, from other code: load normally
        return None
    return catalog if isinstance(catalog, Catalog) else None


def _write_cache(path: Path, catalog: Catalog) -> None:
    """Store the catalog atomically and remove the older ones; any failure (a read-only
    directory, a full disk) only means that the next command loads the YAML again."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomically(path, _dumps(catalog))
        for old in path.parent.glob(f"{CACHE_PREFIX}*{CACHE_SUFFIX}"):
            if old.name != path.name:
                old.unlink(missing_ok=True)
    except Exception:  # the cache is an optimisation: it never makes a command fail
        return


# What pydantic's BaseModel.__getstate__ returns (and its __setstate__ restores, setting each).
_MODEL_STATE = frozenset(
    {"__dict__", "__pydantic_extra__", "__pydantic_fields_set__", "__pydantic_private__"}
)
_object_new = object.__new__  # what pickle calls, cls.__new__, for a model (checked as stored)
_object_setattr = object.__setattr__


class _CachePickler(pickle.Pickler):
    """Pickles the catalog's models as (class, field values, fields set) for _model to set
    back, instead of pickle's state dict per model for BaseModel.__setstate__, with each
    distinct fields set and each date stored once. The shipped catalog is 3,700 models, 3,400
    of them prices repeating the same fields set and 8 distinct dates: the cache shrinks from
    0.62 to 0.45 MB and reads in about 55% of the time, with 6,800 fewer objects to build and,
    at exit, to free (benchmarks/bench_startup.py).

    The models share their fields set: pydantic never changes one in place (model_copy copies
    it first), and the catalog's models are frozen. Each model is checked as it is stored:
    one that _model would not give back with the same state (__getstate__), or with extra or
    private values, is pickled as pickle pickles it. The cache key has pydantic's version: a
    cache is read by the pydantic that wrote it."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._sets: dict[frozenset[str], set[str]] = {}
        self._dates: dict[dt.date, dt.date] = {}

    def reducer_override(self, obj: Any) -> Any:
        if not isinstance(obj, BaseModel):
            return NotImplemented
        cls = type(obj)
        state = obj.__getstate__()
        values = state.get("__dict__")
        if (
            state.keys() != _MODEL_STATE
            or state["__pydantic_extra__"] is not None
            or state["__pydantic_private__"] is not None
            or not isinstance(values, dict)
            or cls.__new__ is not _object_new
        ):
            return NotImplemented
        given = frozenset(state["__pydantic_fields_set__"])
        shared = self._sets.get(given)
        if shared is None:
            shared = self._sets[given] = set(given)
        args = (cls, {k: self._date(v) for k, v in values.items()}, shared)
        if _model(*args).__getstate__() != state:
            return NotImplemented
        return _model, args

    def _date(self, value: Any) -> Any:
        return self._dates.setdefault(value, value) if type(value) is dt.date else value


def _model(cls: type[BaseModel], values: dict[str, Any], given: set[str]) -> BaseModel:
    """A model as _CachePickler stored it: what BaseModel.__setstate__ sets, set."""
    model = _object_new(cls)
    _object_setattr(model, "__dict__", values)
    _object_setattr(model, "__pydantic_fields_set__", given)
    _object_setattr(model, "__pydantic_extra__", None)
    _object_setattr(model, "__pydantic_private__", None)
    return model


def _dumps(catalog: Catalog) -> bytes:
    buffer = io.BytesIO()
    _CachePickler(buffer).dump(catalog)
    return buffer.getvalue()


def _flagged(
    instance_types: dict[str, InstanceType], sanity: PriceSanity
) -> dict[str, InstanceType]:
    """The instance types with each doubtful price's flag set (once, at load: the engine reads
    Price.flag per offering)."""
    from advisor.catalog.cross_checks import price_flags

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
    content: bytes | OSError,
    layer: dict[str, dict[str, tuple[BaseModel, Origin]]],
    issues: list[CatalogIssue],
    layer_index: int,
    broken: set[str],
    strings: dict[str, str],
) -> None:
    import yaml  # here, not at the top: a command answered from the cache never parses YAML

    # libyaml's loader when PyYAML was built with it (several times faster); both are safe loaders.
    loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    name = str(path)
    text = _decode(name, content, issues)
    if text is None:
        return
    try:
        data = yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        issues.append(CatalogIssue(name, None, None, f"YAML syntax error{where}: {problem}"))
        return
    if data is None:
        return
    if not isinstance(data, dict):
        issues.append(CatalogIssue(name, None, None, "top level must be a mapping of sections"))
        return
    data = _shared(data, strings)
    for section, entries in data.items():
        model = sections().get(section)
        if model is None:
            hint = did_you_mean(str(section), sections())
            valid = ", ".join(sections())
            msg = f"unknown section {section!r}{hint}; valid: {valid}"
            issues.append(CatalogIssue(name, None, None, msg))
            continue
        if not isinstance(entries, list):
            issues.append(CatalogIssue(name, None, section, "must be a list of entries"))
            continue
        for index, raw in enumerate(entries):
            _load_entry(name, section, model, index, raw, layer, issues, layer_index, broken)


def _shared(node: Any, strings: dict[str, str]) -> Any:
    """`node` with each string replaced by the first equal one seen (the models keep the object
    they are given): every price repeats its snapshot's `source`, a few hundred characters, and
    one object per distinct text halves the pickled cache every command reads (the shipped
    catalog: 1.63 MB -> 0.61 MB) and the memory of a loaded catalog."""
    if isinstance(node, str):
        return strings.setdefault(node, node)
    if isinstance(node, dict):
        return {_shared(k, strings): _shared(v, strings) for k, v in node.items()}
    if isinstance(node, list):
        return [_shared(v, strings) for v in node]
    return node


def _decode(name: str, content: bytes | OSError, issues: list[CatalogIssue]) -> str | None:
    """The file's text as Path.read_text(encoding="utf-8") gives it (universal newlines)."""
    try:
        if isinstance(content, OSError):
            raise content
        return content.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except (OSError, UnicodeDecodeError) as exc:
        issues.append(CatalogIssue(name, None, None, f"cannot read: {exc}"))
        return None


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
    from advisor.catalog.cross_checks import Origin

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
