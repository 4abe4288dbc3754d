"""Three answers worked out by hand, each of which a mutation of the code changes: the deadline
search's first step, the soft-preference penalty under the time-based objectives, and the
pipeline bubble. Each case changes a recommendation when wrong."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from advisor.engine.objective import objective_value
from advisor.perf.training import Layout, _bubble
from advisor.planning import training_plan


def fake_run_time(hours_at_one_node: float) -> Any:
    """Wall time that halves with every doubling of nodes: 100 h on one node, 50 h on two."""

    def run_time(job: object, cluster: object, layout: Layout, rented_gpus: int) -> Any:
        nodes = rented_gpus // 8
        return SimpleNamespace(hours=hours_at_one_node / nodes, layout=layout)

    return run_time


@pytest.mark.parametrize(
    ("case", "deadline_h", "nodes"),
    [
        ("met on one node", 100.0, 1),
        ("met first at two nodes (100/2 = 50)", 50.0, 2),
        ("met first at three (100/3 = 33.3)", 34.0, 3),
        ("met first at seven (100/7 = 14.3)", 14.5, 7),
        ("met only at the last (100/64 = 1.56)", 1.57, 64),
        ("never met", 1.0, None),
    ],
)
def test_the_deadline_search_finds_the_fewest_nodes(
    monkeypatch: pytest.MonkeyPatch, case: str, deadline_h: float, nodes: int | None
) -> None:
    monkeypatch.setattr(training_plan, "run_time", fake_run_time(100.0))
    cluster = SimpleNamespace(per_node=8)
    found, best = training_plan._search(None, cluster, Layout(8), 1, 64, deadline_h)  # type: ignore[arg-type]
    assert (found[0] if found else None) == nodes, case
    if found is None:
        assert best[0] == 64  # nothing met it: the fastest run, on the most nodes


@pytest.mark.parametrize(
    ("objective", "expected"),
    [
        # 10 $/h, 100 h to finish, a 10% soft-preference penalty
        ("cheapest", 10 * 1.1),
        ("cost_to_completion", 10 * 100 * 1.1),
        ("time", 100 * 1.1),
    ],
)
def test_the_penalty_applies_under_every_cost_objective(objective: str, expected: float) -> None:
    fit = SimpleNamespace(hours=100.0, served_tokens_per_s=None)
    value = objective_value(objective, 10.0, 500.0, 1.1, fit)  # type: ignore[arg-type]
    assert value == pytest.approx(expected)


@pytest.mark.parametrize(
    ("case", "layers", "pp", "micro", "bubble"),
    [
        ("no pipeline", 80, 1, 16, 0.0),
        # v = 80 // (4 x 2) = 10 virtual stages per GPU: (4 - 1) / (10 x 16)
        ("80 layers on 4 stages, 16 micro-batches", 80, 4, 16, 3 / 160),
        # v = 32 // (8 x 2) = 2: (8 - 1) / (2 x 4)
        ("32 layers on 8 stages, 4 micro-batches", 32, 8, 4, 7 / 8),
        # too few layers for interleaving: v = 1, (2 - 1) / 8
        ("2 layers on 2 stages", 2, 2, 8, 1 / 8),
    ],
)
def test_the_pipeline_bubble(case: str, layers: int, pp: int, micro: int, bubble: float) -> None:
    job = SimpleNamespace(shape=SimpleNamespace(layers=layers))
    assert _bubble(job, Layout(1, 1, pp), micro) == pytest.approx(bubble), case  # type: ignore[arg-type]
