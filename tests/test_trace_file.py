"""A trace file of arrival times and lengths (advisor/perf/trace_file.py) read and simulated."""

from __future__ import annotations

import pytest

from advisor.errors import InputError
from advisor.perf.serving_sim import Request, Scheduler, simulate
from advisor.perf.trace_file import read_trace, trace_rate_per_s

CSV = "arrival_s,input_tokens,output_tokens\n0.005,100,3\n0.0,100,3\n"
JSONL = '{"arrival_s": 0.0, "input_tokens": 100, "output_tokens": 3}\n\n' + (
    '{"arrival_s": 0.005, "input_tokens": 100, "output_tokens": 3}\n'
)


def linear_step(decode: int, prompt: int) -> float:
    return 0.01 + 0.001 * decode + 0.0001 * prompt


@pytest.mark.parametrize("text", [CSV, JSONL])
def test_both_formats_read_in_arrival_order(text: str) -> None:
    assert read_trace(text) == [Request(0.0, 100, 3), Request(0.005, 100, 3)]


def test_a_trace_file_simulates_as_the_hand_worked_schedule() -> None:
    # tests/test_serving_sim.py's two requests, worked by hand there: first tokens at 0.020 s and
    # 0.041 s (B arrives at 0.005: TTFT 0.036), B done at 0.064 s.
    sched = Scheduler(kv_capacity_tokens=1000, max_sequences=8, max_batched_tokens=150)
    r = simulate(linear_step, sched, read_trace(CSV), warmup_fraction=0.0)
    assert r.ttft.mean_s == pytest.approx((0.020 + 0.036) / 2)
    assert r.e2e.p99_s == pytest.approx(0.064 - 0.005)


def test_rate_of_a_trace() -> None:
    # 2 requests over 0.005 s: one interval, 200 requests/s.
    assert trace_rate_per_s(read_trace(CSV)) == pytest.approx(200.0)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("arrival_s,input_tokens\n0,1\n", "header must be arrival_s,input_tokens,output_tokens"),
        ("arrival_s,input_tokens,output_tokens\n0,0,3\n", "line 2: input_tokens"),
        ("arrival_s,input_tokens,output_tokens\n-1,5,3\n", "line 2: arrival_s"),
        ('{"arrival_s": 0, "input_tokens": 5, "output_tokens": 3, "x": 1}\n', "line 1: x"),
        ('{"arrival_s": 0, "input_tokens": 5\n', "line 1: not JSON"),
        ("arrival_s,input_tokens,output_tokens\n", "no requests"),
    ],
)
def test_a_bad_trace_names_the_line_and_field(text: str, says: str) -> None:
    with pytest.raises(InputError) as e:
        read_trace(text)
    assert says in str(e.value) and e.value.field == "trace"
