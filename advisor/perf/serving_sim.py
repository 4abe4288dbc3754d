"""Serving under load: a seeded, event-stepped simulation of continuous batching. Pure.

One replica serves requests that arrive over time (Poisson at a rate, seeded, or a trace of
arrival times and lengths). The scheduler is the one vLLM's V1 engine and Sarathi-Serve
(Agrawal et al., OSDI 2024) run:

- every iteration first gives each running sequence its next decode token, then fills the rest
  of the iteration's token budget (`max_num_batched_tokens`, chunked prefill) with prompt chunks of
  admitted sequences, first come first served;
- a waiting request is admitted at an iteration boundary when the KV cache can hold its whole
  prompt and output (TensorRT-LLM's guaranteed-no-evict policy: no preemption) and a sequence slot
  is free;
- a request's first token comes at the end of the iteration that processes its last prompt chunk,
  each later token at the end of each later iteration; it leaves after its last token, freeing its
  KV.

The time of one iteration is the performance model's (`step_s(decode_tokens, prompt_tokens)`).
Between events (an arrival that can be admitted, a prefill, a completion) the batch does not
change, so the simulation jumps over runs of identical decode iterations at once: its cost grows
with the number of requests, not of tokens.

Reported: TTFT (arrival to first token, queueing included), ITL (token-weighted: every token gap
of every request), TPOT (a request's mean gap), E2E, at p50 / p90 / p99 and mean, over the
requests of the measured window (the first `warmup_fraction` of requests are left out); the
output throughput and the goodput (requests per second meeting every target) over that window,
and whether the replica kept up with the arrivals (`saturated` when it did not: requests queue
without bound and the percentiles grow with the length of the run).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

StepTime = Callable[[int, int], float]  # (decode tokens, prompt tokens) -> seconds

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Request:
    """One request of a trace: when it arrives and how long it is."""

    arrival_s: float
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Scheduler:
    """What bounds a replica's batch: the KV cache in tokens, the sequences it runs at once and
    the tokens one iteration takes (the chunked-prefill budget)."""

    kv_capacity_tokens: int
    max_sequences: int
    max_batched_tokens: int


@dataclass(frozen=True)
class Distribution:
    """Percentiles and mean of one latency, in seconds."""

    p50_s: float
    p90_s: float
    p99_s: float
    mean_s: float

    def at(self, percentile: int) -> float:
        """The figure at one of PERCENTILES."""
        by = {50: self.p50_s, 90: self.p90_s, 99: self.p99_s}
        if percentile not in by:
            raise ValueError(f"percentile {percentile}: one of {', '.join(map(str, by))}")
        return by[percentile]


@dataclass(frozen=True)
class LoadResult:
    """What a replica delivers under the simulated load."""

    ttft: Distribution
    itl: Distribution
    tpot: Distribution
    e2e: Distribution
    requests: int  # measured requests (after the warm-up)
    window_s: float
    offered_rate: float  # requests/s arriving in the window
    completed_rate: float  # requests/s completed in the window
    throughput_tokens_s: float  # output tokens/s completed in the window
    goodput_rate: float  # requests/s of the window that met every target
    saturated: bool
    mean_batch: float  # decode sequences per iteration, time-weighted


@dataclass(slots=True)
class _Seq:
    req: Request
    prompt_left: int
    first_token_s: float = math.nan
    done_s: float = math.nan


@dataclass(slots=True)
class _Clock:
    t: float = 0.0
    iteration: int = 0
    itl: list[tuple[float, float]] = field(default_factory=list)  # (gap s, tokens)
    batch_time: float = 0.0  # sum of decode sequences x seconds


def poisson_arrivals(
    rate_per_s: float, count: int, input_tokens: int, output_tokens: int, seed: int = 0
) -> list[Request]:
    """`count` requests of fixed lengths arriving as a Poisson process of `rate_per_s`."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(count):
        t += rng.expovariate(rate_per_s)
        out.append(Request(t, input_tokens, output_tokens))
    return out


def weighted_percentile(samples: Sequence[tuple[float, float]], percentile: float) -> float:
    """The smallest value whose cumulative weight reaches `percentile`% of the total."""
    ordered = sorted(samples)
    total = sum(w for _, w in ordered)
    if not ordered or total <= 0:
        return math.nan
    goal, run = total * percentile / 100, 0.0
    for value, weight in ordered:
        run += weight
        if run >= goal:
            return value
    return ordered[-1][0]


