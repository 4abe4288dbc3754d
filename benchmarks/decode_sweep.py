"""Step time against batch: what each decode sequence adds to a step.

1. Llama 3.1 405B FP8 on 8 x MI300X (TP 8), 128 in / 128 out: the model's decode step (B
   sequences, no prompt) and its in-flight ITL at B = 1 ... 256, each against B = 1. The model
   alone: the published MI300X sweeps of this configuration are held out from calibration.
2. The same on 8 x H200, by the roofline and by the H200's operator table
   (the default; ADVISOR_OPERATOR_TABLES=off for the roofline): the table's per-sequence part
   is its decode attention over every layer plus the output head and sampling.
3. The allowed published sweep: NVIDIA NIM 1.8.0, Llama 3.3 70B FP8 on 2 x H100 (TP 2), 5,000
   in / 500 out, AIPerf at 1, 50 and 250 requests in flight (tests/data/published-3.yaml): the
   model's ITL beside the published one, and the growth from 1 to 50 and 250.

Where the model splits its step (advisor/perf/inference.py Iteration), the per-sequence part is
printed too: each sequence's KV read at its context and its sampling over the vocabulary.

    PYTHONPATH=. python benchmarks/decode_sweep.py
"""

from __future__ import annotations

import os
from typing import Any

import yaml

from advisor.catalog.loading import load_catalog
from advisor.perf.inference import Deployment, InferenceModel, moe_of
from advisor.perf.sizing import Shape
from benchmarks.calibration_rows import DATA_DIR

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def _model(model: str, acc_id: str, gpus: int, precision: str, inp: int, out: int) -> Any:
    cat = load_catalog()
    preset, acc = cat.models[model], cat.accelerators[acc_id]
    dep = Deployment(acc, gpus, gpus, precision, acc.interconnect_gb_s)
    moe = moe_of(preset.experts, preset.experts_per_token)
    return InferenceModel(Shape.of(preset), dep, inp, out, moe)


def _per_sequence_s(it: Any) -> str:
    """The per-sequence part of a roofline step (KV read + sampling), when the model has it."""
    kv = getattr(it, "kv_bytes", None)
    sampling = getattr(it, "sampling_bytes", None)
    if kv is None or sampling is None:
        return "-"
    return f"{(kv + sampling) / it.bandwidth_bytes_s * 1e3:.3f}"


def mi300x_sweep() -> list[str]:
    m = _model("llama-3.1-405b", "mi300x", 8, "fp8", 128, 128)
    base_step, base_itl = m.step_s(1), m.itl_s(1)
    lines = [
        "## Llama 3.1 405B FP8, 8 x MI300X TP 8, 128/128: the model's step against batch",
        f"{'batch':>6} {'step ms':>9} {'x B=1':>7} {'ITL ms':>9} {'x B=1':>7} {'per-seq ms':>11}",
    ]
    for b in BATCHES:
        step, itl = m.step_s(b), m.itl_s(b)
        lines.append(
            f"{b:>6} {step * 1e3:9.3f} {step / base_step:7.2f} {itl * 1e3:9.3f} "
            f"{itl / base_itl:7.2f} {_per_sequence_s(m.iteration(b, 0, m.inp)):>11}"
        )
    return lines


def h200_sweep() -> list[str]:
    """405B FP8 128/128 on 8 x H200: roofline, then the table path, step against batch."""
    lines = [
        "## Llama 3.1 405B FP8, 8 x H200 TP 8, 128/128: roofline and operator table",
        f"{'batch':>6} {'roof ms':>9} {'x B=1':>7} {'table ms':>9} {'x B=1':>7} "
        f"{'table per-seq ms':>16}",
    ]
    held = os.environ.get("ADVISOR_OPERATOR_TABLES")
    try:
        os.environ["ADVISOR_OPERATOR_TABLES"] = "off"
        roof = _model("llama-3.1-405b", "h200-sxm", 8, "fp8", 128, 128)
        os.environ["ADVISOR_OPERATOR_TABLES"] = "on"
        table = _model("llama-3.1-405b", "h200-sxm", 8, "fp8", 128, 128)
    finally:
        os.environ.pop("ADVISOR_OPERATOR_TABLES")
        if held is not None:
            os.environ["ADVISOR_OPERATOR_TABLES"] = held
    if table.op_model is None:
        return [*lines, "(no operator table used)"]
    r1, t1 = roof.step_s(1), table.step_s(1)
    for b in BATCHES:
        it = table.iteration(b, 0, table.inp)
        per_seq = it.layers * it.attention_s + it.head_s
        lines.append(
            f"{b:>6} {roof.step_s(b) * 1e3:9.3f} {roof.step_s(b) / r1:7.2f} "
            f"{it.seconds * 1e3:9.3f} {it.seconds / t1:7.2f} {per_seq * 1e3:16.3f}"
        )
    return lines


def nim_sweep() -> list[str]:
    rows = yaml.safe_load((DATA_DIR / "published-3.yaml").read_text())["inference"]
    sweep = [r for r in rows if str(r["id"]).startswith("nim180-l33-70b-2xh100-fp8-tp2-5000x500")]
    m = _model("llama-3.3-70b", "h100-sxm", 2, "fp8", 5000, 500)
    lines = [
        "## NIM 1.8.0 Llama 3.3 70B FP8, 2 x H100 TP 2, 5000/500 (published-3.yaml): ITL",
        f"{'in flight':>9} {'model ms':>9} {'published':>9} {'ratio':>6} "
        f"{'model x c1':>10} {'pub x c1':>8} {'per-seq ms':>11}",
    ]
    first: tuple[float, float] | None = None
    for r in sweep:
        c = int(r["concurrency"])
        itl = m.itl_s(min(c, m.max_concurrency())) * 1e3
        first = first or (itl, float(r["itl_ms"]))
        lines.append(
            f"{c:>9} {itl:9.2f} {r['itl_ms']:9.2f} {itl / r['itl_ms']:6.3f} "
            f"{itl / first[0]:10.2f} {r['itl_ms'] / first[1]:8.2f} "
            f"{_per_sequence_s(m.iteration(c, 0, m.inp)):>11}"
        )
    return lines


def main() -> None:
    print("\n".join([*mi300x_sweep(), *h200_sweep(), *nim_sweep()]))


if __name__ == "__main__":
    main()
