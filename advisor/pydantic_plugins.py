"""Pydantic's plugin discovery, answered cheaply where no plugin is installed.

Pydantic looks for plugins when it builds its first validator: its loader
(pydantic/plugin/_loader.py) imports importlib.metadata and reads the entry points of every
installed distribution, looking for the `pydantic` group. In `advisor recommend` that was about
10 ms of a 155 ms command (benchmarks/bench_startup.py): 7 ms importing importlib.metadata
(email, zipfile, csv, tempfile come with it) and 4 ms reading 114 distributions' metadata.

skip_empty_discovery() reads the same metadata importlib.metadata would (each sys.path
directory's *.dist-info and *.egg-info, their entry_points.txt) without that import, and only
where it finds no distribution declaring the `pydantic` group does it give pydantic a loader
that answers "no plugins". That is the answer pydantic's own loader would give, so nothing a
user sees changes: with a plugin installed (or anything the scan cannot read as cheaply: a zip
or an egg on sys.path, a meta-path finder with its own distributions) pydantic's loader runs as
before and finds it. PYDANTIC_DISABLE_PLUGINS only removes plugins, so with none there is
nothing for it to remove.

Only the console script does this (advisor/cli/__init__.py main(), own process): a program that
imports advisor keeps pydantic as it found it.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterable
from importlib.machinery import PathFinder

LOADER = "pydantic.plugin._loader"  # the one module pydantic asks: get_plugins()
GROUP = "pydantic"  # the entry-point group pydantic's loader reads


def skip_empty_discovery() -> bool:
    """Give pydantic a loader that finds no plugins, if no installed distribution declares one
    and pydantic has not loaded its own yet. True when it did."""
    if LOADER in sys.modules or not _no_plugin_declared(sys.path):
        return False
    loader = types.ModuleType(
        LOADER, "No pydantic plugin is installed (advisor/pydantic_plugins.py)."
    )
    loader.PYDANTIC_ENTRY_POINT_GROUP = GROUP  # type: ignore[attr-defined]
    loader.get_plugins = _no_plugins  # type: ignore[attr-defined]
    sys.modules[LOADER] = loader
    return True


def _no_plugins() -> tuple[()]:
    return ()


def _no_plugin_declared(paths: Iterable[str]) -> bool:
    """Whether importlib.metadata would find no `pydantic` entry point along `paths`: False
    as well wherever this scan cannot be sure (it then leaves the question to pydantic)."""
    for finder in sys.meta_path:  # importlib.metadata asks each finder for its distributions
        if finder is not PathFinder and hasattr(finder, "find_distributions"):
            return False
    return all(_none_in(path) for path in paths)


def _none_in(path: str) -> bool:
    """No `pydantic` entry point in the distributions directly inside `path` (one sys.path
    entry; importlib.metadata's MetadataPathFinder looks no deeper)."""
    root = path or "."
    if root.lower().endswith(".egg"):
        return False  # an egg's metadata lies elsewhere
    try:
        children = os.listdir(root)
    except OSError:  # missing (nothing to find there) or a file (a zip: not read here)
        return not os.path.isfile(root)
    for child in children:
        if not child.lower().endswith((".dist-info", ".egg-info")):
            continue
        try:
            with open(os.path.join(root, child, "entry_points.txt"), "rb") as file:
                text = file.read()
        except (FileNotFoundError, NotADirectoryError):
            continue  # no entry points (an .egg-info may be a file)
        except OSError:
            return False
        if _declares(text):
            return False
    return True


def _declares(text: bytes) -> bool:
    """Whether an entry_points.txt has a `pydantic` section, as importlib.metadata reads its
    sections (each stripped line in brackets names one: the name is that line stripped of
    brackets); undecodable text counts as declaring one."""
    try:
        lines = text.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return True
    for line in lines:
        value = line.strip()
        if value.startswith("[") and value.endswith("]") and value.strip("[]") == GROUP:
            return True
    return False