def _distribution(samples: Sequence[tuple[float, float]]) -> Distribution:
    """Weighted p50 / p90 / p99 and mean in one sort (weighted_percentile's rule)."""
    ordered = sorted(samples)
    total = sum(w for _, w in ordered)
    if not ordered or total <= 0:
        return Distribution(math.nan, math.nan, math.nan, math.nan)
    mean = sum(v * w for v, w in ordered) / total
    goals = [total * p / 100 for p in PERCENTILES]
    found: list[float] = []
    run = 0.0
    for value, weight in ordered:
        run += weight
        while len(found) < len(goals) and run >= goals[len(found)]:
            found.append(value)
    while len(found) < len(goals):
        found.append(ordered[-1][0])
    return Distribution(found[0], found[1], found[2], mean)


class _Replica:
    """The scheduler's state; `run` drives it to the end of the trace."""

    def __init__(self, step_s: StepTime, sched: Scheduler) -> None:
        self.step_s, self.sched = step_s, sched
        self.clock = _Clock()
        self.waiting: deque[_Seq] = deque()
        self.prefilling: deque[_Seq] = deque()
        self.decoding: list[tuple[int, int, _Seq]] = []  # (finishing iteration, order, seq)
        self.kv_used = 0
        self.order = 0

    def _admit(self) -> None:
        sched = self.sched
        while self.waiting:
            seq = self.waiting[0]
            need = seq.req.input_tokens + seq.req.output_tokens
            running = len(self.decoding) + len(self.prefilling)
            if running >= sched.max_sequences or self.kv_used + need > sched.kv_capacity_tokens:
                return
            self.waiting.popleft()
            self.kv_used += need
            self.prefilling.append(seq)

    def _finish(self, seq: _Seq) -> None:
        seq.done_s = self.clock.t
        self.kv_used -= seq.req.input_tokens + seq.req.output_tokens

    def _prefill_iteration(self) -> None:
        """One iteration carrying prompt chunks beside every running decode."""
        clock, decode = self.clock, len(self.decoding)
        left = max(0, self.sched.max_batched_tokens - decode)
        chunks: list[tuple[_Seq, int]] = []
        for seq in self.prefilling:
            if left <= 0:
                break
            take = min(seq.prompt_left, left)
            chunks.append((seq, take))
            left -= take
        prompt = sum(take for _, take in chunks)
        dt = self.step_s(decode, prompt)
        clock.t += dt
        clock.iteration += 1
        clock.batch_time += decode * dt
        if decode:
            clock.itl.append((dt, float(decode)))
        while self.decoding and self.decoding[0][0] <= clock.iteration:
            self._finish(heapq.heappop(self.decoding)[2])
        for seq, take in chunks:
            seq.prompt_left -= take
            if seq.prompt_left:
                continue
            self.prefilling.popleft()  # chunks are taken in order: a finished one is first
            seq.first_token_s = clock.t
            if seq.req.output_tokens <= 1:
                self._finish(seq)
                continue
            self.order += 1
            finish = clock.iteration + seq.req.output_tokens - 1
            heapq.heappush(self.decoding, (finish, self.order, seq))

    def _decode_run(self, next_arrival_s: float) -> None:
        """Identical decode iterations up to the next event, at once."""
        clock, decoding = self.clock, self.decoding
        decode = len(decoding)
        dt = self.step_s(decode, 0)
        runs = decoding[0][0] - clock.iteration
        if next_arrival_s < math.inf and self._could_admit():
            until = math.ceil((next_arrival_s - clock.t) / dt)
            if until < runs:
                runs = until if until > 1 else 1
        clock.t += runs * dt
        clock.iteration += runs
        clock.batch_time += decode * dt * runs
        clock.itl.append((dt, float(decode * runs)))
        now, t = clock.iteration, clock.t
        while decoding and decoding[0][0] <= now:
            seq = heapq.heappop(decoding)[2]
            seq.done_s = t
            self.kv_used -= seq.req.input_tokens + seq.req.output_tokens

    def _could_admit(self) -> bool:
        running = len(self.decoding) + len(self.prefilling)
        return running < self.sched.max_sequences and self.kv_used < self.sched.kv_capacity_tokens

    def warm(self, batch: int, like: Request) -> None:
        """Start with `batch` sequences of `like`'s lengths already decoding, their remaining
        tokens spread evenly over 1 .. O - 1 (the steady state continuous batching reaches), so
        the run measures the steady state instead of the ramp from an empty replica."""
        out = like.output_tokens
        if out <= 1:
            return
        for i in range(batch):
            seq = _Seq(like, 0)
            left = 1 + (i * (out - 1)) // max(1, batch)
            self.kv_used += like.input_tokens + like.output_tokens
            self.order += 1
            heapq.heappush(self.decoding, (left, self.order, seq))

    def run(self, trace: Sequence[Request]) -> list[_Seq]:
        seqs = [_Seq(r, r.input_tokens) for r in trace]
        arrivals = deque(seqs)
        clock = self.clock
        while arrivals or self.waiting or self.prefilling or self.decoding:
            while arrivals and arrivals[0].req.arrival_s <= clock.t:
                self.waiting.append(arrivals.popleft())
            self._admit()
            if self.prefilling:
                self._prefill_iteration()
            elif self.decoding:
                self._decode_run(arrivals[0].req.arrival_s if arrivals else math.inf)
            elif arrivals:
                clock.t = arrivals[0].req.arrival_s  # idle until the next request
            else:
                break  # what waits can never fit: refused at the start (simulate)
        return seqs


