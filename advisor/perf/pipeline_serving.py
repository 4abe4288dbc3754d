"""Serving a model too large for one node: tensor parallelism inside each node, pipeline
parallelism across nodes (vLLM's and TensorRT-LLM's multi-node layout for dense models).

Each of PP stages is one node of TP GPUs holding layers / PP of the layers and params / PP of
the weights: one stage is the inference model (perf/inference.py) of that slice on one node.
Decode runs PP micro-batches of b sequences in flight (vLLM's virtual engines), so every stage
is busy: a sequence's token passes the PP stages and PP - 1 network hops (each carrying the
micro-batch's activations, b (1 + I / O) tokens x hidden x 2 bytes, over one GPU's network
share), and the next micro-batch follows one stage behind:

    ITL = PP x (stage step of b + hop),  throughput = PP x b / ITL.
"""

from __future__ import annotations

import dataclasses

from advisor.catalog.models import Accelerator
from advisor.perf.inference import ACTIVATION_BYTES, Deployment, InferenceModel, moe_of
from advisor.perf.moe_serving import (
    A2A_LATENCY_S,
    DEFAULT_KV_CACHE,
    NETWORK_A2A_EFFICIENCY,
    KvCache,
)
from advisor.perf.sizing import Shape
from advisor.units import GB


def stage_shape(shape: Shape, stages: int) -> Shape:
    """One pipeline stage's slice: layers / PP of the layers and params / PP of the weights."""
    layers = shape.need_layers("pipeline parallelism")[0]
    return dataclasses.replace(
        shape,
        params=shape.params / stages,
        active_params=shape.active_params / stages,
        layers=-(-layers // stages),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class PipelineServing:
    """A deployment of `stages` nodes of `tp` GPUs serving I-token prompts, O-token outputs."""

    stage: InferenceModel
    stages: int
    hidden: int
    network_gb_s: float  # one GPU's share of the node's network, one way

    @classmethod
    def build(
        cls,
        shape: Shape,
        acc: Accelerator,
        node: tuple[int, float, float],
        stages: int,
        io_tokens: tuple[int, int],
        precision: str,
        cache: KvCache = DEFAULT_KV_CACHE,
    ) -> PipelineServing:
        """`node` is (GPUs per node, GPU link GB/s, network GB/s a GPU)."""
        tp, link_gb_s, network_gb_s = node
        dep = Deployment(
            acc,
            tp,
            tp,
            precision,
            link_gb_s,
            tp,
            kv_precision=cache.precision,
            prefix_cache_hit_rate=cache.prefix_hit_rate,
        )
        moe = moe_of(shape.experts, shape.experts_per_token)
        stage = InferenceModel(stage_shape(shape, stages), dep, *io_tokens, moe)
        hidden = shape.need_layers("pipeline parallelism")[1]
        return cls(stage, stages, hidden, network_gb_s)

    def hop_s(self, per_micro_batch: int) -> float:
        prompt = self.stage.inp / self.stage.out * self.stage.prefill_share  # computed tokens
        return self.hop_tokens_s(per_micro_batch * (1 + prompt))

    def hop_tokens_s(self, tokens: float) -> float:
        """One network hop between stages carrying `tokens` tokens' activations."""
        sent = tokens * self.hidden * ACTIVATION_BYTES
        return sent / (self.network_gb_s * NETWORK_A2A_EFFICIENCY * GB) + A2A_LATENCY_S

    def itl_s(self, per_micro_batch: int) -> float:
        return self.stages * (self.stage.itl_s(per_micro_batch) + self.hop_s(per_micro_batch))

    def tokens_per_gpu_s(self, per_micro_batch: int) -> float:
        gpus = self.stages * self.stage.dep.tensor_parallel
        return self.stages * per_micro_batch / self.itl_s(per_micro_batch) / gpus

    def best(self, max_itl_s: float | None = None) -> tuple[int, float] | None:
        """The most sequences per micro-batch that fit a stage's memory with the ITL within
        `max_itl_s` (bisection: the ITL grows with the batch), and that ITL; None if none. A
        stage holds the KV of its layers for every micro-batch in flight, PP of them."""
        top = self.stage.max_concurrency() // self.stages
        if top < 1 or (max_itl_s is not None and self.itl_s(1) > max_itl_s):
            return None
        lo, hi = 1, top
        while max_itl_s is not None and lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.itl_s(mid) <= max_itl_s else (lo, mid - 1)
        b = lo if max_itl_s is not None else top
        return b, self.itl_s(b)
