"""Speculative decoding (a draft model or MTP heads) as a change to the decode step.

Each step drafts d tokens per sequence, then one forward pass of the target model verifies them
(Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding"): the B
sequences' d + 1 positions go through the GEMMs (B (d + 1) tokens: the weights read once, the
FLOPs d + 1 times) and each position attends to its sequence's context. The verify pass is an
iteration of B decode tokens and B x d further tokens attending to the context like prompt
tokens do (InferenceModel.iteration's operands). On average `acceptance_length` tokens are
committed per sequence and step (between 1 and d + 1, the bonus token counted), so

    ITL = (verify pass + d x draft pass) / acceptance length,

the draft pass costing `draft_share` of a target decode step of the same batch (MTP: one extra
layer of the model's; a draft model: its size over the target's).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from advisor.errors import InputError
from advisor.perf.serving_sim import Distribution, LoadResult

# DeepSeek-V3 technical report (arXiv:2412.19437) section 5.4.3: with MTP predicting one extra
# token, the second token is accepted 85-90% of the time (1.8x tokens per second): one draft
# token, acceptance length 1 + 0.85, the low end.
DEFAULT_DRAFT_TOKENS = 1
DEFAULT_ACCEPTANCE_LENGTH = 1.85

# (decode tokens, further tokens attending like prompt tokens, their context) -> seconds
IterationTime = Callable[[int, float, int], float]
StepTime = Callable[[int, float], float]  # (decode sequences, prompt tokens) -> seconds


@dataclass(frozen=True, slots=True)
class Speculation:
    draft_tokens: int = DEFAULT_DRAFT_TOKENS
    acceptance_length: float = DEFAULT_ACCEPTANCE_LENGTH
    draft_share: float = 0.0  # a draft pass over a target decode step (MTP: one layer of L)

    def check(self) -> None:
        """Acceptance between 1 and d + 1 (InputError naming the field)."""
        if self.draft_tokens < 1:
            raise InputError("draft tokens must be at least 1", field="draft_tokens")
        if not 1 <= self.acceptance_length <= self.draft_tokens + 1:
            raise InputError(
                f"acceptance length {self.acceptance_length:g} must lie between 1 and the "
                f"draft tokens + 1 ({self.draft_tokens + 1})",
                field="acceptance_length",
            )
        if self.draft_share < 0:
            raise InputError("draft share must not be negative", field="draft_share")


def mtp_draft_share(layers: int) -> float:
    """An MTP head is one transformer block beside the model's `layers`."""
    return 1 / layers


def speculative_itl_s(
    iteration_s: IterationTime, batch: int, context: int, spec: Speculation
) -> float:
    """The mean time between a sequence's tokens with speculation (module doc)."""
    spec.check()
    step = verify_step(lambda d, p: iteration_s(d, p, context), spec)
    return step(batch, 0.0) / spec.acceptance_length


def speculation_for(
    draft_tokens: int | None, acceptance_length: float | None, layers: int
) -> Speculation | None:
    """The speculation a request asks for: MTP heads (one extra layer each pass) drafting
    `draft_tokens`; the acceptance length as given, else DEFAULT_ACCEPTANCE_LENGTH for one
    draft token (the only one with a published figure). None when none is asked; InputError
    naming the field when the pair does not make sense."""
    if draft_tokens is None:
        if acceptance_length is not None:
            raise InputError(
                "acceptance_length needs draft_tokens (the tokens drafted a step)",
                field="acceptance_length",
            )
        return None
    if acceptance_length is None:
        if draft_tokens != DEFAULT_DRAFT_TOKENS:
            raise InputError(
                f"{draft_tokens} draft tokens: give acceptance_length (a published acceptance "
                "is known for one MTP draft token only: 1.85, DeepSeek-V3)",
                field="acceptance_length",
            )
        acceptance_length = DEFAULT_ACCEPTANCE_LENGTH
    spec = Speculation(draft_tokens, acceptance_length, mtp_draft_share(layers))
    spec.check()
    return spec


def verify_step(step_s: StepTime, spec: Speculation) -> StepTime:
    """One speculative iteration for the load simulation: the verify pass over each sequence's
    d + 1 positions beside the prompt tokens, and the d draft passes."""

    def step(decode: int, prompt_tokens: float) -> float:
        d = spec.draft_tokens
        return step_s(decode, prompt_tokens + decode * d) + d * spec.draft_share * step_s(
            decode, 0.0
        )

    return step


def iterations_for(output_tokens: int, spec: Speculation) -> int:
    """Iterations a request of `output_tokens` takes: the first token from its prefill, then
    `acceptance_length` tokens an iteration on average."""
    return 1 + math.ceil((output_tokens - 1) / spec.acceptance_length)


def per_token(load: LoadResult, output_tokens: int, iterations: int) -> LoadResult:
    """A load simulated in iterations (each committing several tokens) read per token: token
    gaps scaled by (iterations - 1) / (tokens - 1), output throughput by tokens / iterations;
    TTFT, end-to-end times, rates and the batch are the same."""
    if output_tokens <= 1 or iterations == output_tokens:
        return load
    gap = (iterations - 1) / (output_tokens - 1)

    def scaled(d: Distribution) -> Distribution:
        return Distribution(d.p50_s * gap, d.p90_s * gap, d.p99_s * gap, d.mean_s * gap)

    return dataclasses.replace(
        load,
        itl=scaled(load.itl),
        tpot=scaled(load.tpot),
        throughput_tokens_s=load.throughput_tokens_s * output_tokens / iterations,
    )
