"""The one memory-headroom rule, apart from the sizing model (advisor/perf/sizing.py): the engine
places every request by it, and needs none of the model's figures and shapes for a request
without one."""

from __future__ import annotations

import math

# The one memory-headroom rule: of each GPU's memory, this fraction holds the work (weights, KV
# cache, training states, activations); the rest is the CUDA context, workspace and allocator
# fragmentation. ESTIMATED (the CUDA context alone is 0.3-1 GB; PyTorch's caching allocator
# fragments a few per cent); every comparison of a need with a GPU's capacity reads it through
# usable_memory_gb. A CPU node's RAM is held to the same share (the OS, the runtime and the page
# cache take the rest; advisor/engine/placement.py), so a stated need never fills a node.
USABLE_MEMORY = 0.90


def usable_memory_gb(gpu_memory_gb: float) -> float:
    """What of one GPU's memory the work may use (USABLE_MEMORY): the one headroom rule for
    placement by memory, sizing from a model or a bare size, training, serving and the review
    alike."""
    return gpu_memory_gb * USABLE_MEMORY


def gpu_memory_for_gb(work_gb: float) -> float:
    """The GPU memory whose usable share (usable_memory_gb) holds `work_gb`: the same rule read
    the other way, for a replacement GPU that must hold an observed peak."""
    return work_gb / USABLE_MEMORY


def min_gpus_for(need_gb: float, gpu_memory_gb: float) -> int:
    """GPUs of `gpu_memory_gb` each that hold `need_gb` within their usable memory."""
    if need_gb <= 0:
        return 1
    return max(1, math.ceil(need_gb / usable_memory_gb(gpu_memory_gb) - 1e-9))
