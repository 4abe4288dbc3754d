"""A dense model over nodes: TP inside each, PP across (advisor/perf/pipeline_serving.py)."""

from __future__ import annotations

import json

import pytest

from advisor.catalog.loading import load_catalog
from advisor.perf.pipeline_serving import PipelineServing
from advisor.perf.sizing import Shape

CAT = load_catalog()
H100 = CAT.accelerators["h100-sxm"]
L405 = Shape.of(CAT.models["llama-3.1-405b"])


def _pp() -> PipelineServing:
    return PipelineServing.build(L405, H100, (8, 900.0, 50.0), 2, (1000, 200), "bf16")


def test_one_sequence_reads_every_weight_once_by_hand() -> None:
    # One token passes both stages in turn: (405e9 - 2.101e9 embedding rows) x 2 bytes =
    # 807.8 GB over 8 x 3,350 GB/s x 0.8 = 21.44 TB/s: 37.68 ms, plus 126 layers x 60 us
    # = 7.56 ms: 45.2 ms; the all-reduces and the hop add a few ms, not 5.
    itl = _pp().itl_s(1)
    assert 0.0452 < itl < 0.0502


def test_hop_by_hand() -> None:
    # One sequence, 1000 in / 200 out: 6 tokens x 16,384 x 2 bytes = 196,608 bytes at
    # 50 x 43/50 = 43 GB/s = 4.57 us, plus 30 us.
    assert _pp().hop_s(1) == pytest.approx(196_608 / 43e9 + 30e-6)


def test_estimate_answers_a_dense_model_over_two_nodes() -> None:
    from tests.test_planning_questions import run

    got = run("estimate", "-w", "high_throughput_inference", "-m", "llama-3.1-405b", "-a",
              "h100-sxm", "-g", "16", "--json")  # fmt: skip
    assert got.returncode == 0, got.stderr  # 810 GB of BF16 weights: unfit in one node
    out = json.loads(got.stdout)
    layout = next(f for f in out["figures"] if f["name"] == "gpus_per_replica")
    assert layout["value"] == 16
    assert layout["formula"].startswith("2 nodes: TP 8 in each node x PP 2 across nodes")


def test_a_stage_holds_every_micro_batch() -> None:
    # Each stage keeps its layers' KV cache of every sequence in flight, PP micro-batches of
    # them: the largest micro-batch is a stage's sequences over the stages.
    pp = _pp()
    got = pp.best()
    assert got is not None
    assert got[0] == pp.stage.max_concurrency() // 2
