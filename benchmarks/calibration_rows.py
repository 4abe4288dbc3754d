"""The published calibration rows (tests/data/published.yaml and published-2.yaml) and the
shape of one comparison with the model, shared by the inference table (bench_calibration.py) and
the training table (calibration_training.py), so that neither imports the other's module."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DATA_DIR = Path(__file__).resolve().parent.parent / "tests" / "data"
DATA = DATA_DIR / "published.yaml"
DATA_FILES: tuple[Path, ...] = (DATA, DATA_DIR / "published-2.yaml")


def rows(kind: str) -> list[dict[str, Any]]:
    """The `kind` rows ("inference" or "training") of both calibration files, in file order."""
    out: list[dict[str, Any]] = []
    for path in DATA_FILES:
        out.extend(yaml.safe_load(path.read_text()).get(kind, []))
    return out


@dataclass(frozen=True)
class Comparison:
    row_id: str
    metric: str
    predicted: float
    published: float

    @property
    def ratio(self) -> float:
        return self.predicted / self.published


def summary_lines(comps: list[Comparison], ratio_digits: int) -> list[str]:
    """The one summary of a calibration table (inference and training rows): how many are
    within x1.5, the median error, and the worst row."""
    errors = [abs(c.ratio - 1) for c in comps]
    worst = max(comps, key=lambda c: max(c.ratio, 1 / c.ratio))
    return [
        f"rows compared: {len(comps)}; within x1.5: "
        f"{sum(1 for c in comps if 1 / 1.5 <= c.ratio <= 1.5)}",
        f"median error: {statistics.median(errors):.1%}",
        f"worst: {worst.row_id} {worst.metric} ratio {worst.ratio:.{ratio_digits}f}",
    ]
