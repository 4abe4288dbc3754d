"""The node probe's launcher and ranks on CPUs: several local processes under torchrun with gloo
standing in for NCCL (the same code a GPU node runs), ranks that die or hang, and the pieces the
launcher reads (torchrun's failure summary, CUDA_VISIBLE_DEVICES)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from advisor.perf.calibration import NETWORK_CHECK
from probes.node import (
    NodePlan,
    UsageProblem,
    plan_node,
    probe_node,
    torchrun_failures,
    visible_gpus,
)
from probes.nvml import Nvml
from probes.report import ProbeReport
from probes.worker import RankOptions, result_path
from tests.fake_nvml import FakeNvmlLib, h200

FAULTS = Path(__file__).parent / "rank_faults"

# torchrun's ChildFailedError summary as torch 2.x prints it (torch/distributed/elastic/multiprocessing/errors)
SUMMARY = """
============================================================
probes.worker FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_22:30:01
  host      : gpu-node-7
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 4242)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4242
============================================================
"""


def test_torchrun_failures_name_the_rank_its_host_and_exit_code() -> None:
    assert torchrun_failures(SUMMARY.splitlines()) == {1: {"host": "gpu-node-7", "exitcode": "-9"}}
    assert torchrun_failures(["rank : 3", "exitcode : 1"]) == {}  # fields outside a block


def eight_gpus() -> Nvml:
    return Nvml(FakeNvmlLib(devices=[h200(uuid=f"GPU-{i}") for i in range(8)]))


@pytest.mark.parametrize(
    ("case", "cvd", "expected"),
    [
        ("unset: every GPU", None, 8),
        ("two listed", "0,3", 2),
        ("hidden", "", 0),
        ("-1 hides every GPU", "-1", 0),
        ("CUDA stops at the first index it cannot resolve", "1,9,2", 1),
        ("UUIDs count as listed", "GPU-1,GPU-2,GPU-3", 3),
    ],
)
def test_visible_gpus(case: str, cvd: str | None, expected: int) -> None:
    environ = {} if cvd is None else {"CUDA_VISIBLE_DEVICES": cvd}
    assert visible_gpus(eight_gpus(), environ) == expected, case


def test_plan_covers_every_gpu_unless_one_is_named() -> None:
    assert plan_node(eight_gpus(), {}, None).gpus == tuple(range(8))
    assert plan_node(eight_gpus(), {}, 5).gpus == (5,)
    assert plan_node(eight_gpus(), {}, None).world_size == 8


def test_several_nodes_need_a_rendezvous() -> None:
    with pytest.raises(UsageProblem, match="--rdzv-endpoint HOST:PORT"):
        plan_node(eight_gpus(), {}, None, nodes=2)
    plan = plan_node(eight_gpus(), {"MASTER_ADDR": "10.0.0.1"}, None, nodes=2)
    assert plan.rdzv_endpoint == "10.0.0.1:29500" and plan.world_size == 16


def run_cpu_ranks(tmp_path: Path, ranks: int, fault: str | None = None, **kw: float) -> object:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(FAULTS), env.get("PYTHONPATH", "")])
    if fault:
        env["ADVISOR_TEST_FAULT"] = fault
    opts = RankOptions(out=tmp_path / "ranks", timeout_s=kw.get("timeout_s", 60))
    plan = NodePlan(gpus=(), cpu_ranks=ranks)
    return probe_node(plan, opts, environ=env, deadline_s=kw.get("deadline_s", 120))


def test_three_cpu_ranks_measure_collectives_together(tmp_path: Path) -> None:
    run = run_cpu_ranks(tmp_path, 3)
    assert run.launcher == "torchrun" and run.failures == []
    assert [r.rank for r in run.ranks] == [0, 1, 2]
    assert {r.phase for r in run.ranks} == {"done"} and {r.backend for r in run.ranks} == {"gloo"}
    lead = run.ranks[0]
    names = [m.name for m in lead.collectives]
    assert names == [
        f"{op}_{size}"
        for op in ("all_reduce", "all_gather", "reduce_scatter")
        for size in ("1M", "16M")
    ]
    for m in lead.collectives:
        assert m.error is None and m.value is not None and m.value > 0
        assert m.params["ranks"] == 3
        # busbw = algbw x 2(n-1)/n for all-reduce, x (n-1)/n otherwise (nccl-tests)
        factor = 4 / 3 if m.params["op"] == "all_reduce" else 2 / 3
        assert m.params["bus_factor"] == pytest.approx(factor)
        assert m.median == pytest.approx(m.params["algbw_median"] * factor)
    # every rank agreed on the slowest rank's time: the same figures everywhere
    for r in run.ranks[1:]:
        assert [m.samples for m in r.collectives] == [m.samples for m in lead.collectives]
    # each rank measured its own CPU at the same time as the others
    assert all(r.measurements and r.pid != lead.pid for r in run.ranks[1:])


def test_a_rank_that_dies_is_named_and_the_others_report(tmp_path: Path) -> None:
    run = run_cpu_ranks(tmp_path, 2, fault="1:die", timeout_s=10)
    (dead,) = [f for f in run.failures if f.rank == 1]
    assert dead.phase == "measured" and dead.exit_code == -9, dead
    assert "exit code -9" in dead.detail
    # what rank 1 measured before it died is kept
    assert [r.rank for r in run.ranks] == [0, 1] and run.ranks[1].measurements


def test_a_rank_that_hangs_is_stopped_at_the_deadline_and_named(tmp_path: Path) -> None:
    run = run_cpu_ranks(tmp_path, 2, fault="1:hang", timeout_s=3, deadline_s=25)
    (hung,) = [f for f in run.failures if f.rank == 1]
    assert "time limit" in hung.detail
    (alive,) = run.ranks
    assert alive.rank == 0 and alive.measurements  # rank 0's own figures survive
    assert any("1" in e for e in alive.errors), alive.errors


def test_ranks_that_disagree_on_gpus_run_no_collectives_and_say_why(tmp_path: Path) -> None:
    """Rank 0 counts as having a GPU, rank 1 has none: NCCL between them is impossible, and a
    rank that went ahead alone would wait for the other until the timeout."""
    run = run_cpu_ranks(tmp_path, 2, fault="0:gpu", timeout_s=60)
    # no rank waited out the 60 s timeout: that would be a failure naming the time limit
    assert run.failures == [] and {r.phase for r in run.ranks} == {"done"}
    for r in run.ranks:
        assert r.collectives == []
        assert r.errors == ["collectives between GPUs not run: rank(s) [1] have no usable GPU"]


def test_rank_files_are_written_after_each_phase(tmp_path: Path) -> None:
    """A reader polling the folder sees rank 0's file at 'measured' before it is 'done'."""
    phases: list[str] = []
    out = tmp_path / "ranks"
    stop = threading.Event()

    def watch() -> None:
        from probes.worker import RankResult

        while not stop.is_set():
            path = result_path(out, 0)
            if path.exists():
                phase = RankResult.model_validate_json(path.read_text()).phase
                if not phases or phases[-1] != phase:
                    phases.append(phase)
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run_cpu_ranks(tmp_path, 2)
    finally:
        stop.set()
        watcher.join()
    assert phases[0] == "measured" and phases[-1] == "done", phases


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_two_node_ranks_over_a_localhost_rendezvous(tmp_path: Path) -> None:
    """`advisor probe --nodes 2` twice on this machine, gloo standing in for NCCL: the code a
    cluster runs. Node rank 0's report carries the cluster summary; the other judges the same
    cross-node figures itself, and both carry the network's vote against the plan."""
    endpoint = f"127.0.0.1:{free_port()}"
    cmd = [sys.executable, "-m", "advisor", "probe", "--nodes", "2", "--rdzv-endpoint", endpoint]
    cmd += ["--pairwise", "--json", "--rank-timeout-s", "60", "--expect", "p5en.48xlarge"]
    env = {**os.environ, "ADVISOR_PROBE_LOCK_DIR": str(tmp_path)}
    nodes = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=180) for p in nodes]
    reports = [ProbeReport.model_validate_json(out) for out, _ in outputs]
    assert [p.returncode for p in nodes] == [3, 3], [err[-2000:] for _, err in outputs]  # no GPU
    assert sorted(r.node_rank for r in reports) == [0, 1]
    assert {r.world_size for r in reports} == {2} and {r.backend for r in reports} == {"gloo"}
    lead = next(r for r in reports if r.node_rank == 0)
    other = next(r for r in reports if r.node_rank == 1)
    assert lead.cluster is not None and other.cluster is None
    assert [h.node_rank for h in lead.cluster.hosts] == [0, 1] and lead.cluster.world_size == 2
    names = {c.name for c in lead.cluster.checks}
    assert {"cross_node_all_reduce_1M", "cross_node_all_reduce_16M", "pairwise_all_reduce"} <= names
    assert {c.name for c in other.checks} >= {
        "cross_node_all_reduce_1M",
        "cross_node_all_reduce_16M",
    }
    (pair,) = [c for c in lead.cluster.checks if c.name == "pairwise_all_reduce"]
    assert pair.measured is not None and pair.measured > 0
    # each node votes the network it measured against the plan of the expected type's (gloo on
    # loopback reaches a sliver of 3200 Gbit/s: a warning, never a drain)
    for r in reports:
        (vote,) = [c for c in r.checks if c.name == NETWORK_CHECK]
        (largest,) = [c for c in r.checks if c.name == "cross_node_all_reduce_16M"]
        assert (vote.measured, vote.expected) == (largest.measured, largest.expected)
        assert vote.expected is not None and vote.status == "warn" and vote.action == "monitor"


def test_nodes_without_a_rendezvous_exit_2_naming_what_is_missing() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    p = subprocess.run(
        [sys.executable, "-m", "advisor", "probe", "--nodes", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (
        p.returncode == 2 and "--rdzv-endpoint HOST:PORT" in p.stderr and "MASTER_ADDR" in p.stderr
    )
    assert "Traceback" not in p.stderr and p.stdout == ""


def test_pairwise_needs_several_nodes() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "advisor", "probe", "--pairwise"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "--pairwise needs --nodes 2" in p.stderr
