"""Training that cannot run is refused, never timed: a job across nodes with no known network,
and the CLI's headline of an estimate that does not fit."""

from __future__ import annotations

import pytest

from advisor import Catalog
from advisor.perf.training import FAILURES_PER_GPU_HOUR, goodput
from advisor.planning.estimate import estimate
from advisor.request import EstimateRequest
from tests.test_cli import run as cli

# 70B on 1,024 MI300X in nodes of 4: off its reference system, so no network between the nodes
# is known. Before the refusal the estimate printed 14,658,890 hours at MFU 0.00.
BARE = [
    "estimate",
    "-w",
    "large_scale_training",
    "-m",
    "llama-3.1-70b",
    "--tokens",
    "1e12",
    "-a",
    "mi300x",
    "-g",
    "1024",
    "--gpus-per-node",
    "4",
]


def test_no_network_across_nodes_gives_no_time(shipped: Catalog) -> None:
    req = EstimateRequest(
        workload="large_scale_training",
        model="llama-3.1-70b",
        tokens=1e12,
        accelerator="mi300x",
        gpu_count=1024,
        gpus_per_node=4,
    )
    r = estimate(shipped, req)
    assert not r.fits
    assert r.hours is None and r.mfu is None and r.cost_usd is None and r.gpu_hours is None
    names = {f.name for f in r.figures}
    assert "hours" not in names and "step_s" not in names and "memory_per_gpu_gb" in names
    assert any("no network between nodes" in n for n in r.notes)


def test_on_its_reference_host_the_same_job_is_timed(shipped: Catalog) -> None:
    """The same job on MI300X's 8-GPU host (3,200 Gbit/s between nodes) is timed: weeks, not
    the millions of hours of nodes talking at nothing. By hand: 6 x 70.6e9 x 1e12 = 4.2e23 FLOP
    on 1,024 x 1,307 TFLOP/s at MFU about 0.3 is about 3.3e5 s x 3.3 = some 300 h."""
    req = EstimateRequest(
        workload="large_scale_training",
        model="llama-3.1-70b",
        tokens=1e12,
        accelerator="mi300x",
        gpu_count=1024,
    )
    r = estimate(shipped, req)
    assert r.fits and r.hours is not None and 100 < r.hours < 1000


def test_cli_exit_1_and_no_cost_headline() -> None:
    out = cli(*BARE)
    assert out.returncode == 1
    assert "does not fit: no time or cost" in out.stdout
    assert "hours (" not in out.stdout


def test_goodput_is_smooth_in_gpus_and_llama3_at_16k() -> None:
    """By hand: Llama 3 lost 10% on 16,384 GPUs (1/0.9 = 1 + 1/9); the loss grows with the GPUs
    (interruptions per GPU-hour): 1 / (1 + N / 16,384 / 9). 8 GPUs: 0.99995; 1,024: 0.9931."""
    assert goodput(16_384) == pytest.approx(0.90)
    assert goodput(8) == pytest.approx(1 / (1 + 8 / 16_384 / 9))
    assert goodput(1024) == pytest.approx(0.99310, abs=1e-5)
    assert pytest.approx(1.973e-5, rel=1e-3) == FAILURES_PER_GPU_HOUR


def test_no_step_at_a_day(shipped: Catalog) -> None:
    """The same job just under and just over 24 hours pays the same share of goodput: the
    hours scale with the tokens (no 10% charge that starts at 24 h)."""

    def hours_for(tokens: float) -> float:
        r = estimate(
            shipped,
            EstimateRequest(
                workload="fine_tuning",
                model="llama-3-8b",
                tokens=tokens,
                instance_type="p5.48xlarge",
            ),
        )
        assert r.hours is not None
        return r.hours

    per_token = hours_for(1e9) / 1e9  # the two sizes straddle a day, whatever the GPU's speed
    under, over = 23.0 / per_token, 25.0 / per_token
    hours = [hours_for(under), hours_for(over)]
    assert hours[0] < 24 < hours[1]
    assert hours[1] / hours[0] == pytest.approx(25.0 / 23.0, rel=1e-3)
