"""DeepSeek-V3 served with expert parallelism on 16 and 72 H100s (AWS p5.48xlarge nodes: 8 GPUs,
NVLink 900 GB/s, 3,200 Gb/s of network = 50 GB/s a GPU), aggregated against disaggregated
(advisor/perf/moe_serving.py, advisor/perf/disaggregated.py), set beside the published figures
it was not fitted to:

- DeepEP README (github.com/deepseek-ai/DeepEP), low-latency kernels on H800 + 400 Gb/s CX7 (pure
  RDMA, also inside a node: the EP 8 row is not the NVLink path the model takes there),
  128 tokens, top-8, hidden 7,168: dispatch + combine 77 + 114 us at EP 8, 118 + 195 at EP 16,
  155 + 273 at EP 32, 173 + 314 at EP 64;
- SGLang's DeepSeek deployment on 96 H100s (lmsys.org blog 2025-05-05): 2,000-token inputs,
  prefill 52.3k input tokens/s per node, decode 22.3k output tokens/s per node (9 decode nodes).

The calibration files hold no DeepSeek or wide-EP row; their MoE rows (Mixtral 8x7B, TP inside one
node) are bench_calibration.py's.

    PYTHONPATH=. python benchmarks/bench_moe_serving.py
"""

from __future__ import annotations

from advisor.catalog.loading import load_catalog
from advisor.perf.disaggregated import compare, prefill_requests_s
from advisor.perf.moe_serving import EpLayout, EpModel
from advisor.perf.sizing import Shape

DEEPEP_US = {8: 77 + 114, 16: 118 + 195, 32: 155 + 273, 64: 173 + 314}
SGLANG_DECODE_PER_GPU = 22_300 / 8
SGLANG_PREFILL_PER_GPU = 52_300 / 8
ITL_TARGET_S = 0.05
LENGTHS = [(2000, 100), (1000, 1000), (200, 2000)]


def main() -> None:
    cat = load_catalog()
    v3 = Shape.of(cat.models["deepseek-v3"])
    h100 = cat.accelerators["h100-sxm"]
    link = h100.interconnect_gb_s

    print("All-to-all of 128 tokens a GPU (dispatch + combine, one layer), imbalance 1:")
    for ep, measured in DEEPEP_US.items():
        model = EpModel(v3, h100, "fp8", EpLayout(ep, 8, 1, 50.0, link, 1.0), 2000, 100)
        got = model.all_to_all_s(128) * 1e6
        print(f"  EP {ep:3d}: model {got:6.0f} us  DeepEP {measured:4d} us  x{got / measured:.2f}")

    decode = EpModel(v3, h100, "fp8", EpLayout(72, 8, 1, 50.0, link), 2000, 100, False)
    best = decode.best(None)
    assert best is not None
    per_gpu = decode.tokens_per_gpu_s(best[0])
    print(
        f"Decode, 72 H100s, EP 72, DP attention, 2000 in: {per_gpu:.0f} output tokens/s a GPU "
        f"at {best[0]} sequences a GPU, ITL {best[1] * 1e3:.0f} ms; SGLang "
        f"{SGLANG_DECODE_PER_GPU:.0f} (x{per_gpu / SGLANG_DECODE_PER_GPU:.2f})"
    )
    prefill = EpModel(v3, h100, "fp8", EpLayout(32, 8, 1, 50.0, link), 2000, 100, False)
    tokens = prefill_requests_s(prefill) * 2000 / 32
    print(
        f"Prefill, 32 H100s, EP 32, 2000 in: {tokens:.0f} input tokens/s a GPU; SGLang "
        f"{SGLANG_PREFILL_PER_GPU:.0f} (x{tokens / SGLANG_PREFILL_PER_GPU:.2f}; no two-batch "
        "overlap modelled)"
    )

    for gpus in (16, 72):
        for io in LENGTHS:
            got = compare(v3, h100, "fp8", EpLayout(gpus, 8, 1, 50.0, link), io, ITL_TARGET_S)
            print(f"\n{gpus} H100s, {io[0]} in / {io[1]} out, ITL <= {ITL_TARGET_S * 1e3:g} ms:")
            for served in (got.aggregated, got.disaggregated):
                if served is not None:
                    print(
                        f"  {served.kind}: {served.requests_s:.1f} req/s, "
                        f"{served.output_tokens_per_gpu_s:.0f} output tokens/s a GPU; "
                        f"{served.detail}"
                    )
            print(f"  -> {got.why()}")


if __name__ == "__main__":
    main()
