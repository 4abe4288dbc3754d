"""Each printed formula evaluated from the numbers it prints, against its value: training (full,
LoRA and QLoRA fine-tuning, pretraining across nodes) and serving (a dense model over NVLink and
over PCIe, one GPU, a mixture of experts). A formula that restates the computation in words
instead of showing its operands can drift from its value unseen; one built from the operands
cannot."""

from __future__ import annotations

import json
import re

import pytest

from tests.test_cli import run

UNITS = {"TFLOP/s": "1e12", "GB/s": "1e9", "GB": "1e9"}
TOKEN = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?|TFLOP/s|GB/s|GB|[(),+\-/x]|[A-Za-z][\w\-/]*")


def evaluate(formula: str) -> float:
    """The arithmetic of a printed formula: numbers, x + - / and parentheses, units as factors;
    bracketed derivations and words (labels, units of the result) left out."""
    text = re.sub(r"\[[^\]]*\]", "", formula)  # how an operand was derived: not an operand
    text = re.sub(r"\([a-z][^()]*\)", "", text)  # a remark in words
    text = re.sub(r"(?<=\d),(?=\d)", "", text)
    tokens = TOKEN.findall(text)
    out: list[str] = []
    for i, tok in enumerate(tokens):
        following = tokens[i + 1] if i + 1 < len(tokens) else ""
        if tok[0].isdigit():
            out.append(f"({tok}*{UNITS[following]})" if following in UNITS else tok)
        elif tok == "x":
            out.append("*")
        elif tok in "(),+-/" or tok == "max":
            out.append(tok)
    return float(eval("".join(out), {"max": max}))  # only numbers, operators and max reach eval


def figures(*args: str) -> dict[str, dict[str, object]]:
    p = run("estimate", "--json", *args)
    assert p.returncode == 0, p.stderr
    return {f["name"]: f for f in json.loads(p.stdout)["figures"]}


CASES = {
    "full fine-tuning": ["--workload", "fine_tuning", "--method", "full"],
    "LoRA": ["--workload", "fine_tuning", "--method", "lora"],
    "QLoRA": ["--workload", "fine_tuning", "--method", "qlora"],
    "pretraining on 16 nodes": ["--workload", "large_scale_training", "--gpu-count", "128"],
}
COMMON = ["--model", "llama-3-8b", "--tokens", "1e9", "--instance-type", "p5.48xlarge"]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", ["compute_s_per_step", "dp_comm_s_per_step", "mfu"])
def test_a_printed_formula_gives_its_value(case: str, name: str) -> None:
    figure = figures(*CASES[case], *COMMON)[name]
    value = figure["value"]
    assert isinstance(value, float | int) and value > 0, figure
    assert evaluate(str(figure["formula"])) == pytest.approx(value, rel=2e-3), (case, figure)


def test_lora_shows_its_own_operands() -> None:
    found = figures(*CASES["LoRA"], *COMMON)
    assert "4 x N" in str(found["compute_s_per_step"]["formula"])
    assert "the adapter gradients" in str(found["dp_comm_s_per_step"]["formula"])


SERVING = {
    "dense, TP 4 over NVLink": [
        "--model", "llama-3.1-70b", "--accelerator", "h100-sxm", "--gpu-count", "8",
        "--tensor-parallel", "4", "--precision", "fp8",
    ],
    "dense, TP 2 over PCIe": [
        "--model", "llama-3.1-8b", "--instance-type", "g6e.12xlarge", "--tensor-parallel", "2",
    ],
    "one GPU": ["--model", "llama-3.1-8b", "--accelerator", "h100-sxm", "--gpu-count", "1"],
    "mixture of experts": [
        "--model", "mixtral-8x7b", "--accelerator", "h200-sxm", "--gpu-count", "8",
        "--input-tokens", "2000", "--output-tokens", "500",
    ],
}  # fmt: skip
# Figures in GB print their formula in bytes.
SERVING_FIGURES = {
    "prefill_s": 1,
    "decode_step_s": 1,
    "itl_s": 1,
    "throughput_tokens_s": 1,
    "weights_gb": 1e9,
    "kv_cache_gb": 1e9,
}


@pytest.mark.parametrize("case", list(SERVING))
def test_a_printed_serving_formula_gives_its_value(case: str) -> None:
    found = figures("--workload", "high_throughput_inference", *SERVING[case])
    for name, scale in SERVING_FIGURES.items():
        figure = found[name]
        value = figure["value"]
        assert isinstance(value, float | int) and value > 0, figure
        printed = evaluate(str(figure["formula"]))
        assert printed == pytest.approx(value * scale, rel=2e-3), (case, figure)


def test_the_evaluator_reads_units_and_leaves_remarks_out() -> None:
    assert evaluate("2 x 3 GB / 1.5 GB/s (in words 9)") == pytest.approx(4.0)
    assert evaluate("max(6 bytes / 2 bytes/s, 1 FLOP / 1 FLOP/s) + 2 s") == pytest.approx(5.0)
    assert evaluate("1,000 FLOP [6 x 7] / (2 x 0.5 TFLOP/s)") == pytest.approx(1e-9)
