"""What moving a job to another vendor's accelerator takes: a cheaper option off the job's own
software stack is offered with the port it needs, never as a plain swap. Pure.

The stacks are the vendors' own PyTorch routes as their documentation names them (AWS Neuron
SDK: torch-neuronx; AMD: PyTorch's ROCm build; Google Cloud TPU: PyTorch/XLA or JAX; Intel:
the CPU build, or Gaudi's software for Gaudi). A CPU (form factor cpu) needs no port, only the
CPU build, and a slower run.
"""

from __future__ import annotations

from advisor.catalog import Catalog

STACKS = {
    "nvidia": "CUDA",
    "aws": "the AWS Neuron SDK (torch-neuronx; models compiled for Neuron)",
    "amd": "ROCm (PyTorch's ROCm build; custom CUDA kernels need HIP ports)",
    "google": "PyTorch/XLA or JAX (models traced for XLA)",
    "intel": "Intel's stack (PyTorch's CPU build, or Gaudi's software for Gaudi)",
    "hailo": "Hailo's dataflow compiler (inference only, models compiled ahead)",
}


def porting_note(catalog: Catalog, current: str | None, suggested: str | None) -> str | None:
    """None when the suggested accelerator runs the current one's stack (same vendor), or when
    either is unknown; else what the move needs, in one clause."""
    cur = catalog.accelerators.get(current or "")
    new = catalog.accelerators.get(suggested or "")
    if cur is None or new is None or cur.vendor == new.vendor:
        return None
    if new.form_factor == "cpu":
        return "a CPU: the CPU build of the framework, no GPU code"
    stack = STACKS.get(new.vendor, f"{new.vendor}'s software stack")
    return f"not {STACKS.get(cur.vendor, cur.vendor)}: the job must be ported to {stack}"