def simulate(
    step_s: StepTime,
    sched: Scheduler,
    trace: Sequence[Request],
    max_ttft_s: float = math.inf,
    max_itl_s: float = math.inf,
    warmup_fraction: float = 0.1,
    warm_batch: int = 0,
) -> LoadResult:
    """Serve `trace` on one replica; the figures of the requests after the warm-up. A request
    meets the targets when its TTFT and its mean token gap (TPOT) are within them.
    `warm_batch` sequences like the trace's first request start the run already decoding
    (_Replica.warm), within the replica's limits; they are not measured."""
    if not trace:
        raise ValueError("an empty trace")
    biggest = max(r.input_tokens + r.output_tokens for r in trace)
    if biggest > sched.kv_capacity_tokens:
        raise ValueError(
            f"a request of {biggest} tokens does not fit the KV cache of "
            f"{sched.kv_capacity_tokens} tokens"
        )
    replica = _Replica(step_s, sched)
    first = trace[0]
    fits = sched.kv_capacity_tokens // (first.input_tokens + first.output_tokens)
    replica.warm(min(warm_batch, sched.max_sequences, fits), first)
    seqs = replica.run(sorted(trace, key=lambda r: r.arrival_s))
    seqs.sort(key=lambda s: s.req.arrival_s)
    measured = seqs[int(len(seqs) * warmup_fraction) :]
    start = measured[0].req.arrival_s
    end = max(s.done_s for s in measured)
    last_arrival = measured[-1].req.arrival_s
    window = max(end - start, 1e-12)
    arrival_window = max(last_arrival - start, 1e-12)
    ttft = [(s.first_token_s - s.req.arrival_s, 1.0) for s in measured]
    tpot = [
        ((s.done_s - s.first_token_s) / (s.req.output_tokens - 1), 1.0)
        for s in measured
        if s.req.output_tokens > 1
    ]
    e2e = [(s.done_s - s.req.arrival_s, 1.0) for s in measured]
    good = sum(
        1
        for s in measured
        if s.first_token_s - s.req.arrival_s <= max_ttft_s
        and (
            s.req.output_tokens <= 1
            or (s.done_s - s.first_token_s) / (s.req.output_tokens - 1) <= max_itl_s
        )
    )
    offered = (len(measured) - 1) / arrival_window if len(measured) > 1 else 0.0
    completed = len(measured) / window
    tokens = sum(s.req.output_tokens for s in measured)
    clock = replica.clock
    return LoadResult(
        ttft=_distribution(ttft),
        itl=_distribution(clock.itl),
        tpot=_distribution(tpot or [(0.0, 1.0)]),
        e2e=_distribution(e2e),
        requests=len(measured),
        window_s=window,
        offered_rate=offered,
        completed_rate=completed,
        throughput_tokens_s=tokens / window,
        goodput_rate=good / window,
        saturated=_saturated(measured),
        mean_batch=clock.batch_time / clock.t if clock.t else 0.0,
    )


def _saturated(measured: Sequence[_Seq]) -> bool:
    """Requests queue without bound when the waits keep growing: the last quarter's mean TTFT
    is more than twice the second quarter's and longer than a tenth of the window (a stable
    queue's waits fluctuate around one level; an overloaded one's grow with the run)."""
    n = len(measured)
    if n < 8:
        return False
    q = n // 4
    second = [s.first_token_s - s.req.arrival_s for s in measured[q : 2 * q]]
    last = [s.first_token_s - s.req.arrival_s for s in measured[3 * q :]]
    span = measured[-1].req.arrival_s - measured[0].req.arrival_s
    late, early = sum(last) / len(last), sum(second) / len(second)
    return late > 2 * early and late > span / 10
