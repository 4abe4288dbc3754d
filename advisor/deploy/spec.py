"""What a deployment of the probe needs, whichever engine runs it: the node shape (from the
catalog's instance type), the command each node runs, and where reports go. Pure."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from advisor.catalog import Catalog
from advisor.catalog.models import InstanceType
from advisor.did_you_mean import unknown
from advisor.errors import InputError

RDZV_PORT = 29500  # torchrun's default rendezvous port (torch.distributed.run --master-port)
# NCCL settings every rendered job carries: warnings in the log (NCCL's own default prints
# nothing), and torch's asynchronous error handling so that a hung collective ends the rank
# instead of the job's wall time (torch.distributed docs, TORCH_NCCL_ASYNC_ERROR_HANDLING).
DEFAULT_NCCL_ENV = {"NCCL_DEBUG": "WARN", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$")


@dataclass(frozen=True)
class DeploySpec:
    """One cluster check: `nodes` nodes of `gpus_per_node` GPUs of `instance_type`."""

    name: str
    nodes: int
    gpus_per_node: int
    instance_type: str | None = None
    mode: str = "quick"
    pairwise: bool = False
    report_to: str | None = None
    env: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_NCCL_ENV))

    def probe_args(self, rdzv: str | None, output: str) -> list[str]:
        """`advisor probe`'s arguments on one node (the launcher starts torchrun itself)."""
        args = ["advisor", "probe", "--json", "--output", output, f"--{self.mode}"]
        if self.instance_type is not None:
            args += ["--expect", self.instance_type]
        if self.nodes > 1:
            args += ["--nodes", str(self.nodes)]
        if rdzv is not None:
            args += ["--rdzv-endpoint", rdzv]
        if self.pairwise:
            args += ["--pairwise"]
        return args

    def report_args(self, url_ref: str) -> list[str]:
        return ["--report-to", url_ref] if self.report_to is not None else []


def build_spec(
    catalog: Catalog,
    *,
    name: str,
    nodes: int,
    instance_type: str | None,
    gpus_per_node: int | None,
    mode: str,
    pairwise: bool,
    report_to: str | None,
    env: list[str],
) -> DeploySpec:
    """The spec from the command's options; bad input names its flag."""
    if not _DNS_LABEL.match(name):
        raise InputError(
            f"--name {name!r} must be a DNS label: lower-case letters, digits and '-', at most "
            "42 characters (Kubernetes appends the pod index to it)"
        )
    if pairwise and nodes < 2:
        raise InputError("--pairwise needs --nodes 2 or more (it tests pairs of nodes)")
    instance = _instance(catalog, instance_type)
    gpus = gpus_per_node if gpus_per_node is not None else (instance.gpu_count if instance else 0)
    if instance is not None and gpus_per_node is not None and gpus_per_node != instance.gpu_count:
        raise InputError(
            f"--gpus-per-node {gpus_per_node} disagrees with {instance.id}, which has "
            f"{instance.gpu_count} GPUs: leave --gpus-per-node out"
        )
    merged = dict(DEFAULT_NCCL_ENV)
    merged.update(_parse_env(env))
    return DeploySpec(
        name=name,
        nodes=nodes,
        gpus_per_node=gpus,
        instance_type=instance.id if instance else None,
        mode=mode,
        pairwise=pairwise,
        report_to=report_to,
        env=merged,
    )


def _instance(catalog: Catalog, instance_type: str | None) -> InstanceType | None:
    if instance_type is None:
        return None
    found = catalog.instance_types.get(instance_type)
    if found is None:
        raise InputError(unknown("--instance-type", instance_type, list(catalog.instance_types)))
    return found


def _parse_env(pairs: list[str]) -> dict[str, str]:
    found = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not _ENV_NAME.match(key):
            raise InputError(f"--env {pair!r}: expected NAME=VALUE (e.g. NCCL_SOCKET_IFNAME=eth0)")
        found[key] = value
    return found


def shell_join(args: list[str]) -> str:
    """Arguments as one shell line; "$VAR" references stay expandable."""
    return " ".join(a if a.startswith('"$') else shlex.quote(a) for a in args)
