"""Slurm scripts that run `advisor probe`: an sbatch script for a cluster check (one task per
node through `srun`; each task's probe starts torchrun for its node's GPUs and meets the others
at a rendezvous on the job's first node), and a Prolog / HealthCheckProgram for the level-1
node check. Pure: text out.

slurm.conf(5): a Prolog that exits non-zero drains its node and requeues the job; a
HealthCheckProgram's exit code is ignored, so the check drains the node itself (`--drain`:
`scontrol update NodeName=... State=DRAIN Reason=...`), as LBNL's NHC does.
"""

from __future__ import annotations

from advisor.deploy.spec import RDZV_PORT, DeploySpec, shell_join

DEFAULT_TIME = "00:30:00"


def sbatch_script(
    spec: DeploySpec, *, launcher: list[str], time_limit: str, partition: str | None
) -> str:
    """The batch script; `launcher` is how a node starts advisor (`advisor`, or `python3 -m
    advisor` where the console script is not on the PATH)."""
    lines = [
        "#!/bin/bash",
        f"# advisor probe on {spec.nodes} node(s)"
        + (f" of {spec.instance_type}" if spec.instance_type else "")
        + ": one task per node; rendered by `advisor deploy slurm`.",
        f"#SBATCH --job-name={spec.name}",
        f"#SBATCH --nodes={spec.nodes}",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --exclusive",
        f"#SBATCH --time={time_limit}",
        f"#SBATCH --output={spec.name}-%j.out",
    ]
    if spec.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={spec.gpus_per_node}")
    if partition is not None:
        lines.append(f"#SBATCH --partition={partition}")
    probe = spec.probe_args('"$MASTER_ADDR:$MASTER_PORT"' if spec.nodes > 1 else None, "OUT")
    probe = launcher + probe[1:]
    probe[probe.index("OUT")] = '"$ADVISOR_PROBE_DIR/probe-$SLURMD_NODENAME.json"'
    if spec.report_to is not None:
        probe += ["--report-to", spec.report_to]  # the token: ADVISOR_TOKEN in the environment
    lines += [
        "set -euo pipefail",
        'export ADVISOR_PROBE_DIR="${ADVISOR_PROBE_DIR:-$PWD/' + spec.name + '-$SLURM_JOB_ID}"',
        'mkdir -p "$ADVISOR_PROBE_DIR"',
        "# the rendezvous runs on the job's first node, at the address Slurm reaches it by",
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "MASTER_ADDR=$(scontrol show node \"$head\" | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p')",
        f'export MASTER_ADDR MASTER_PORT="${{ADVISOR_RDZV_PORT:-{RDZV_PORT}}}"',
    ]
    lines += [f"export {k}={_quote(v)}" for k, v in sorted(spec.env.items())]
    # each task's probe expands the node's name itself: single quotes keep it for the task
    task = shell_join(probe).replace("'", "'\\''")
    lines += [
        f"srun --nodes={spec.nodes} --ntasks-per-node=1 bash -c '{task}'",
        'echo "reports: $ADVISOR_PROBE_DIR"',
        "",
    ]
    return "\n".join(lines)


def prolog_script(spec: DeploySpec, *, launcher: list[str], drain: bool) -> str:
    """The level-1 node check as a Prolog or HealthCheckProgram: under 60 s, exit non-zero on a
    failed check (the Prolog's drain), and with `drain` the node drained with the reason."""
    args = [*launcher, "probe", "--health-check"]
    if spec.instance_type is not None:
        args += ["--expect", spec.instance_type]
    if drain:
        args += ["--drain"]
    if spec.report_to is not None:
        args += ["--report-to", spec.report_to]
    return "\n".join(
        [
            "#!/bin/bash",
            "# advisor's level-1 node check for slurm.conf's Prolog= or HealthCheckProgram=",
            "# (rendered by `advisor deploy slurm --prolog`): NVML inventory and health",
            "# counters and a short matmul and copy per GPU, within 60 s. Exit 0 healthy;",
            "# 1 a check failed (a Prolog's non-zero exit drains the node and requeues the job);",
            "# with --drain the check itself drains the node with the failing check as reason.",
            f"exec {shell_join(args)}",
            "",
        ]
    )


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"
