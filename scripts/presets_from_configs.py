"""Writes catalog/models-from-configs.yaml: a preset for each config.json copy shipped under
catalog/model_configs/, read by advisor.catalog.hf_config (the same reader as --model-config),
with its name and source from catalog/model_configs/sources.json. tests/test_hf_config.py fails
when the written presets and the configs disagree.

Run:  PYTHONPATH=. .venv/bin/python scripts/presets_from_configs.py
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from advisor.catalog.hf_config import preset_from_config

CATALOG = Path(__file__).resolve().parent.parent / "catalog"
CONFIGS = CATALOG / "model_configs"


def presets() -> list[dict[str, object]]:
    sources = json.loads((CONFIGS / "sources.json").read_text())["configs"]
    out = []
    for entry in sources:
        raw = json.loads((CONFIGS / f"{entry['id']}.json").read_text())
        preset = preset_from_config(raw, entry["id"], entry["name"], entry["source"])
        fields = preset.model_dump(exclude_defaults=True)
        fields["notes"] = entry["notes"]
        out.append(fields)
    return out


def main() -> None:
    header = (
        "# Written by scripts/presets_from_configs.py from catalog/model_configs/: do not edit by\n"
        "# hand (tests/test_hf_config.py holds the two together).\n"
    )
    body = yaml.safe_dump({"models": presets()}, sort_keys=False, width=100)
    (CATALOG / "models-from-configs.yaml").write_text(header + body)


if __name__ == "__main__":
    main()
