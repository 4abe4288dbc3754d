"""`advisor deploy kubernetes|slurm`: the manifests validate against the Kubernetes schemas
(kubernetes-validate's, strict: an unknown field fails) and say what a cluster check needs; the
scripts carry what Slurm runs. The real Slurm run is tests/test_slurm.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
# the oldest and newest releases kubernetes-validate ships schemas for that Indexed Jobs
# (GA in 1.24) and every field used here exist in
VERSIONS = ("1.27", "1.37")


def advisor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "advisor", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )


def rendered(*args: str) -> list[dict[str, Any]]:
    done = advisor("deploy", "kubernetes", *args)
    assert done.returncode == 0, done.stderr
    return list(yaml.safe_load_all(done.stdout))


def by_kind(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["kind"]: m for m in found}


@pytest.mark.parametrize("kind", ["job", "daemonset"])
def test_every_manifest_validates_strictly(kind: str) -> None:
    found = rendered(
        "--kind",
        kind,
        "--instance-type",
        "p5.48xlarge",
        "--report-to",
        "https://adv.example",
        "--token",
        "s3cret",
        *(["--nodes", "4", "--pairwise"] if kind == "job" else []),
    )
    for manifest in found:
        for version in VERSIONS:
            kubernetes_validate.validate(manifest, version, strict=True)


def test_the_validator_catches_a_misspelt_field() -> None:
    """The check above can fail: a field the schema does not have is refused."""
    job = by_kind(rendered("--nodes", "2"))["Job"]
    job["spec"]["completionz"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, VERSIONS[-1], strict=True)


def test_the_cluster_job_is_indexed_one_pod_per_node_with_a_rendezvous() -> None:
    found = by_kind(
        rendered("--nodes", "4", "--instance-type", "p5.48xlarge", "--env", "NCCL_IB_HCA=mlx5")
    )
    assert set(found) == {"Service", "Job"}  # no report URL: no ConfigMap nor Secret
    service, job = found["Service"], found["Job"]
    assert service["spec"]["clusterIP"] == "None"  # headless: a DNS name per pod
    assert service["spec"]["selector"] == {"job-name": "advisor-probe"}
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 4, 4)
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"]
    rule = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert rule["topologyKey"] == "kubernetes.io/hostname"  # never two pods on one node
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    container = pod["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}  # p5.48xlarge: 8 H100
    args = container["args"]
    # pod 0 of an Indexed Job is <job>-0, and <host>.<subdomain> resolves through the Service
    assert args[args.index("--rdzv-endpoint") + 1] == "advisor-probe-0.advisor-probe:29500"
    assert args[args.index("--nodes") + 1] == "4"
    assert args[args.index("--expect") + 1] == "p5.48xlarge"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NCCL_IB_HCA"] == "mlx5" and env["NCCL_DEBUG"] == "WARN"
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]


def test_the_report_url_and_token_come_from_a_configmap_and_a_secret() -> None:
    found = by_kind(rendered("--report-to", "https://adv.example", "--token", "s3cret"))
    assert found["ConfigMap"]["data"] == {"ADVISOR_REPORT_TO": "https://adv.example"}
    assert found["Secret"]["stringData"] == {"ADVISOR_TOKEN": "s3cret"}
    container = found["Job"]["spec"]["template"]["spec"]["containers"][0]
    refs = {e["name"]: e.get("valueFrom") for e in container["env"]}
    assert refs["ADVISOR_TOKEN"] == {
        "secretKeyRef": {"name": "advisor-probe-token", "key": "ADVISOR_TOKEN"}
    }
    assert "s3cret" not in json.dumps(found["Job"])  # the token only in the Secret
    # Kubernetes expands $(VAR) in args from the container's environment
    assert container["args"][-2:] == ["--report-to", "$(ADVISOR_REPORT_TO)"]


def test_the_daemonset_runs_the_exporter_and_may_patch_its_node() -> None:
    found = by_kind(rendered("--kind", "daemonset", "--instance-type", "p5.48xlarge"))
    assert set(found) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"}
    pod = found["DaemonSet"]["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert args[:4] == ["probe", "--health-check", "--serve-metrics", "9400"]
    assert args[args.index("--node-condition") + 1] == "$(NODE_NAME)"
    assert pod["serviceAccountName"] == found["ServiceAccount"]["metadata"]["name"]
    rules = found["ClusterRole"]["rules"]
    assert {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]} in rules
    assert "resources" not in pod["containers"][0]  # takes no GPU from the node's jobs


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--instance-type", "p5.48xlargee"], "p5.48xlarge"),  # did you mean
        (["--name", "Bad_Name"], "--name"),
        (["--env", "NO_EQUALS"], "--env"),
        (["--pairwise"], "--pairwise"),
        (["--instance-type", "p5.48xlarge", "--gpus-per-node", "4"], "--gpus-per-node"),
        (["--kind", "daemonset", "--nodes", "3"], "--nodes"),
        (["--node-selector", "novalue"], "--node-selector"),
    ],
)
def test_bad_input_exits_2_naming_the_flag(args: list[str], flag: str) -> None:
    done = advisor("deploy", "kubernetes", *args)
    assert done.returncode == 2
    assert flag in done.stderr


def test_the_sbatch_script_runs_one_probe_per_node() -> None:
    done = advisor(
        "deploy",
        "slurm",
        "--nodes",
        "16",
        "--instance-type",
        "p5.48xlarge",
        "--report-to",
        "https://adv.example",
        "--partition",
        "gpu",
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for line in (
        "#SBATCH --nodes=16",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --partition=gpu",
    ):
        assert line in text.splitlines()
    srun = next(line for line in text.splitlines() if line.startswith("srun "))
    assert '--nodes 16 --rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT"' in srun
    assert "--expect p5.48xlarge" in srun and "--report-to https://adv.example" in srun
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_the_prolog_runs_the_health_check_and_drains() -> None:
    done = advisor("deploy", "slurm", "--prolog", "--instance-type", "p5.48xlarge")
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last == "exec advisor probe --health-check --expect p5.48xlarge --drain"
    done = advisor("deploy", "slurm", "--prolog", "--no-drain", "--json")
    assert json.loads(done.stdout)["script"].strip().endswith("advisor probe --health-check")
