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

from collections.abc import Callable
from dataclasses import dataclass

from advisor.errors import InputError

# DeepSeek-V3 technical report (arXiv:2412.19437) section 5.4.3: with MTP predicting one extra
# token, the second token is accepted 85-90% of the time (1.8x tokens per second): one draft
# token, acceptance length 1 + 0.85, the low end.
DEFAULT_DRAFT_TOKENS = 1
DEFAULT_ACCEPTANCE_LENGTH = 1.85

# (decode tokens, further tokens attending like prompt tokens, their context) -> seconds
IterationTime = Callable[[int, float, int], float]


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
    d = spec.draft_tokens
    verify = iteration_s(batch, batch * d, context)
    draft = d * spec.draft_share * iteration_s(batch, 0, context)
    return (verify + draft) / spec.acceptance_length
