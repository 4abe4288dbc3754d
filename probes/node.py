"""The node probe's launcher: one rank per GPU under torchrun, or a world of one in this process.

It never imports torch itself: it counts GPUs through NVML, starts `torchrun ... -m probes.worker`
in a process group of its own, relays the ranks' progress, waits a bounded time, and reads what
each rank wrote (probes/worker.py). A rank that died or hung is named with the phase it reached
and, where torchrun reports it, its exit code.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from probes.environment import HIDING_VALUES
from probes.errors import EnvironmentProblem
from probes.nvml import Nvml
from probes.report import RankFailure
from probes.worker import WORLD_FILE, RankOptions, RankResult, run_rank

Progress = Callable[[str], None]
KILL_GRACE_S = 5.0


class UsageProblem(ValueError):
    """A combination of options the node probe cannot run (the CLI's exit 2)."""


@dataclass(frozen=True)
class NodePlan:
    """Who runs where: the GPUs of this node (CUDA indices) and how many nodes take part."""

    gpus: tuple[int, ...]  # () on a machine without a usable GPU: one CPU rank
    nodes: int = 1
    rdzv_endpoint: str | None = None  # host:port of the rendezvous, with several nodes
    rdzv_id: str = "advisor-probe"
    cpu_ranks: int = 1  # ranks per node without a GPU (several: the CPU stand-in for a GPU node)

    @property
    def local_ranks(self) -> int:
        return len(self.gpus) or self.cpu_ranks

    @property
    def world_size(self) -> int:
        return self.nodes * self.local_ranks


@dataclass
class NodeRun:
    ranks: list[RankResult]  # this node's ranks that wrote a result, by rank
    failures: list[RankFailure] = field(default_factory=list)
    world: list[RankResult] = field(default_factory=list)  # every node's (node rank 0)
    launcher: Literal["inline", "torchrun"] = "inline"
    duration_s: float = 0.0

    @property
    def watchdog_tripped(self) -> bool:
        return any(r.watchdog_tripped for r in self.ranks)


def plan_node(
    nvml: Nvml,
    environ: dict[str, str],
    device: int | None,
    nodes: int = 1,
    rdzv_endpoint: str | None = None,
) -> NodePlan:
    """Every GPU CUDA will see (--device N: that one); several nodes need a rendezvous."""
    if nodes < 1:
        raise UsageProblem("--nodes must be at least 1")
    endpoint = rdzv_endpoint or _endpoint_from(environ)
    if nodes > 1 and endpoint is None:
        raise UsageProblem(
            f"--nodes {nodes} needs a rendezvous: give --rdzv-endpoint HOST:PORT (the same on "
            "every node) or set MASTER_ADDR (and MASTER_PORT)"
        )
    if device is not None:
        return NodePlan((device,), nodes, endpoint)
    return NodePlan(tuple(range(visible_gpus(nvml, environ))), nodes, endpoint)


def _endpoint_from(environ: dict[str, str]) -> str | None:
    addr = environ.get("MASTER_ADDR")
    return f"{addr}:{environ.get('MASTER_PORT', '29500')}" if addr else None


def visible_gpus(nvml: Nvml, environ: dict[str, str]) -> int:
    """How many GPUs CUDA will number: NVML's count, narrowed by CUDA_VISIBLE_DEVICES."""
    cvd = environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None and cvd.strip().lower() in HIDING_VALUES:
        return 0
    try:
        count = nvml.device_count()
    except EnvironmentProblem:
        return 0
    if cvd is None:
        return count
    # CUDA stops at the first entry it cannot resolve; indices past the count are such entries.
    listed = 0
    for raw in cvd.split(","):
        entry = raw.strip()
        if entry.isdigit() and int(entry) >= count:
            break
        listed += 1
    return min(listed, count)


def probe_node(
    plan: NodePlan,
    opts: RankOptions,
    *,
    progress: Progress | None = None,
    deadline_s: float | None = None,
    python: str = sys.executable,
    environ: dict[str, str] | None = None,
    inline: Callable[[RankOptions], RankResult] | None = None,
) -> NodeRun:
    """Runs every rank of this node and collects their results. A world of one runs in this
    process (`inline` replaces it in tests); several ranks run under torchrun."""
    say = progress or (lambda _m: None)
    started = time.perf_counter()
    if plan.world_size == 1:
        result = (inline or (lambda o: run_rank(o, progress=say)))(opts)
        return NodeRun([result], duration_s=time.perf_counter() - started)
    out = opts.out
    out.mkdir(parents=True, exist_ok=True)
    command = torchrun_command(plan, opts, python)
    env = dict(os.environ if environ is None else environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    limit = deadline_s if deadline_s is not None else opts.timeout_s * 3 + (opts.burn_s or 0)
    say(f"starting {plan.local_ranks} rank(s) under torchrun ({plan.world_size} in all)")
    code, tail = _run(command, env, limit, say)
    return collect(out, plan, code, tail, time.perf_counter() - started)


def torchrun_command(plan: NodePlan, opts: RankOptions, python: str) -> list[str]:
    cmd = [python, "-m", "torch.distributed.run", "--nproc-per-node", str(plan.local_ranks)]
    if plan.nodes == 1:
        cmd += ["--standalone"]
    else:
        assert plan.rdzv_endpoint is not None
        cmd += [
            "--nnodes",
            str(plan.nodes),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            plan.rdzv_endpoint,
            "--rdzv-id",
            plan.rdzv_id,
        ]
    cmd += ["--max-restarts", "0", "-m", "probes.worker", "--out", str(opts.out)]
    cmd += ["--mode", opts.mode, "--timeout-s", f"{opts.timeout_s:g}"]
    cmd += ["--lock-wait-s", f"{opts.lock_wait_s:g}"]
    if plan.gpus:
        cmd += ["--gpus", ",".join(str(g) for g in plan.gpus)]
    if not opts.nccl:
        cmd += ["--no-nccl"]
    if opts.pairwise:
        cmd += ["--pairwise", "--pairwise-rounds", str(opts.pairwise_rounds)]
    if opts.only is not None:
        cmd += ["--only", ",".join(sorted(opts.only))]
    if opts.burn_s:
        cmd += ["--burn-s", f"{opts.burn_s:g}"]
    for size in opts.extra_sizes:
        cmd += ["--extra-size", str(size)]
    return cmd


_RANK_LINE = re.compile(r"^\[rank (\d+)\] (.*)$")


def _run(
    command: list[str], env: dict[str, str], limit_s: float, say: Progress
) -> tuple[int | None, list[str]]:
    """torchrun in a session of its own: its output relayed as progress, stopped at the limit.
    Returns its exit code (None: stopped at the limit) and the last lines it printed."""
    tail: deque[str] = deque(maxlen=400)
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
        errors="replace",
        start_new_session=True,
    )

    def relay() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            tail.append(line)
            match = _RANK_LINE.match(line)
            if match:
                say(f"rank {match.group(1)}: {match.group(2)}")

    reader = threading.Thread(target=relay, name="torchrun-output", daemon=True)
    reader.start()
    try:
        code: int | None = proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        say(f"the ranks did not finish within {limit_s:g} s: stopping them")
        _stop(proc)
        code = None
    except KeyboardInterrupt:
        _stop(proc)
        raise
    reader.join(timeout=2)
    return code, list(tail)


def _stop(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def collect(
    out: Path, plan: NodePlan, code: int | None, tail: list[str], duration_s: float
) -> NodeRun:
    """This node's rank files; every local rank that did not finish becomes a RankFailure."""
    results = []
    for path in sorted(out.glob("rank-*.json")):
        with contextlib.suppress(ValueError, OSError):
            results.append(RankResult.model_validate_json(path.read_text()))
    results.sort(key=lambda r: r.rank)
    exits = torchrun_failures(tail)
    failures = []
    for r in results:
        if r.phase != "done":
            failures.append(_failure(r, exits.get(r.rank), code))
    node_rank = results[0].node_rank if results else 0
    seen = {r.rank for r in results}
    for local in range(plan.local_ranks):
        rank = node_rank * plan.local_ranks + local
        if rank not in seen:
            gpu = plan.gpus[local] if plan.gpus else None
            exit_code = exits.get(rank, {}).get("exitcode")
            failures.append(
                RankFailure(
                    rank=rank,
                    gpu=gpu,
                    host=exits.get(rank, {}).get("host"),
                    exit_code=_int(exit_code),
                    detail=_why_missing(code, exit_code),
                )
            )
    world = []
    world_file = out / WORLD_FILE
    if world_file.exists():
        with contextlib.suppress(ValueError, OSError):
            world = [RankResult.model_validate(r) for r in json.loads(world_file.read_text())]
    return NodeRun(results, failures, world, "torchrun", duration_s)


def _failure(r: RankResult, exit_info: dict[str, str] | None, code: int | None) -> RankFailure:
    exit_code = (exit_info or {}).get("exitcode")
    parts = []
    if r.phase != "done":
        parts.append(f"stopped after its '{r.phase}' phase")
        if code is None:
            parts.append("the ranks were stopped at the time limit")
        elif exit_code is not None:
            parts.append(f"exit code {exit_code}")
    parts += r.errors
    return RankFailure(
        rank=r.rank,
        host=r.host,
        gpu=r.gpu,
        phase=r.phase,
        exit_code=_int(exit_code),
        detail="; ".join(parts),
    )


def _why_missing(code: int | None, exit_code: str | None) -> str:
    if exit_code is not None:
        return f"wrote no result: it ended with exit code {exit_code} before its first phase"
    if code is None:
        return "wrote no result before the ranks were stopped at the time limit"
    return f"wrote no result (torchrun exited {code})"


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


_FAILURE_FIELD = re.compile(r"^\s*(rank|exitcode|host)\s*:\s*(.+?)\s*$")
_FAILURE_BLOCK = re.compile(r"^\s*\[\d+\]:\s*$")


def torchrun_failures(lines: list[str]) -> dict[int, dict[str, str]]:
    """Rank -> {exitcode, host} from torchrun's ChildFailedError summary: blocks that start with
    "[0]:" and hold "host : node-1", "rank : 1 (local_rank: 1)", "exitcode : -9 (pid: 123)"."""
    blocks: list[dict[str, str]] = []
    for line in lines:
        if _FAILURE_BLOCK.match(line):
            blocks.append({})
            continue
        match = _FAILURE_FIELD.match(line)
        if match and blocks:
            blocks[-1].setdefault(match.group(1), match.group(2))
    found: dict[int, dict[str, str]] = {}
    for block in blocks:
        rank = re.match(r"-?\d+", block.get("rank", ""))
        if rank is None:
            continue
        info = {"host": block["host"]} if "host" in block else {}
        code = re.match(r"-?\d+", block.get("exitcode", ""))
        if code is not None:
            info["exitcode"] = code.group()
        found[int(rank.group())] = info
    return found
