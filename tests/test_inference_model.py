"""The inference model: hand-checked figures and properties (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.catalog.loading import load_catalog
from advisor.errors import InputError
from advisor.perf.inference import (
    EFFICIENCY,
    Deployment,
    InferenceModel,
    _ring,
    expected_experts,
    moe_of,
    weight_bytes_touched,
)
from advisor.perf.sizing import Shape

CAT = load_catalog()


def _model(
    model: str = "llama-3.1-8b",
    acc: str = "h100-sxm",
    gpus: int = 1,
    tp: int = 1,
    precision: str = "bf16",
    inp: int = 512,
    out: int = 256,
    link: float | None = None,
) -> InferenceModel:
    preset, a = CAT.models[model], CAT.accelerators[acc]
    dep = Deployment(a, gpus, tp, precision, a.interconnect_gb_s if link is None else link)
    return InferenceModel(
        Shape.of(preset), dep, inp, out, moe_of(preset.experts, preset.experts_per_token)
    )


MODELS = st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "mistral-7b"])
ACCS = st.sampled_from(["h100-sxm", "h200-sxm", "a100-80gb-sxm", "l40s"])
TOKENS = st.integers(min_value=16, max_value=4096)


def _fits(m: InferenceModel) -> bool:
    return m.max_concurrency() >= 1


@settings(max_examples=60, deadline=None)
@given(MODELS, ACCS, st.sampled_from([1, 2, 4, 8]), TOKENS, TOKENS)
def test_throughput_under_both_rooflines(model: str, acc: str, tp: int, inp: int, out: int) -> None:
    m = _model(model, acc, tp, tp, "bf16" if acc == "a100-80gb-sxm" else "fp8", inp, out)
    if not _fits(m):
        return
    r = m.at()
    a = CAT.accelerators[acc]
    peak = a.peak_tflops.get(m.cp.precision) or 0
    # compute roofline: every output token costs at least 2 x active params FLOPs
    assert r.throughput_tokens_s * 2 * m.shape.active_params <= tp * peak * 1e12
    # bandwidth roofline: a step of B tokens reads at least the active weights once
    active_bytes = m.shape.active_params * m.bpw
    assert (
        r.throughput_tokens_s <= r.concurrency * tp * a.memory_bandwidth_gbps * 1e9 / active_bytes
    )


@settings(max_examples=40, deadline=None)
@given(MODELS, ACCS, TOKENS, TOKENS)
def test_itl_never_falls_as_concurrency_grows(model: str, acc: str, inp: int, out: int) -> None:
    m = _model(model, acc, 8, 8, "bf16" if acc == "a100-80gb-sxm" else "fp8", inp, out)
    fit = m.max_concurrency()
    itls = [m.at(b).itl_ms for b in range(1, min(fit, 300) + 1, 7)]
    assert itls == sorted(itls)


@settings(max_examples=40, deadline=None)
@given(MODELS, TOKENS, TOKENS)
def test_ttft_grows_with_the_prompt(model: str, a: int, b: int) -> None:
    short, long_ = sorted((a, b))
    if short == long_:
        return
    m = _model(model, "h200-sxm", 8, 8, "fp8", short, 64)
    assert m.prefill_s(short) < m.prefill_s(long_)


def test_tensor_parallel_over_nvlink_lowers_itl() -> None:
    itl = [_model("llama-3.1-70b", "h100-sxm", tp, tp, "fp8").at(1).itl_ms for tp in (2, 4, 8)]
    assert itl[0] > itl[1] > itl[2]


def test_pcie_all_reduce_costs_more_than_nvlink() -> None:
    nvlink = _model("llama-3.1-70b", "h100-sxm", 4, 4, "fp8").at(64).itl_ms
    pcie = _model("llama-3.1-70b", "h100-sxm", 4, 4, "fp8", link=0).at(64).itl_ms
    assert pcie > nvlink


def test_unsupported_precision_is_refused() -> None:
    with pytest.raises(InputError, match="no fp8"):
        _model("llama-3.1-8b", "a100-80gb-sxm", precision="fp8")


def test_tp_must_divide_gpus_and_fit_a_node() -> None:
    with pytest.raises(InputError, match="valid degrees are 1, 2, 4, 8"):
        _model("llama-3.1-8b", gpus=8, tp=3)
    with pytest.raises(InputError, match="the 8 of a node"):
        _model("llama-3.1-8b", gpus=16, tp=16)


# Llama 3.1 8B's untied input embedding, 128,256 x 4,096: looked up a row per token, never read
# whole, so no decode step streams it (Shape.lookup_params).
EMBED_8B = 128_256 * 4096


def test_moe_at_batch_1_reads_only_active_experts() -> None:
    preset = CAT.models["mixtral-8x7b"]
    shape = Shape.of(preset)
    embedding = 32_000 * 4096  # untied, never read whole
    # batch 1: exactly the active parameters (top-2 of 8 experts)
    touched = weight_bytes_touched(shape, 1.0, 1, (8, 2))
    assert touched == pytest.approx(shape.active_params - embedding)
    # a large batch touches every expert: all parameters
    touched = weight_bytes_touched(shape, 1.0, 4096, (8, 2))
    assert touched == pytest.approx(shape.params - embedding)
    # hand: 8 x (1 - (3/4)^2) = 8 x 7/16 = 3.5 distinct experts for 2 tokens
    assert expected_experts(8, 2, 2) == pytest.approx(3.5)


# Llama 3.1's vocabulary (its model card: 128,256 tokens); sampling reads FP32 logits 4 times
# (written by the head, read and written by the softmax, read by the sampler).
SAMPLED_BYTES_8B = 128_256 * 4 * 4
# A Llama-3.1-8B pass's fixed time: (32 layers x 10 kernels + 3 sampling kernels) x 3.8 us
# launches (NVIDIA's CUDA Graphs blog, 2019) + 32 layers x (60 - 10 x 3.8) us unexplained.
FIXED_8B = (32 * 10 + 3) * 3.8e-6 + 32 * 22e-6


@pytest.mark.usefixtures("roofline")
def test_decode_step_by_hand() -> None:
    """Llama-3.1-8B bf16 on one H100 SXM at batch 1, 512 in / 256 out: bandwidth-bound.
    weights (8.03e9 less the 0.525e9 of the input embedding) x 2 B; KV 2 x 32 layers x 8 heads x
    128 x 2 B = 131,072 B/token x (512 + 128) tokens; one token's sampling; over 3350 GB/s x
    0.8; plus the launches and the unexplained time per layer."""
    m = _model(inp=512, out=256)
    eff_bw = EFFICIENCY[CAT.accelerators["h100-sxm"].generation][1]
    weights = (CAT.models["llama-3.1-8b"].params_b * 1e9 - EMBED_8B) * 2
    kv = 131_072 * (512 + 128)
    expected = (weights + kv + SAMPLED_BYTES_8B) / (3350e9 * eff_bw) + FIXED_8B
    assert m.step_s(1) == pytest.approx(expected, rel=1e-9)


@pytest.mark.usefixtures("roofline")
def test_decode_pays_each_sequences_attention_and_sampling() -> None:
    """Llama-3.1-8B bf16 on one H100 SXM, 512 in / 256 out: going from 1 to 64 sequences adds,
    on the bandwidth roofline, 63 more sequences' KV (131,072 B/token x 640 tokens each) and 63
    more tokens sampled over the vocabulary; the weights are read once either way."""
    m = _model(inp=512, out=256)
    eff_bw = EFFICIENCY[CAT.accelerators["h100-sxm"].generation][1]
    added = 63 * (131_072 * 640 + SAMPLED_BYTES_8B) / (3350e9 * eff_bw)
    assert m.step_s(64) - m.step_s(1) == pytest.approx(added, rel=1e-9)


def test_memory_bounds_concurrency_by_hand() -> None:
    """Llama-3.1-70B fp8 on one H200 (141 GB): 0.9 x 141e9 (the one headroom rule) - 70.6e9
    weights free, over the fp8 KV of 2 x 80 x 8 x 128 x 1 B = 163,840 B/token x 2000 tokens."""
    m = _model("llama-3.1-70b", "h200-sxm", precision="fp8", inp=1000, out=1000)
    params = CAT.models["llama-3.1-70b"].params_b * 1e9
    assert m.max_concurrency() == int((0.9 * 141e9 - params) // (163_840 * 2000))


@pytest.mark.usefixtures("roofline")
def test_decode_step_adds_the_gemm_and_attention_rooflines_by_hand() -> None:
    """Llama-3.1-8B fp8 on one H100 SXM, 128 in / 128 out, 1024 sequences: the GEMMs are
    compute-bound, attention (reading the KV cache) is bandwidth-bound; they run one after the
    other, so the step is the sum of the two, above the max of the combined totals.
    GEMM: 2 x (8.03e9 - the input embedding) x 1024 FLOPs / (1979e12 x 0.5); attention: KV of
    1024 x (128 + 64) tokens x 65,536 B (2 x 32 x 8 x 128 x 1 B fp8) / (3350e9 x 0.8); the
    sampling of 1024 tokens at the same bandwidth; plus the fixed time."""
    m = _model(precision="fp8", inp=128, out=128)
    eff_c, eff_bw = EFFICIENCY[CAT.accelerators["h100-sxm"].generation]
    params = CAT.models["llama-3.1-8b"].params_b * 1e9 - EMBED_8B
    gemm = 2 * params * 1024 / (1979e12 * eff_c)
    assert gemm > params / (3350e9 * eff_bw)  # compute-bound GEMMs at this batch
    kv = 1024 * 192 * 65_536
    attention_flops = 4 * 32 * 32 * 128 * 1024 * 192
    attention = kv / (3350e9 * eff_bw)
    assert attention > attention_flops / (1979e12 * eff_c)  # bandwidth-bound attention
    sampling = 1024 * SAMPLED_BYTES_8B / (3350e9 * eff_bw)
    assert m.step_s(1024) == pytest.approx(gemm + attention + sampling + FIXED_8B, rel=1e-9)
    combined = max((params + kv) / (3350e9 * eff_bw), 2 * params * 1024 / (1979e12 * eff_c))
    assert m.step_s(1024) > combined + FIXED_8B


@pytest.mark.usefixtures("roofline")
def test_itl_packs_the_admitted_prompts_into_one_iteration_by_hand() -> None:
    """In-flight batching, steady state: 256 sequences of 128 output tokens admit 256 / 128 = 2
    prompts (2 x 512 = 1024 prompt tokens) per iteration. Llama-3.1-8B bf16, one H100 SXM:
    GEMM over 256 + 1024 tokens is compute-bound; attention = KV read of 256 x (512 + 64) tokens
    x 131,072 B, or the FLOPs 4 x 32 x 4096 x 256 x 576 + 2 x 32 x 4096 x 1024 x 512 if longer;
    256 + 2 tokens sampled; the weights (less the input embedding, only indexed) are read and the
    fixed time paid once, not once per prompt."""
    m = _model(inp=512, out=128)
    eff_c, eff_bw = EFFICIENCY[CAT.accelerators["h100-sxm"].generation]
    params = CAT.models["llama-3.1-8b"].params_b * 1e9 - EMBED_8B
    gemm = max(params * 2 / (3350e9 * eff_bw), 2 * params * 1280 / (989.5e12 * eff_c))
    attention_flops = 4 * 32 * 4096 * 256 * 576 + 2 * 32 * 4096 * 1024 * 512
    attention = max(256 * 576 * 131_072 / (3350e9 * eff_bw), attention_flops / (989.5e12 * eff_c))
    sampling = 258 * SAMPLED_BYTES_8B / (3350e9 * eff_bw)
    assert m.itl_s(256) == pytest.approx(gemm + attention + sampling + FIXED_8B, rel=1e-9)
    # cheaper than the decode step plus two separate prefills, each paying weights and layers
    assert m.itl_s(256) < m.step_s(256) + 2 * m.prefill_s(512)


def test_pcie_all_reduce_latency_grows_with_the_ring() -> None:
    """Without a GPU fabric each of the 2 x 80 all-reduces of Llama-3.1-70B costs the PCIe
    latency (42 us for a ring of 8, NVIDIA/nccl issue 1530) x (n - 1) / 7 + 2(n-1)/n x bytes /
    25 GB/s. One token, TP8 on L40S: 2 x 80 x (42e-6 + 2 x 7/8 x 8192 x 2 B / 25e9)."""
    acc = CAT.accelerators["l40s"]
    shape = Shape.of(CAT.models["llama-3.1-70b"])
    tp8 = _ring(Deployment(acc, 8, 8, "fp8", 0), shape).seconds(1)
    assert tp8 == pytest.approx(2 * 80 * (42e-6 + 2 * 7 / 8 * 8192 * 2 / 25e9), rel=1e-9)
    tp4 = _ring(Deployment(acc, 4, 4, "fp8", 0), shape).seconds(1)
    assert tp4 == pytest.approx(2 * 80 * (18e-6 + 2 * 3 / 4 * 8192 * 2 / 25e9), rel=1e-9)


# --- FP4 on Blackwell, KV copies under tensor parallelism, MLA's absorbed attention -------------


def test_fp4_weights_are_nvfp4_bytes_and_the_kv_cache_fp8() -> None:
    # NVFP4: 4-bit values + one FP8 scale per 16 = 4.5 bits; Llama 3.3 70B (70.6B params)
    # holds 70.6e9 x 0.5625 = 39.7 GB of weights. KV cache FP8: 2 x 80 x 8 x 128 x 1 bytes.
    m = _model("llama-3.3-70b", "b200", precision="fp4", inp=128, out=128)
    figures = {f.name: f.value for f in m.memory(1)}
    params = CAT.models["llama-3.3-70b"].params_b * 1e9
    assert figures["weights_gb"] == pytest.approx(params * 4.5 / 8 / 1e9)
    assert figures["kv_cache_bytes_per_token"] == 2 * 80 * 8 * 128 * 1
    # the GEMMs run at the dense FP4 rate, 9,000 TFLOP/s x the NVFP4 GEMM efficiency (0.40);
    # attention at the FP8 rate of its FP8 KV cache, 4,500 x Blackwell's 0.50
    assert m.peak_flops == pytest.approx(9000e12 * 0.40)
    assert m.attention_peak_flops == pytest.approx(4500e12 * EFFICIENCY[m.dep.acc.generation][0])


def test_fp4_is_refused_where_no_fp4_tensor_cores_exist() -> None:
    with pytest.raises(InputError, match="no fp4 matrix/tensor units; it runs: .*fp8"):
        _model("llama-3.1-8b", "h100-sxm", precision="fp4")


def test_gqa_kv_heads_replicate_when_tp_exceeds_them() -> None:
    # Qwen2.5-7B has 4 KV heads: at TP 8 each is cached on 2 ranks, at TP 4 once.
    tp8 = _model("qwen2.5-7b", "h100-sxm", gpus=8, tp=8, inp=1000, out=1000)
    tp4 = _model("qwen2.5-7b", "h100-sxm", gpus=4, tp=4, inp=1000, out=1000)
    assert (tp8.kv_copies, tp4.kv_copies) == (2, 1)
    kv_gb = {f.name: f for f in tp8.memory(10)}["kv_cache_gb"]
    per_token = 2 * 28 * 4 * 128 * 2  # K and V x layers x KV heads x head dim x bf16
    assert kv_gb.value == pytest.approx(per_token * 2000 * 10 * 2 / 1e9)
    assert "x 2 copies" in kv_gb.formula


def test_mla_latent_is_held_by_every_rank() -> None:
    # DeepSeek-V3 FP8 on 8 x B200: each rank holds the whole latent KV (61 layers x 576 values
    # x 1 byte per token), so a replica holds 8 copies. By hand: usable 8 x 0.9 x the GPU's
    # memory, less 671e9 weight bytes, over 8 x 35,136 bytes x 2,000 tokens per sequence.
    m = _model("deepseek-v3", "b200", gpus=8, tp=8, precision="fp8", inp=1000, out=1000)
    acc = CAT.accelerators["b200"]
    params = CAT.models["deepseek-v3"].params_b * 1e9
    free = 8 * 0.9 * acc.device_memory_gb * 1e9 - params
    assert m.kv_copies == 8
    assert m.max_concurrency() == int(free // (8 * 61 * 576 * 2000))


def test_mla_decode_attention_counts_the_absorbed_latent_dimensions() -> None:
    # One decode token over a context of L = 1000 + 500: 61 layers x 128 heads x 2 x (576 + 512)
    # FLOPs per context token (scores over latent + RoPE key, values over the latent).
    m = _model("deepseek-v3", "b200", gpus=8, tp=8, precision="fp8", inp=1000, out=1000)
    it = m.iteration(1, 0, 1000)
    assert it.attention_flops == pytest.approx(61 * 128 * 2 * (576 + 512) * 1500)


# --- load as a request rate ----------------------------------------------------------------------


def test_the_simulated_batch_holds_littles_law() -> None:
    """Sequences decoding = rate x the time each spends decoding (Little's law, L = lambda W),
    for the simulated replica at several rates."""
    m = _model("llama-3.1-8b", "h100-sxm", inp=467, out=256)
    for rate in (0.5, 2.0, 8.0, 20.0):
        load = m.under_load(rate)
        decoding_s = load.e2e.mean_s - load.ttft.mean_s
        assert load.mean_batch == pytest.approx(rate * decoding_s, rel=0.1)


def test_ttft_grows_with_the_rate_and_p99_is_above_p50() -> None:
    m = _model("llama-3.1-8b", "h100-sxm", inp=467, out=256)
    most, _ = m.max_request_rate()
    loads = [m.under_load(most * rho) for rho in (0.1, 0.5, 0.9, 0.99)]
    p50 = [load.ttft.p50_s for load in loads]
    assert p50 == sorted(p50) and p50[-1] > 2 * p50[0]
    assert all(load.ttft.p99_s >= load.ttft.p50_s for load in loads)
    assert p50[0] >= m.prefill_s(467)  # never below the idle prefill


def test_ttft_at_light_load_is_the_prefill_plus_half_an_iteration() -> None:
    # one sequence in flight: the new prompt waits half an iteration, then rides one iteration
    # beside the other sequence's decode token
    m = _model("llama-3.1-8b", "h100-sxm", inp=467, out=256)
    assert m.ttft_at_s(0) == pytest.approx(m.prefill_s(467))
    assert m.ttft_at_s(1) == pytest.approx(m.itl_s(1) / 2 + m.iteration_s(1, 467, 467))
    got = m.at_rate(0.01)
    assert got.concurrency == 1
    assert got.throughput_tokens_s == pytest.approx(0.01 * 256)


def test_a_rate_above_capacity_is_refused_with_the_most_sustained() -> None:
    m = _model("llama-3.1-8b", "h100-sxm", inp=467, out=256)
    most, at = m.max_request_rate()
    assert at <= m.max_concurrency()
    assert most == pytest.approx(at / m.e2e_s(at))
    with pytest.raises(InputError, match="queue without bound") as e:
        m.at_rate(most * 1.01)
    assert e.value.field == "request_rate"
    m.at_rate(most * 0.99)  # just below: sustained


def test_the_rate_within_targets_is_below_the_capacity() -> None:
    from advisor.perf.inference import SEARCH_REQUESTS
    from advisor.perf.targets import Targets

    m = _model("llama-3.1-8b", "h100-sxm", inp=467, out=256)
    most, _ = m.max_request_rate()
    p50 = Targets(max_ttft_ms=100, max_itl_ms=15)
    within, b = m.max_request_rate(p50)
    assert 0 < within < most and b >= 1
    held = m.under_load(within, SEARCH_REQUESTS, p50)
    assert not held.saturated and held.ttft.p50_s * 1e3 <= 100 and held.tpot.p50_s * 1e3 <= 15
    p99 = Targets(max_ttft_ms=100, max_itl_ms=15, percentile=99)
    assert m.max_request_rate(p99)[0] <= within  # the tail is held to it too: no more
    assert m.max_request_rate(Targets(max_itl_ms=1)) == (0.0, 0)  # unreachable target


def test_an_fp8_kv_cache_with_bf16_weights_doubles_the_sequences() -> None:
    """KV bytes per token halve (2 -> 1 byte a value): the memory left after the weights holds
    twice the sequences (to within one)."""
    from dataclasses import replace

    m = _model("llama-3.1-8b", "h100-sxm", inp=1000, out=1000)
    fp8 = InferenceModel(m.shape, replace(m.dep, kv_precision="fp8"), 1000, 1000)
    assert fp8.kv_precision == "fp8" and m.kv_precision == "bf16"
    assert fp8.kv_per_token.value == pytest.approx(m.kv_per_token.value / 2)
    assert abs(fp8.max_concurrency() - 2 * m.max_concurrency()) <= 1
    assert fp8.memory(1)[-1].value < m.memory(1)[-1].value


@pytest.mark.usefixtures("roofline")
def test_a_prefix_cache_hit_skips_that_share_of_the_prefill() -> None:
    """Half the prompt cached: the prefill iteration computes the GEMMs of 500 tokens, not 1000
    (the weights are read once either way)."""
    from dataclasses import replace

    m = _model("llama-3.1-8b", "h100-sxm", inp=1000, out=100)
    half = InferenceModel(m.shape, replace(m.dep, prefix_cache_hit_rate=0.5), 1000, 100)
    assert half.iteration(0, 1000, 1000).gemm_flops == pytest.approx(
        m.iteration(0, 1000, 1000).gemm_flops / 2
    )
    assert half.prefill_s(1000) < m.prefill_s(1000)
    assert half.max_concurrency() == m.max_concurrency()  # the KV is still held


def test_a_target_met_at_p50_but_not_p99_says_so() -> None:
    """At 90% of capacity the p99 TTFT is well above the p50 (bench_load's sweep): a TTFT target
    between the two is met at p50, missed at p99, and the goodput figure says which."""
    from advisor.perf.targets import Targets

    m = _model("llama-3.1-8b", "h100-sxm", inp=467, out=256)
    most, _ = m.max_request_rate()
    load = m.under_load(most * 0.9)
    between = (load.ttft.p50_s + load.ttft.p99_s) / 2 * 1e3
    p50, p99 = Targets(max_ttft_ms=between), Targets(max_ttft_ms=between, percentile=99)
    assert p50.met_under(load) and not p99.met_under(load)
    try:
        got = m.at_rate(most * 0.9, p99)
    except InputError:
        pytest.fail("a rate below capacity is answered")
    goodput = next(f for f in got.figures if f.name == "goodput_requests_s")
    assert "hold at p50 but not at p99" in goodput.formula
    assert got.ttft_ms == pytest.approx(load.ttft.p99_s * 1e3)


def test_a_burst_of_one_is_its_prefill_then_its_decode_steps_by_hand() -> None:
    # one request alone: its first token ends the iteration of its whole prompt, each later
    # token one decode iteration of a batch of one; the run lasts exactly that long
    m = _model(inp=467, out=256)
    prefill, step = m.iteration_s(0, 467, 467), m.iteration_s(1, 0, 467)
    got = m.burst(1)
    assert got.ttft.mean_s == pytest.approx(prefill, rel=1e-9)
    assert got.itl.mean_s == pytest.approx(step, rel=1e-9)
    assert got.throughput_tokens_s == pytest.approx(256 / (prefill + 255 * step), rel=1e-9)


def test_a_burst_queues_the_prompts_the_budget_cannot_take_at_once() -> None:
    # 500 prompts of 467 tokens against an 8,192-token budget: 17 prompts an iteration at most,
    # so the mean first token waits for many iterations; the last one's wait is the longest
    m = _model(inp=467, out=256)
    small, big = m.burst(2), m.burst(500)
    both = m.iteration_s(0, 2 * 467, 467)  # two prompts fit one iteration
    assert small.ttft.p99_s == pytest.approx(both, rel=1e-9)
    assert big.ttft.mean_s > 10 * small.ttft.mean_s
    assert big.ttft.p99_s > big.ttft.mean_s
    # every request of the run counts, none left out as warm-up: tokens over the whole run
    assert big.requests == 500
    assert big.throughput_tokens_s == pytest.approx(500 * 256 / big.window_s, rel=1e-9)
    with pytest.raises(ValueError, match="burst of 0"):
        m.burst(0)
