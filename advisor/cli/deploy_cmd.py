"""`advisor deploy kubernetes|slurm`: render what runs `advisor probe` where fleets run (YAML to
apply, an sbatch script, a Prolog), to stdout or --output."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Annotated, Literal

import typer
import yaml

from advisor.cli.common import emit_json, get_catalog
from advisor.deploy.kubernetes import manifests
from advisor.deploy.slurm import DEFAULT_TIME, prolog_script, sbatch_script
from advisor.deploy.spec import DeploySpec, build_spec
from advisor.errors import InputError
from advisor.outputs import check_output_path

app = typer.Typer(
    help="Render Kubernetes manifests or Slurm scripts that run advisor probe.",
    no_args_is_help=True,
)

Name = Annotated[str, typer.Option(help="Name of the Job / DaemonSet / sbatch job.")]
Nodes = Annotated[int, typer.Option(min=1, help="Nodes the cluster check runs on.")]
InstanceTypeOpt = Annotated[
    str | None,
    typer.Option(help="Catalog instance type: GPUs per node, node selector, --expect."),
]
GpusPerNode = Annotated[
    int | None, typer.Option(min=0, help="GPUs per node (default: the instance type's).")
]
Full = Annotated[bool, typer.Option("--full/--quick", help="Quick (default) or full probe.")]
Pairwise = Annotated[bool, typer.Option(help="Also test node pairs (needs --nodes 2+).")]
ReportToOpt = Annotated[str | None, typer.Option(help="Service URL the probes report to.")]
EnvOpt = Annotated[
    list[str] | None, typer.Option("--env", help="NAME=VALUE for every node (repeatable).")
]
Output = Annotated[Path | None, typer.Option(help="Write here instead of stdout.")]
JsonOpt = Annotated[bool, typer.Option("--json", "-j", help="Print JSON for tools.")]


def _spec(
    name: str,
    nodes: int,
    instance_type: str | None,
    gpus_per_node: int | None,
    full: bool,
    pairwise: bool,
    report_to: str | None,
    env: list[str] | None,
) -> DeploySpec:
    return build_spec(
        get_catalog(),
        name=name,
        nodes=nodes,
        instance_type=instance_type,
        gpus_per_node=gpus_per_node,
        mode="full" if full else "quick",
        pairwise=pairwise,
        report_to=report_to,
        env=env or [],
    )


def _write(text: str, output: Path | None) -> None:
    if output is None:
        typer.echo(text, nl=False)
        return
    check_output_path(output)
    output.write_text(text)
    typer.echo(f"wrote {output}", err=True)


@app.command()
def kubernetes(
    kind: Annotated[
        Literal["job", "daemonset"],
        typer.Option(help="job: cluster check (Indexed Job); daemonset: periodic node check."),
    ] = "job",
    image: Annotated[str, typer.Option(help="Container image with advisor and torch.")] = (
        "advisor:latest"
    ),
    namespace: Annotated[str, typer.Option(help="Namespace of the objects.")] = "default",
    node_selector: Annotated[
        list[str] | None,
        typer.Option(help="KEY=VALUE node label (repeatable; default: the instance type label)."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(envvar="ADVISOR_TOKEN", help="Token for --report-to, put in a Secret."),
    ] = None,
    name: Name = "advisor-probe",
    nodes: Nodes = 1,
    instance_type: InstanceTypeOpt = None,
    gpus_per_node: GpusPerNode = None,
    full: Full = False,
    pairwise: Pairwise = False,
    report_to: ReportToOpt = None,
    env: EnvOpt = None,
    output: Output = None,
    json_out: JsonOpt = False,
) -> None:
    """Manifests (YAML, or a JSON list with --json) for `kubectl apply -f -`."""
    spec = _spec(name, nodes, instance_type, gpus_per_node, full, pairwise, report_to, env)
    if kind == "daemonset" and nodes > 1:
        raise InputError("--nodes: a DaemonSet runs on every selected node; leave --nodes out")
    selector = _labels(node_selector or [])
    found = manifests(
        spec, kind=kind, image=image, namespace=namespace, node_selector=selector, token=token
    )
    if json_out:
        emit_json(found)
        return
    _write(yaml.safe_dump_all(found, sort_keys=False), output)


@app.command()
def slurm(
    prolog: Annotated[
        bool, typer.Option(help="Render the Prolog / HealthCheckProgram instead of sbatch.")
    ] = False,
    drain: Annotated[
        bool, typer.Option(help="With --prolog: the check drains a failing node with a reason.")
    ] = True,
    launcher: Annotated[
        str, typer.Option(help="How a node starts advisor (e.g. 'python3 -m advisor').")
    ] = "advisor",
    time_limit: Annotated[str, typer.Option(help="sbatch --time.")] = DEFAULT_TIME,
    partition: Annotated[str | None, typer.Option(help="sbatch --partition.")] = None,
    name: Name = "advisor-probe",
    nodes: Nodes = 1,
    instance_type: InstanceTypeOpt = None,
    gpus_per_node: GpusPerNode = None,
    full: Full = False,
    pairwise: Pairwise = False,
    report_to: ReportToOpt = None,
    env: EnvOpt = None,
    output: Output = None,
    json_out: JsonOpt = False,
) -> None:
    """An sbatch script (srun, then torchrun per node), or with --prolog the node check."""
    spec = _spec(name, nodes, instance_type, gpus_per_node, full, pairwise, report_to, env)
    words = shlex.split(launcher)
    if not words:
        raise InputError("--launcher must name a command (e.g. advisor)")
    if prolog:
        text = prolog_script(spec, launcher=words, drain=drain)
    else:
        text = sbatch_script(spec, launcher=words, time_limit=time_limit, partition=partition)
    if json_out:
        emit_json({"kind": "prolog" if prolog else "sbatch", "script": text})
        return
    _write(text, output)
    if output is not None:
        os.chmod(output, 0o755)


def _labels(pairs: list[str]) -> dict[str, str]:
    found = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(f"--node-selector {pair!r}: expected KEY=VALUE")
        found[key] = value
    return found
