"""The serving simulation against hand-worked schedules and textbook queues (Erlang C for
M/M/c, Pollaczek-Khinchine for M/D/1): the expected values are computed here independently of
the module."""

from __future__ import annotations

import math
import random

import pytest

from advisor.perf.serving_sim import (
    Request,
    Scheduler,
    poisson_arrivals,
    simulate,
    weighted_percentile,
)

ROOMY = Scheduler(kv_capacity_tokens=10**9, max_sequences=10**6, max_batched_tokens=10**6)


def linear_step(decode: int, prompt: int) -> float:
    return 0.01 + 0.001 * decode + 0.0001 * prompt


def test_two_requests_by_hand() -> None:
    """A arrives at 0, B at 5 ms; prompts of 100, outputs of 3; budget 150 tokens.
    it 1: A's prompt alone: 0.01 + 0.01 = 0.020 -> t 0.020, A's first token.
    it 2: A decodes, B's prompt (100 of the 149 left): 0.01 + 0.001 + 0.01 = 0.021 -> 0.041.
    it 3: both decode: 0.012 -> 0.053, A's third token: A done.
    it 4: B decodes: 0.011 -> 0.064, B done."""
    trace = [Request(0.0, 100, 3), Request(0.005, 100, 3)]
    sched = Scheduler(kv_capacity_tokens=1000, max_sequences=8, max_batched_tokens=150)
    r = simulate(linear_step, sched, trace, warmup_fraction=0.0)
    assert r.ttft.mean_s == pytest.approx((0.020 + 0.036) / 2)
    assert r.ttft.p99_s == pytest.approx(0.036)
    assert r.tpot.mean_s == pytest.approx(((0.053 - 0.020) / 2 + (0.064 - 0.041) / 2) / 2)
    # token gaps: 0.021 (A), 0.012 (A and B), 0.011 (B): weighted mean 0.056 / 4
    assert r.itl.mean_s == pytest.approx((0.021 + 2 * 0.012 + 0.011) / 4)
    assert r.e2e.p99_s == pytest.approx(0.064 - 0.005)
    assert r.throughput_tokens_s == pytest.approx(6 / 0.064)


def test_chunked_prefill_splits_a_long_prompt() -> None:
    """A prompt of 250 with a budget of 100: three iterations (100, 100, 50 tokens) before the
    first token: 3 x 0.01 + 0.0001 x 250 = 0.055."""
    sched = Scheduler(kv_capacity_tokens=1000, max_sequences=8, max_batched_tokens=100)
    r = simulate(linear_step, sched, [Request(0.0, 250, 2)], warmup_fraction=0.0)
    assert r.ttft.p50_s == pytest.approx(0.055)


def test_kv_capacity_holds_the_second_request_back() -> None:
    """KV for 150 tokens: A (100 + 3) runs alone; B waits until A leaves at 0.042
    (prefill 0.020, then two decode steps of 0.011), then prefills for 0.020: TTFT 0.062."""
    sched = Scheduler(kv_capacity_tokens=150, max_sequences=8, max_batched_tokens=1000)
    r = simulate(linear_step, sched, [Request(0, 100, 3), Request(0, 100, 3)], warmup_fraction=0)
    assert r.ttft.p99_s == pytest.approx(0.042 + 0.020)


def test_a_request_bigger_than_the_cache_is_refused() -> None:
    sched = Scheduler(kv_capacity_tokens=100, max_sequences=8, max_batched_tokens=1000)
    with pytest.raises(ValueError, match="does not fit"):
        simulate(linear_step, sched, [Request(0, 100, 3)])


def _geometric(rng: random.Random, mean: float) -> int:
    return int(math.log(1 - rng.random()) / math.log(1 - 1 / mean)) + 1


def erlang_c(servers: int, load: float) -> float:
    """Probability an arrival waits in M/M/c (Erlang's C formula), load = lambda / mu."""
    top = load**servers / math.factorial(servers) * servers / (servers - load)
    return top / (sum(load**k / math.factorial(k) for k in range(servers)) + top)


def test_constant_steps_and_geometric_outputs_queue_as_m_m_c() -> None:
    """Each request holds one of c slots for O iterations of 1 ms, O geometric (mean 200): an
    exponential service of 0.2 s, so the wait for a slot is M/M/c's: Wq = C(c, a) / (c mu -
    lambda). TTFT = that wait + the first iteration (+ up to one iteration to the next boundary
    when a slot is free)."""
    tau, mean_out, servers, rate = 0.001, 200, 2, 6.0  # a = 1.2, rho = 0.6
    load = rate * tau * mean_out
    wq = erlang_c(servers, load) / (servers / (tau * mean_out) - rate)
    waits = []
    for seed in range(4):
        rng = random.Random(seed)
        t, trace = 0.0, []
        for _ in range(20_000):
            t += rng.expovariate(rate)
            trace.append(Request(t, 1, _geometric(rng, mean_out)))
        sched = Scheduler(10**9, servers, 10**6)
        waits.append(simulate(lambda d, p: tau, sched, trace).ttft.mean_s - 1.5 * tau)
    assert sum(waits) / len(waits) == pytest.approx(wq, rel=0.08)


