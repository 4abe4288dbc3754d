"""Speculative decoding's inter-token latency (advisor/perf/speculative.py)."""

from __future__ import annotations

import pytest

from advisor.catalog.loading import load_catalog
from advisor.errors import InputError
from advisor.perf.inference import Deployment, InferenceModel
from advisor.perf.sizing import Shape
from advisor.perf.speculative import Speculation, mtp_draft_share, speculative_itl_s

CAT = load_catalog()


def linear(decode: int, extra: float, context: int) -> float:
    return 0.010 + 0.001 * decode + 0.0005 * extra


def test_by_hand() -> None:
    # B = 4, d = 2: verify 0.010 + 0.004 + 0.0005 x 8 = 0.018; drafts 2 x 0.25 x (0.010 +
    # 0.004) = 0.007; over acceptance 2.5: 0.025 / 2.5 = 0.010 s.
    got = speculative_itl_s(linear, 4, 100, Speculation(2, 2.5, 0.25))
    assert got == pytest.approx(0.010)


def test_mtp_speeds_a_memory_bound_decode() -> None:
    # Llama 3.1 70B at batch 1 on 4 H100s reads 140 GB of weights a step: the verify pass of
    # 2 tokens costs about one step, so the default (1 draft, 1.85 accepted, one layer of 80
    # drafting) cuts the ITL by close to 1.85 and by no more than it.
    preset, acc = CAT.models["llama-3.1-70b"], CAT.accelerators["h100-sxm"]
    model = InferenceModel(
        Shape.of(preset), Deployment(acc, 4, 4, "bf16", acc.interconnect_gb_s), 1000, 200
    )
    plain = model.step_s(1)
    spec = Speculation(draft_share=mtp_draft_share(80))
    got = speculative_itl_s(model.iteration_s, 1, 1100, spec)
    assert plain / 1.85 < got < plain / 1.6


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (Speculation(0, 1.0), "draft_tokens"),
        (Speculation(1, 2.5), "acceptance_length"),
        (Speculation(1, 1.5, -0.1), "draft_share"),
    ],
)
def test_bad_speculation_names_the_field(spec: Speculation, field: str) -> None:
    with pytest.raises(InputError) as e:
        speculative_itl_s(linear, 1, 10, spec)
    assert e.value.field == field
