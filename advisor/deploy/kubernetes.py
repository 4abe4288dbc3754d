"""Kubernetes manifests that run `advisor probe`, as plain dictionaries (YAML to apply). Pure.

- a cluster check: an Indexed Job of one pod per node (required pod anti-affinity on the host
  name), whose pods find torchrun's rendezvous on pod 0 through a headless Service (an Indexed
  Job's pod N is `<job>-N.<service>`, Kubernetes docs "Indexed Job for Parallel Processing with
  Static Work Assignment" and "Job with Pod-to-Pod Communication"), with NCCL's environment, the
  GPU resource and a node selector;
- a periodic node check: a DaemonSet running the exporter mode (`advisor probe --serve-metrics`)
  that patches its node's condition, with the service account and the role that allows it;
- the ConfigMap (report URL) and Secret (token) both read.
"""

from __future__ import annotations

from typing import Any, Literal

from advisor.deploy.spec import RDZV_PORT, DeploySpec

Manifest = dict[str, Any]
Kind = Literal["job", "daemonset"]
GPU_RESOURCE = "nvidia.com/gpu"  # NVIDIA's device plugin
# The well-known label the cloud providers set to the node's instance type
# (kubernetes.io/docs/reference/labels-annotations-taints, node.kubernetes.io/instance-type).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
METRICS_PORT = 9400
NODE_CHECK_INTERVAL = "5m"
REPORT_PATH = "/tmp/advisor-probe.json"


def manifests(
    spec: DeploySpec,
    *,
    kind: Kind,
    image: str,
    namespace: str,
    node_selector: dict[str, str],
    token: str | None,
) -> list[Manifest]:
    """Every object to apply, in apply order (configuration before what reads it)."""
    selector = dict(node_selector)
    if spec.instance_type is not None and not selector:
        selector[INSTANCE_TYPE_LABEL] = spec.instance_type
    found = _configuration(spec, namespace, token)
    if kind == "job":
        job = _job(spec, image, namespace, selector, token is not None)
        found += [_headless_service(spec, namespace), job]
    else:
        node_check = _daemonset(spec, image, namespace, selector, token is not None)
        found += [*_rbac(spec, namespace), node_check]
    return found


def _meta(name: str, namespace: str | None, spec: DeploySpec) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"app.kubernetes.io/name": spec.name, "app.kubernetes.io/part-of": "advisor"},
    }
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _configuration(spec: DeploySpec, namespace: str, token: str | None) -> list[Manifest]:
    if spec.report_to is None:
        return []
    found: list[Manifest] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(f"{spec.name}-config", namespace, spec),
            "data": {"ADVISOR_REPORT_TO": spec.report_to},
        }
    ]
    if token is not None:
        found.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": _meta(f"{spec.name}-token", namespace, spec),
                "type": "Opaque",
                "stringData": {"ADVISOR_TOKEN": token},
            }
        )
    return found


def _env(spec: DeploySpec, token: bool) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in sorted(spec.env.items())]
    if spec.report_to is not None:
        ref = {"name": f"{spec.name}-config", "key": "ADVISOR_REPORT_TO"}
        env.append({"name": "ADVISOR_REPORT_TO", "valueFrom": {"configMapKeyRef": ref}})
        if token:
            ref = {"name": f"{spec.name}-token", "key": "ADVISOR_TOKEN"}
            env.append({"name": "ADVISOR_TOKEN", "valueFrom": {"secretKeyRef": ref}})
    return env


def _headless_service(spec: DeploySpec, namespace: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(spec.name, namespace, spec),
        "spec": {
            "clusterIP": "None",
            # pod 0's name resolves before it is ready: the rendezvous starts at once
            "publishNotReadyAddresses": True,
            "selector": {"job-name": spec.name},
            "ports": [{"name": "rendezvous", "port": RDZV_PORT, "targetPort": RDZV_PORT}],
        },
    }


def _shm() -> tuple[dict[str, Any], dict[str, Any]]:
    """NCCL moves data through /dev/shm between a node's ranks; a container's default is 64 MB."""
    volume = {"name": "dshm", "emptyDir": {"medium": "Memory"}}
    return volume, {"name": "dshm", "mountPath": "/dev/shm"}


def _job(
    spec: DeploySpec, image: str, namespace: str, selector: dict[str, str], token: bool
) -> Manifest:
    rdzv = f"{spec.name}-0.{spec.name}:{RDZV_PORT}" if spec.nodes > 1 else None
    args = spec.probe_args(rdzv, REPORT_PATH) + spec.report_args("$(ADVISOR_REPORT_TO)")
    volume, mount = _shm()
    container: dict[str, Any] = {
        "name": "probe",
        "image": image,
        "command": args[:1],
        "args": args[1:],
        "env": _env(spec, token),
        "ports": [{"name": "rendezvous", "containerPort": RDZV_PORT}],
        "volumeMounts": [mount],
    }
    if spec.gpus_per_node:
        count = str(spec.gpus_per_node)
        container["resources"] = {"limits": {GPU_RESOURCE: count}}
    one_per_node = {
        "labelSelector": {"matchLabels": {"job-name": spec.name}},
        "topologyKey": "kubernetes.io/hostname",
    }
    pod: dict[str, Any] = {
        "subdomain": spec.name,
        "restartPolicy": "Never",
        "affinity": {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [one_per_node]}
        },
        "containers": [container],
        "volumes": [volume],
    }
    if selector:
        pod["nodeSelector"] = selector
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(spec.name, namespace, spec),
        "spec": {
            "completionMode": "Indexed",
            "completions": spec.nodes,
            "parallelism": spec.nodes,
            "backoffLimit": 0,  # a failed node check is a finding, not something to retry
            "template": {"metadata": {"labels": {"job-name": spec.name}}, "spec": pod},
        },
    }


def _rbac(spec: DeploySpec, namespace: str) -> list[Manifest]:
    """The node check patches its own node's status (a condition): nothing more."""
    name = f"{spec.name}-node-check"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, namespace, spec)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(name, None, spec),
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(name, None, spec),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]


def _daemonset(
    spec: DeploySpec, image: str, namespace: str, selector: dict[str, str], token: bool
) -> Manifest:
    name = f"{spec.name}-node-check"
    args = ["advisor", "probe", "--health-check", "--serve-metrics", str(METRICS_PORT)]
    args += ["--interval", NODE_CHECK_INTERVAL, "--node-condition", "$(NODE_NAME)"]
    if spec.instance_type is not None:
        args += ["--expect", spec.instance_type]
    args += spec.report_args("$(ADVISOR_REPORT_TO)")
    node_name = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    # Every GPU of the node without taking them from the scheduler (as DCGM's exporter does):
    # the node check is light and runs beside the node's jobs.
    visible = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}
    container = {
        "name": "node-check",
        "image": image,
        "command": args[:1],
        "args": args[1:],
        "env": [node_name, visible, *_env(spec, token)],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT}],
        "readinessProbe": {"httpGet": {"path": "/metrics", "port": METRICS_PORT}},
    }
    pod: dict[str, Any] = {
        "serviceAccountName": name,
        "containers": [container],
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
    }
    if selector:
        pod["nodeSelector"] = selector
    labels = {"app.kubernetes.io/name": name}
    annotations = {"prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT)}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _meta(name, namespace, spec),
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod},
        },
    }
