"""Each printed training formula evaluated from the numbers it prints, against its value (issue
23 item 4): full, LoRA and QLoRA fine-tuning and pretraining across nodes. A formula
that restates the computation instead of showing its operands drifts from it (LoRA printed "6 x N"
and the full model's gradients while its value used 4ND + 6AD and the adapters')."""

from __future__ import annotations

import json
import re

import pytest

from tests.test_cli import run

UNITS = {"TFLOP/s": "1e12", "GB/s": "1e9", "GB": "1e9"}
TOKEN = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?|TFLOP/s|GB/s|GB|[()+\-/x]|[A-Za-z][\w\-/]*")


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
        elif tok in "()+-/":
            out.append(tok)
    return float(eval("".join(out)))  # only numbers and operators reach eval


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
    assert "adapter gradients" in str(found["dp_comm_s_per_step"]["formula"])


def test_the_evaluator_reads_units_and_leaves_remarks_out() -> None:
    assert evaluate("2 x 3 GB / 1.5 GB/s (in words 9)") == pytest.approx(4.0)
    assert evaluate("1,000 FLOP [6 x 7] / (2 x 0.5 TFLOP/s)") == pytest.approx(1e-9)
