"""A trace file of arrival times and lengths (advisor/perf/trace_file.py) read and simulated."""

from __future__ import annotations

from pathlib import Path

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


def test_a_trace_is_scaled_to_the_rate_asked_and_counted_in_iterations() -> None:
    """Arrivals 10, 11, 12, 13 s (1 a second) asked at 2 a second: 0, 0.5, 1, 1.5; an output
    of 201 tokens at 2 tokens an iteration is 1 + 100 iterations."""
    from advisor.perf.trace_file import Trace

    trace = Trace([Request(10.0 + i, 100, 201) for i in range(4)])
    assert trace.rate_per_s == pytest.approx(1.0)
    got = trace.arrivals(2.0, 10, 2.0)
    assert [r.arrival_s for r in got] == pytest.approx([0.0, 0.5, 1.0, 1.5])
    assert {r.output_tokens for r in got} == {101}
    assert trace == Trace([Request(10.0 + i, 100, 201) for i in range(4)])
    assert trace != Trace([Request(10.0 + i, 100, 200) for i in range(4)])


def test_a_request_with_a_trace_takes_its_rate_and_lengths() -> None:
    from advisor.request import EstimateRequest

    rows = [{"arrival_s": t, "input_tokens": i, "output_tokens": o} for t, i, o in
            ((0.0, 100, 10), (2.0, 300, 30), (4.0, 200, 20))]  # fmt: skip
    w = EstimateRequest(
        workload="low_latency_inference", model="llama-3.1-8b", accelerator="h100-sxm", trace=rows
    ).work()
    assert w.request_rate == pytest.approx(0.5)  # 2 requests after the first over 4 s
    assert (w.input_tokens, w.output_tokens) == (200, 20)
    assert w.trace is not None and len(w.trace.requests) == 3


def test_long_prompts_of_a_trace_show_in_the_tail(tmp_path: Path) -> None:
    """A trace of 600 requests at 2 a second, one in ten with an 8,000-token prompt, the rest
    100: its p99 time to first token is at least one 8,000-token prefill on the GPU
    (InferenceModel.prefill_s), which Poisson requests of the mean length (790) never wait."""
    import json
    import random

    from advisor.catalog.loading import load_catalog
    from advisor.perf.inference import Deployment, InferenceModel
    from advisor.perf.sizing import Shape
    from tests.test_planning_questions import run

    rng, t, lines = random.Random(3), 0.0, []
    for n in range(600):
        t += rng.expovariate(2.0)
        prompt = 8000 if n % 10 == 0 else 100
        lines.append(json.dumps({"arrival_s": t, "input_tokens": prompt, "output_tokens": 100}))
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(lines))
    base = ["estimate", "-w", "low_latency_inference", "-m", "llama-3.1-8b", "-a", "h100-sxm",
            "-g", "1", "--json"]  # fmt: skip
    traced = json.loads(run(*base, "--trace", str(path)).stdout)
    cat = load_catalog()
    acc = cat.accelerators["h100-sxm"]
    model = InferenceModel(
        Shape.of(cat.models["llama-3.1-8b"]), Deployment(acc, 1, 1, "bf16", 0.0), 8000, 100
    )
    assert traced["ttft_ms"] >= model.prefill_s(8000) * 1e3
    poisson = json.loads(
        run(*base, "--request-rate", "2", "--input-tokens", "790", "--output-tokens", "100").stdout
    )
    assert poisson["ttft_ms"] < model.prefill_s(8000) * 1e3
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"arrival_s": 0, "input_tokens": 1, "output_tokens": 1}\n{"arrival_s": -1}\n')
    refused = run(*base, "--trace", str(bad))
    assert refused.returncode == 2 and "trace line 2" in refused.stderr
