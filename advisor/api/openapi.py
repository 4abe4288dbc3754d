"""Writes the HTTP contract, openapi.yaml, from the app: `python -m advisor.api.openapi [FILE]`.

A test regenerates it and fails when the checked-in file differs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from advisor.api import create_app
from advisor.api.settings import Settings


def spec() -> dict[str, Any]:
    """The spec of an app over an in-memory SQLite database: no file, and nothing is stored."""
    # the shipped catalog, whatever ADVISOR_CATALOG says in this shell
    app = create_app(Settings(database_url="sqlite://", catalog_dir=None, catalog_mode="extend"))
    try:
        return app.openapi()
    finally:
        app.state.advisor.store.close()


def render() -> str:
    return yaml.safe_dump(spec(), sort_keys=False, allow_unicode=True, width=100)


def main() -> None:
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[2] / "openapi.yaml"
    target.write_text(render())
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
