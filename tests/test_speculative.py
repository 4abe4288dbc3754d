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


def test_a_request_asks_for_mtp() -> None:
    """One draft token takes the published acceptance, 1.85, and one layer of the model's
    drafting; more draft tokens need their acceptance given; an acceptance alone is refused."""
    from advisor.perf.speculative import speculation_for

    spec = speculation_for(1, None, 61)
    assert spec == Speculation(1, 1.85, 1 / 61)
    assert speculation_for(None, None, 61) is None
    for draft, accepted, field in (
        (2, None, "acceptance_length"),
        (None, 1.5, "acceptance_length"),
    ):
        with pytest.raises(InputError) as e:
            speculation_for(draft, accepted, 61)
        assert e.value.field == field


def test_iterations_and_the_load_read_per_token() -> None:
    """1,000 output tokens at 1.85 a step: the first from the prefill, 999 / 1.85 -> 540 more
    iterations. A gap of 20 ms an iteration is 20 x 540 / 999 = 10.81 ms a token; 541
    iterations' worth of throughput is 1,000 tokens'."""
    from advisor.perf.serving_sim import Distribution, LoadResult
    from advisor.perf.speculative import iterations_for, per_token

    spec = Speculation(1, 1.85)
    assert iterations_for(1000, spec) == 541
    d = Distribution(0.02, 0.02, 0.02, 0.02)
    load = LoadResult(d, d, d, d, 100, 10.0, 1.0, 1.0, 541.0, 1.0, False, 5.0)
    got = per_token(load, 1000, 541)
    assert got.tpot.p99_s == pytest.approx(0.02 * 540 / 999)
    assert got.itl.p50_s == pytest.approx(0.02 * 540 / 999)
    assert got.throughput_tokens_s == pytest.approx(1000.0)
    assert got.ttft == load.ttft and got.e2e == load.e2e


def test_the_model_takes_speculation_in_its_itl() -> None:
    """InferenceModel with MTP: (verify of B x 2 positions with B x 1.85 x I / O prompt tokens
    packed, plus 1/80 of a decode step) / 1.85, from the model's own iteration times; an
    acceptance of 1 (every draft rejected) is slower than no speculation."""
    preset, acc = CAT.models["llama-3.1-70b"], CAT.accelerators["h100-sxm"]
    shape = Shape.of(preset)

    def model(spec: Speculation | None) -> InferenceModel:
        dep = Deployment(acc, 4, 4, "bf16", acc.interconnect_gb_s, speculation=spec)
        return InferenceModel(shape, dep, 1000, 200)

    spec = Speculation(1, 1.85, 1 / 80)
    plain, mtp = model(None), model(spec)
    b = 8
    verify = plain.iteration_s(b, b * 1.85 * 1000 / 200 + b, 1000)
    draft = plain.iteration_s(b, 0, 1000) / 80
    assert mtp.itl_s(b) == pytest.approx((verify + draft) / 1.85)
    assert model(Speculation(1, 1.0, 1 / 80)).itl_s(b) > plain.itl_s(b)


def test_the_cli_serves_deepseek_v3_faster_with_mtp() -> None:
    import json

    from tests.test_planning_questions import run

    base = ["estimate", "-w", "low_latency_inference", "-m", "deepseek-v3", "-i",
            "p5en.48xlarge", "--precision", "fp8", "--json"]  # fmt: skip
    plain = json.loads(run(*base).stdout)
    mtp = json.loads(run(*base, "--draft-tokens", "1").stdout)
    assert mtp["itl_ms"] < plain["itl_ms"]
    refused = run(*base, "--acceptance-length", "1.8")
    assert refused.returncode == 2 and "acceptance" in refused.stderr
