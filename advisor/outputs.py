"""Files the commands write: one check of an output path, one atomic writer.

`check_output_path` runs before any work (a probe measures for a minute; a review reads the whole
fleet), so that a typo in --output fails at once with one line, not after the work is done.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from advisor.errors import InputError


def check_output_path(path: Path, flag: str = "--output") -> None:
    """InputError (exit 2) when `path` cannot be a file we write: a directory, or a file in a
    directory that does not exist. Whether the directory is writable shows at the write."""
    if path.is_dir():
        raise InputError(f"{flag} {str(path)!r} is a directory: give a file path")
    if not path.parent.is_dir():
        raise InputError(f"{flag}: directory {str(path.parent)!r} does not exist")


def write_atomically(path: Path, content: str | bytes) -> Path:
    """Write `content` beside `path`, then rename it over `path`: a reader never sees half a file.

    The temporary name is unique per call (pid and a random part), so two writers in one
    directory never share one; it is removed when the write fails. Text is written as UTF-8.
    """
    data = content.encode("utf-8") if isinstance(content, str) else content
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_json(path: Path, data: Any) -> Path:
    """A report as indented JSON with a final newline, written atomically."""
    return write_atomically(path, json.dumps(data, indent=2) + "\n")
