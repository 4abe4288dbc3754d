"""Where a node's health is acted on: the Kubernetes node condition (through the `kubernetes`
client, imported only here and only when used) and Slurm's drain (`scontrol`). Their failures
become ActionFailed, naming what could not be done."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import socket
import subprocess
from typing import Any

from advisor.deploy.verdicts import CONDITION_TYPE, NodeHealth, node_condition
from advisor.errors import AdvisorError

STRATEGIC_MERGE = "application/strategic-merge-patch+json"  # conditions merge by their type
SCONTROL_TIMEOUT_S = 20.0


class ActionFailed(AdvisorError):
    """The node's health could not be acted on (the API server refused, scontrol failed)."""


def kubernetes_api(host: str | None = None) -> Any:
    """A CoreV1Api: in a pod its service account's, else the kubeconfig's (`host`: that URL,
    unauthenticated, for a local API server)."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise ActionFailed(
            "--node-condition needs the kubernetes client: pip install 'advisor[kubernetes]'"
        ) from None
    if host is not None:
        conf = client.Configuration()
        conf.host = host
        return client.CoreV1Api(client.ApiClient(conf))
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        try:
            config.load_kube_config()  # type: ignore[no-untyped-call]
        except (config.ConfigException, OSError) as exc:
            raise ActionFailed(
                f"no Kubernetes credentials (in-cluster or kubeconfig): {exc}"
            ) from None
    return client.CoreV1Api()


def set_node_condition(api: Any, node: str, health: NodeHealth, now: dt.datetime) -> dict[str, str]:
    """Patches `node`'s AdvisorGPUProblem condition (a strategic merge: other conditions stay);
    returns the condition written."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        current = api.read_node_status(node)
        previous = next(
            (c.to_dict() for c in (current.status.conditions or []) if c.type == CONDITION_TYPE),
            None,
        )
        if previous is not None and previous.get("last_transition_time") is not None:
            stamp = previous["last_transition_time"]
            previous = {
                "status": previous["status"],
                "lastTransitionTime": stamp.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        condition = node_condition(health, now, previous)
        body = {"status": {"conditions": [condition]}}
        api.patch_node_status(node, body, _content_type=STRATEGIC_MERGE)
    except ApiException as exc:
        raise ActionFailed(
            f"--node-condition {node}: the API server answered {exc.status} {exc.reason}"
        ) from None
    except HTTPError as exc:
        raise ActionFailed(f"--node-condition {node}: cannot reach the API server: {exc}") from None
    return condition


def slurm_node_name() -> str:
    """The Slurm node this runs on: SLURMD_NODENAME (set in a Prolog and under srun), else the
    short host name (HealthCheckProgram's environment has no node name)."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def drain_slurm_node(node: str, health: NodeHealth) -> str:
    """`scontrol update NodeName=... State=DRAIN Reason=...`; returns the reason given."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        raise ActionFailed("--drain: scontrol is not on the PATH (is this a Slurm node?)")
    reason = health.drain_reason()
    command = [scontrol, "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise ActionFailed(
            f"--drain: scontrol did not answer in {SCONTROL_TIMEOUT_S:g} s"
        ) from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise ActionFailed(
            f"--drain {node}: scontrol failed: {said[-1] if said else done.returncode}"
        )
    return reason