def test_fixed_outputs_on_one_slot_queue_as_m_d_1() -> None:
    """One slot, service exactly 200 x 1 ms: Pollaczek-Khinchine, Wq = rho S / (2 (1 - rho))."""
    tau, out, rate = 0.001, 200, 3.5  # rho = 0.7
    service = tau * out
    rho = rate * service
    wq = rho * service / (2 * (1 - rho))
    waits = []
    for seed in range(4):
        trace = poisson_arrivals(rate, 20_000, 1, out, seed=seed)
        r = simulate(lambda d, p: tau, Scheduler(10**9, 1, 10**6), trace)
        waits.append(r.ttft.mean_s - 1.5 * tau)
    assert sum(waits) / len(waits) == pytest.approx(wq, rel=0.08)


def test_ttft_grows_with_load_and_blows_up_near_capacity() -> None:
    """A replica of 16 slots whose step time grows with the batch: TTFT p50 and p99 rise with
    the rate; p99 >= p50 everywhere; past capacity the queue is flagged saturated."""
    sched = Scheduler(kv_capacity_tokens=16 * 400, max_sequences=16, max_batched_tokens=4096)

    def step(decode: int, prompt: int) -> float:
        return 0.008 + 0.0002 * decode + 0.00002 * prompt

    # capacity ~ 16 sequences / (200 tokens x 0.0112 s + prefill) ~ 7 requests/s
    rates = [1.0, 4.0, 6.0, 6.8, 9.0]
    results = [simulate(step, sched, poisson_arrivals(r, 3000, 200, 200, seed=7)) for r in rates]
    p50s = [r.ttft.p50_s for r in results]
    assert p50s == sorted(p50s)
    assert all(r.ttft.p99_s >= r.ttft.p50_s for r in results)
    assert all(r.itl.p99_s >= r.itl.p50_s for r in results)
    assert results[-1].ttft.p50_s > 20 * results[0].ttft.p50_s
    assert [r.saturated for r in results] == [False, False, False, False, True]
    assert results[0].completed_rate == pytest.approx(1.0, rel=0.1)


def test_goodput_counts_requests_within_the_targets() -> None:
    trace = [Request(0.0, 100, 3), Request(0.005, 100, 3)]
    sched = Scheduler(kv_capacity_tokens=1000, max_sequences=8, max_batched_tokens=150)
    # TTFTs 0.020 and 0.036: a 30 ms target keeps one of the two
    r = simulate(linear_step, sched, trace, max_ttft_s=0.030, warmup_fraction=0.0)
    assert r.goodput_rate == pytest.approx(1 / 0.064)


def test_weighted_percentile() -> None:
    samples = [(1.0, 1.0), (2.0, 1.0), (3.0, 8.0)]
    assert weighted_percentile(samples, 10) == 1.0
    assert weighted_percentile(samples, 20) == 2.0
    assert weighted_percentile(samples, 21) == 3.0


def test_same_seed_same_answer() -> None:
    a = simulate(linear_step, ROOMY, poisson_arrivals(20, 500, 100, 50, seed=3))
    b = simulate(linear_step, ROOMY, poisson_arrivals(20, 500, 100, 50, seed=3))
    assert a == b


def test_decode_tokens_take_their_share_of_the_budget_first() -> None:
    """Budget 100: with A decoding, B's prompt of 100 gets 99 tokens, then its last one.
    it 1: A's prompt: 0.020. it 2: A decodes + 99 of B: 0.01 + 0.001 + 0.0099 = 0.0209 (0.0409).
    it 3: A decodes (its last token) + B's last prompt token: 0.0111 (0.052): B's first token.
    TTFT of B: 0.052 - 0.005 = 0.047."""
    trace = [Request(0.0, 100, 3), Request(0.005, 100, 3)]
    sched = Scheduler(kv_capacity_tokens=1000, max_sequences=8, max_batched_tokens=100)
    r = simulate(linear_step, sched, trace, warmup_fraction=0.0)
    assert r.ttft.p99_s == pytest.approx(0.047)
    assert r.e2e.p99_s == pytest.approx(0.052 + 2 * 0.011 - 0.005)


def test_a_warm_start_begins_with_sequences_decoding() -> None:
    """Two warm sequences of 100 + 3 with 1 and 2 tokens left; A (100, 3) arrives at 0.
    it 1: 2 decodes + A's prompt: 0.01 + 0.002 + 0.01 = 0.022 (A's first token; the first warm
    one leaves). it 2: 2 decodes: 0.012 (0.034). it 3: A alone: 0.011 (0.045), A done."""
    sched = Scheduler(kv_capacity_tokens=1000, max_sequences=8, max_batched_tokens=1000)
    trace = [Request(0.0, 100, 3)]
    r = simulate(linear_step, sched, trace, warmup_fraction=0.0, warm_batch=2)
    assert r.ttft.p50_s == pytest.approx(0.022)
    assert r.e2e.p50_s == pytest.approx(0.045)
    # every gap: the two warm ones wait out the prefill iteration too
    assert r.itl.mean_s == pytest.approx((2 * 0.022 + 2 * 0.012 + 0.011) / 5)
