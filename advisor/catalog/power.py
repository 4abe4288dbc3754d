"""An instance's power: the one function every power figure comes from (the engine's
POWER_OVER_BUDGET check, the recommendation's `power_w` and its reasons). Edge devices are not
instances: their power is their power mode's (advisor/engine/candidates.py).

Three rules, in order:
1. the instance names a reference system (catalog/systems.yaml) whose vendor publishes the whole
   node's maximum power (DGX A100 6.5 kW, DGX H100/H200 10.2 kW): that figure, or the instance's
   share of it by GPU count;
2. a GPU instance without one: its GPUs' TDP plus the host's share, which is the share of the CPU
   sockets' TDP its vCPUs are (rule 3) plus a stated allowance for host memory;
3. a CPU-only instance: its share of the socket, vCPUs / threads per socket x the socket's TDP
   (by cores where the provider gives one vCPU per core).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from advisor.catalog.models import Accelerator, InstanceType, NodeSystem

# Host memory allowance for rule 2, watts per GiB of the instance's RAM. ESTIMATED: a DDR4/DDR5
# registered DIMM draws roughly 0.1 W per GB under load (a 64 GB RDIMM ~5-8 W); no vendor figure
# is read here. It stands for memory only: NICs, fans, storage and PSU losses are not counted,
# so rule 2 understates a node (rule 1's published figures include them).
HOST_MEMORY_W_PER_GIB = 0.1


# A NamedTuple, not a frozen dataclass: the engine imports it for every request, and a dataclass
# takes several times as long to make (its methods are compiled when the class is).
class NodePower(NamedTuple):
    """One instance's power, how it was reached, and whether any part of it is estimated."""

    watts: float
    basis: str  # a clause for the reasons: "the NVIDIA DGX H100's published maximum ..."
    estimated: bool


def instance_power(
    it: InstanceType,
    accelerators: Mapping[str, Accelerator],
    systems: Mapping[str, NodeSystem],
) -> NodePower:
    """The instance's power (see the module docstring for the rules)."""
    system = systems.get(it.system) if it.system else None
    if system is not None:
        return _system_share(it, system)
    cpu = accelerators.get(it.cpu) if it.cpu else None
    if it.accelerator is None:
        if cpu is None:  # the loader refuses this; guard for hand-built catalogs
            return NodePower(0.0, "no CPU class in the catalog", True)
        watts, words, estimated = cpu_share(it, cpu)
        return NodePower(watts, words, estimated)
    gpu = accelerators[it.accelerator]
    gpus_w = it.gpu_count * gpu.tdp_w
    gpu_words = f"{it.gpu_count} x {gpu.tdp_w:g} W GPU TDP"
    if cpu is None:
        return NodePower(gpus_w, f"{gpu_words} only (host not in the catalog)", True)
    host_cpu_w, cpu_words, _ = cpu_share(it, cpu)
    memory_w = it.memory_gib * HOST_MEMORY_W_PER_GIB
    words = (
        f"{gpu_words} + host {host_cpu_w:,.0f} W ({cpu_words}) + {memory_w:,.0f} W for "
        f"{it.memory_gib:g} GiB RAM at {HOST_MEMORY_W_PER_GIB:g} W/GiB (estimated)"
    )
    return NodePower(gpus_w + host_cpu_w + memory_w, words, True)


def cpu_share(it: InstanceType, cpu: Accelerator) -> tuple[float, str, bool]:
    """(watts, words, estimated): the share of the CPU sockets' TDP the instance's vCPUs are."""
    if it.vcpus_per_core is not None and cpu.socket_cores:
        cores = it.vcpus / it.vcpus_per_core
        share = cores / cpu.socket_cores
        words = f"{cores:g} cores / {cpu.socket_cores} per socket"
    elif cpu.socket_threads:
        share = it.vcpus / cpu.socket_threads
        words = f"{it.vcpus} vCPUs / {cpu.socket_threads} threads per socket"
    else:
        return cpu.tdp_w, f"a whole {cpu.tdp_w:g} W socket (threads per socket not stated)", True
    return share * cpu.tdp_w, f"{words} x {cpu.tdp_w:g} W, {cpu.name}", False


def _system_share(it: InstanceType, system: NodeSystem) -> NodePower:
    share = it.gpu_count / system.gpu_count if it.gpu_count else 1.0
    words = f"the {system.name}'s published maximum, {system.max_power_w:,.0f} W"
    if share < 1:
        words += f", x {it.gpu_count}/{system.gpu_count} GPUs"
    return NodePower(
        system.max_power_w * share, f"{words} (reference system: same GPU board)", False
    )
