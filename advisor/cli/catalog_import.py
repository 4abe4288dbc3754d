"""The disk and network side of `advisor catalog import`: read the source (file or URL), run the
pure importer (advisor/catalog/importers/skypilot.py for SkyPilot's CSVs, ec2_reserved.py for
AWS reserved rates), validate the result with the loader, and only then write the provider's
instance file (temporary file, then rename)."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from advisor.catalog.importers import ec2_reserved, skypilot
from advisor.catalog.importers.skypilot_names import FAMILIES
from advisor.catalog.loading import load_catalog
from advisor.catalog.queries import Catalog
from advisor.catalog.settings import shipped_catalog_dir
from advisor.errors import CatalogError, InputError
from advisor.outputs import write_atomically


@dataclass(frozen=True)
class ImportResult:
    summary: skypilot.Summary | ec2_reserved.Summary
    path: Path  # the instance file written (or that would be, with --dry-run)
    written: bool
    warnings: tuple[str, ...]


def read_source(source: str) -> str:
    """The text of a local path or an http(s) URL (through the project's HTTP client)."""
    if source.startswith(("http://", "https://")):
        return _fetch(source)
    path = Path(source)
    if not path.is_file():
        raise InputError(f"{source!r} is not a file (give a file's path or an http(s) URL)")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {source!r}: {exc}") from None


def _fetch(url: str) -> str:
    from advisor.http_client import HttpClient, HttpError

    parts = urllib.parse.urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    with HttpClient(base, flag="SOURCE", timeout_s=60.0) as client:
        reply = client.get(path)
    if reply.status != 200:
        raise HttpError(f"{url}: HTTP {reply.status}: {reply.text(200)}")
    return reply.content.decode("utf-8", errors="strict")


def guess_provider(source: str) -> str:
    """The provider from the path's folders (catalogs/v8/aws/vms.csv), else InputError."""
    parts = [p.lower() for p in urllib.parse.urlsplit(source).path.split("/")]
    parts += [p.lower() for p in Path(source).parts]
    found = [p for p in skypilot.LAYOUTS if p in parts]
    if len(set(found)) != 1:
        known = "|".join(skypilot.LAYOUTS)
        raise InputError(f"cannot tell the provider of {source!r}: give --provider {known}")
    return found[0]


def source_label(source: str) -> str:
    """What a price's `source` says: repo, path and commit for a snapshot folder named
    skypilot-<commit> (catalog/snapshots/skypilot-<commit>/catalogs/v8/aws/vms.csv), else the
    URL or path as given."""
    if source.startswith(("http://", "https://")):
        return source
    parts = Path(source).parts
    for index, part in enumerate(parts):
        if part.startswith("skypilot-") and len(part) > len("skypilot-"):
            commit = part[len("skypilot-") :]
            inner = "/".join(parts[index + 1 :])
            return f"skypilot-org/skypilot-catalog {inner}@{commit} (snapshot {source})"
    return source


def run_import(
    source: str,
    provider: str,
    out_dir: Path,
    *,
    catalog: Catalog,
    as_of: dt.date,
    label: str,
    dry_run: bool,
    scope: tuple[str, ...] = (),
) -> ImportResult:
    """Parse, merge, validate, write. Raises InputError (exit 2) on bad input; writes nothing
    unless the catalog with the new file loads and cross-checks."""
    if not out_dir.is_dir():
        raise InputError(f"--out: directory {str(out_dir)!r} does not exist")
    text = read_source(source)
    rows = skypilot.parse_csv(text, source, provider)
    path = out_dir / f"{provider}.yaml"
    existing = _existing_entries(path)
    known = set(catalog.accelerators)
    families = FAMILIES.get(provider, ())  # merge() keeps new ids inside `scope`
    wanted = skypilot.wanted_ids(provider, rows, (str(e.get("id")) for e in existing), families)
    found = skypilot.source_types(provider, rows, wanted)
    entries, summary = skypilot.merge(
        provider,
        existing,
        found,
        known_accelerators=known,
        as_of=as_of,
        source=label,
        scope=scope,
    )
    summary.unknown_accelerators.update(skypilot.unknown_names(rows, provider, known))
    content = skypilot.render_yaml(provider, entries, label, scope)
    warnings = validate(path, content)
    if not dry_run:
        write_atomically(path, content)
    return ImportResult(summary, path, not dry_run, warnings)


def run_reserved_import(
    source: str, out_dir: Path, *, as_of: dt.date, label: str, dry_run: bool
) -> ImportResult:
    """AWS reserved rates into aws.yaml beside its other prices (ec2_reserved.merge); the file's
    header and every other field are kept. Writes nothing unless the result loads."""
    path = out_dir / "aws.yaml"
    if not path.is_file():
        raise InputError(f"--out: {str(path)!r} does not exist (reserved rates join its types)")
    text = read_source(source)
    rates = ec2_reserved.parse(text, source)
    entries, summary = ec2_reserved.merge(_existing_entries(path), rates, as_of=as_of, source=label)
    # the header says where the file's other prices came from, still true; each reserved
    # price's `source` says where it came from
    content = "".join(header_lines(path)) + skypilot.entries_yaml(entries)
    warnings = validate(path, content)
    if not dry_run:
        write_atomically(path, content)
    return ImportResult(summary, path, not dry_run, warnings)


def header_lines(path: Path) -> list[str]:
    """The file's leading comment lines (its header), which an import keeps."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.startswith("#"):
            break
        lines.append(line)
    return lines


def _existing_entries(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read the existing {path}: {exc}") from None
    entries = data.get("instance_types") if isinstance(data, dict) else None
    if not isinstance(entries, list) or set(data) != {"instance_types"}:
        raise InputError(f"{path}: the importer rewrites files holding only `instance_types`")
    return [dict(e) for e in entries if isinstance(e, dict)]


def validate(path: Path, content: str) -> tuple[str, ...]:
    """Load the catalog as it would be with `content` at `path`, in a temporary copy.

    A file inside the shipped catalog is checked in a copy of the whole shipped catalog (so a
    removed type is really gone); a file elsewhere is checked as a user catalog extending the
    shipped one. Raises InputError listing the loader's problems; returns the loader's warnings,
    naming the real files."""
    shipped = shipped_catalog_dir().resolve()
    target = path.resolve()
    with tempfile.TemporaryDirectory(prefix="advisor-import-") as tmp:
        root = Path(tmp) / "catalog"
        if target.is_relative_to(shipped):
            shutil.copytree(shipped, root, ignore=shutil.ignore_patterns("snapshots"))
            (root / target.relative_to(shipped)).write_text(content, encoding="utf-8")
            replace = True
        else:
            root.mkdir()
            (root / path.name).write_text(content, encoding="utf-8")
            replace = False
        real = str(shipped) if replace else str(path.parent)
        try:
            catalog = load_catalog(root, replace=replace)
        except CatalogError as exc:
            text = str(exc).replace(str(root), real)
            raise InputError(
                f"the imported catalog does not validate; nothing written\n{text}"
            ) from None
        return tuple(w.replace(str(root), real) for w in catalog.warnings)
