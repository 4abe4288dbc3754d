"""`advisor probe --ops` on the CPU: the tiny plan's table, its file, and the collectives over
two local gloo ranks. Timings are not asserted (they depend on the machine); shapes, counts and
the arithmetic of the derived figures are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from probes import ops
from probes.device import TorchDevice
from probes.ops_run import measure_collectives, measure_table
from probes.ops_table import ROW_SECTIONS, OpsReport, OpsTable, dumps

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny() -> OpsTable:
    return measure_table("tiny", None)


def test_tiny_table_covers_the_plan(tiny: OpsTable) -> None:
    plan = ops.PLANS["tiny"]
    plain = [g for g in tiny.gemm if g.groups == 1]
    assert len(plain) == len(plan.precisions) * len(plan.gemm_m) * len(plan.gemm_nk) ** 2
    assert {(g.m, g.n, g.k) for g in plain if g.precision == "fp32"} == {
        (m, n, k) for m in plan.gemm_m for n in plan.gemm_nk for k in plan.gemm_nk
    }
    assert [a.tokens for a in tiny.attention_prefill] == list(plan.prefill_tokens)
    assert len(tiny.attention_decode) == len(plan.decode_batch) * len(plan.decode_context)
    assert [(a.tokens, a.heads, a.head_dim) for a in tiny.attention_train] == [
        (s, plan.heads, d) for d in plan.head_dims for s in plan.train_tokens
    ]
    assert all(a.median_us > 0 for a in tiny.attention_train)
    assert [(a.tokens, a.heads, a.head_dim) for a in tiny.attention_ring] == [
        (s, plan.heads, d) for d in plan.head_dims for s in plan.train_tokens
    ]
    assert all(a.median_us > 0 for a in tiny.attention_ring)
    assert {r.op for r in tiny.memory_ops} == {
        "rms_norm",
        "silu_mul",
        "rotary",
        "residual_add",
        "sampling",
        "kv_write",
    }
    assert [(r.tokens, r.width) for r in tiny.memory_ops if r.op == "kv_write"] == [
        (t, w) for w in plan.kv_widths for t in plan.memory_tokens
    ]
    assert [(r.phase, r.m, r.precision, r.seconds) for r in tiny.sustained] == [
        ("first", plan.sustain[0], plan.precisions[0], plan.sustain_s),
        ("settled", plan.sustain[0], plan.precisions[0], plan.sustain_s),
    ]
    assert all(r.median_us > 0 for r in tiny.sustained)
    assert [r.name for r in tiny.launch] == ["kernel", "layer"]
    assert all(r.median_us > 0 for r in tiny.gemm)
    assert tiny.stack.torch == torch.__version__ and tiny.stack.cuda is None
    assert tiny.notes == []


def test_file_round_trips_one_row_a_line(tiny: OpsTable, tmp_path: Path) -> None:
    text = dumps(tiny)
    assert OpsTable.model_validate_json(text) == tiny
    lines = text.splitlines()
    rows = sum(
        len(getattr(tiny, s))
        for s in ROW_SECTIONS  # (a table of one CPU has no collectives)
    )
    assert sum(1 for line in lines if line.startswith("    {")) == rows
    data = json.loads(text)
    data["gemm"][0]["flops"] = 1.0
    with pytest.raises(ValidationError, match="flops"):
        OpsTable.model_validate(data)


def test_unsupported_precision_is_noted_not_measured() -> None:
    dev = TorchDevice(torch, None)
    assert ops.supported(dev, "fp8") is not None
    assert ops.supported(dev, "bf16") is None


def test_rotation_exceeds_the_cache() -> None:
    made: list[int] = []

    def make() -> int:
        made.append(1)
        return len(made)

    nxt = ops.rotating(make, ops.ROTATE_BYTES / 4)
    assert len(made) == 4
    assert [nxt() for _ in range(5)] == [2, 3, 4, 1, 2]


def test_collectives_over_two_gloo_ranks() -> None:
    rows = measure_collectives(2, "tiny", cuda=False)
    assert {(r.op, r.bytes) for r in rows} == {
        (op, size)
        for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
        for size in (1 << 12, 1 << 16)
    }
    for r in rows:
        factor = 1.0 if r.op == "all_reduce" else 0.5  # 2(n-1)/n and (n-1)/n at n = 2
        algbw = r.bytes / (r.median_us * 1e-6) / 1e9
        assert r.busbw_gb_s == pytest.approx(algbw * factor, rel=1e-6)


def test_cli_probe_ops_writes_the_table_and_catalog_ops_lists_it(tmp_path: Path) -> None:
    from tests.test_cli import run

    out, spool = tmp_path / "ops.json", tmp_path / "spool"
    p = run(
        "probe",
        "--ops",
        "--output",
        str(out),
        # nothing listens on port 9 (discard): the table is kept in the spool for the next run
        "--report-to",
        "http://127.0.0.1:9",
        "--spool-dir",
        str(spool),
        env={"CUDA_VISIBLE_DEVICES": ""},
    )
    assert p.returncode == 0, p.stderr
    (kept,) = (spool / "ops-tables").glob("*.json")
    posted = OpsReport.model_validate_json(kept.read_text())
    assert posted.table == OpsTable.model_validate_json(out.read_text())
    assert posted.host == posted.table.stack.machine  # the host that measured it
    assert "probe: ops gemm fp32" in p.stderr  # progress on stderr
    assert "operator table (tiny)" in p.stdout
    table = OpsTable.model_validate_json(out.read_text())
    assert table.mode == "tiny" and table.gemm
    listed = run("catalog", "ops", "--json")
    assert listed.returncode == 0, listed.stderr
    (h200,) = [t for t in json.loads(listed.stdout) if t["accelerator"] == "h200-sxm"]
    assert h200["rows"]["gemm"] == 1644 and h200["precisions"] == ["bf16", "fp16", "fp8"]
    assert h200["used"] is True  # on unless ADVISOR_OPERATOR_TABLES=off
    off = run("catalog", "ops", "h200-sxm", "--json", env={"ADVISOR_OPERATOR_TABLES": "off"})
    assert json.loads(off.stdout)[0]["used"] is False
    bad = run("catalog", "ops", "h200")
    assert bad.returncode == 2 and "h200-sxm" in bad.stderr


def test_cli_probe_ops_refuses_the_verification_probes_options() -> None:
    from tests.test_cli import run

    p = run("probe", "--ops", "--nodes", "2", "--burn", "1s")
    assert p.returncode == 2
    assert "drop --burn, --nodes" in p.stderr
