"""The model reading the shipped H200 operator table (measured on the lent H200 with
`advisor probe --ops --full`): interpolation between measured shapes, held-back grid points (on
every shipped table: the H100's too), what lies beyond the grid, and a forward pass built from
the table's own rows.

Held-back points: every interior value of one axis is removed from the grid and its rows are
predicted from the neighbours on both sides, a gap twice as wide as the grid's (4x in M, N, K,
prompt tokens, decode batch and context). The shapes the model asks for lie between adjacent
grid points, half that gap, so this is the harder test."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from advisor.catalog.loading import load_catalog
from advisor.catalog.ops import model_tables
from advisor.perf.inference import Deployment, InferenceModel
from advisor.perf.op_model import TableIteration
from advisor.perf.op_table import LogGrid, OperatorTable
from advisor.perf.sizing import Shape
from advisor.planning.estimate import estimate
from advisor.request import EstimateRequest
from probes.ops_table import OpsTable

TABLE = (
    Path(__file__).resolve().parent.parent
    / "catalog"
    / "ops"
    / "h200-sxm--torch2.11.0-cu130-driver580.json"
)


@pytest.fixture(scope="module")
def table() -> OpsTable:
    return OpsTable.model_validate_json(TABLE.read_bytes())


@pytest.fixture(
    scope="module", params=sorted(TABLE.parent.glob("*.json")), ids=lambda p: p.name.split("--")[0]
)
def each_table(request: pytest.FixtureRequest) -> OpsTable:
    """Every shipped table, one at a time."""
    return OpsTable.model_validate_json(request.param.read_bytes())


def held_back_errors(
    points: dict[tuple[float, ...], float], names: tuple[str, ...], slopes: tuple[float, ...]
) -> list[float]:
    errors = []
    for axis in range(len(names)):
        values = sorted({p[axis] for p in points})
        for held in values[1:-1]:
            kept = {p: t for p, t in points.items() if p[axis] != held}
            grid = LogGrid.build(names, kept, slopes)
            assert grid is not None
            # a shape skipped for memory shrinks the grid (LogGrid.build drops a row or column):
            # the held points it still brackets are the test (the H100's decode rows lose their
            # largest batch once the next one is held back)
            between = grid.axes[axis][0] < held < grid.axes[axis][-1]
            for p, t in points.items():
                inside = all(p[i] in grid.axes[i] for i in range(len(names)) if i != axis)
                if p[axis] == held and inside and between:
                    got = grid(p)
                    assert got.beyond == ()
                    errors.append(abs(got.seconds * 1e6 / t - 1))
    return errors


@pytest.mark.parametrize("precision", ["bf16", "fp16", "fp8"])
def test_held_back_gemm_shapes_within_10_percent(each_table: OpsTable, precision: str) -> None:
    points: dict[tuple[float, ...], float] = {
        (float(g.m), float(g.n), float(g.k)): g.median_us
        for g in each_table.gemm
        if g.precision == precision and g.groups == 1
    }
    errors = held_back_errors(points, ("M", "N", "K"), (1.0, 1.0, 1.0))
    assert len(errors) > 1000
    assert statistics.median(errors) < 0.10
    assert sum(e <= 0.10 for e in errors) / len(errors) >= 0.80


def test_held_back_prefill_attention_within_10_percent(each_table: OpsTable) -> None:
    points: dict[tuple[float, ...], float] = {
        (float(a.tokens), float(a.head_dim)): a.median_us for a in each_table.attention_prefill
    }
    errors = held_back_errors(points, ("tokens", "head dim"), (2.0, 1.0))
    assert statistics.median(errors) < 0.10


@pytest.mark.parametrize("head_dim", [64, 128])
def test_held_back_decode_attention_within_10_percent(each_table: OpsTable, head_dim: int) -> None:
    points: dict[tuple[float, ...], float] = {
        (float(a.batch), float(a.tokens)): a.median_us
        for a in each_table.attention_decode
        if a.head_dim == head_dim
    }
    errors = held_back_errors(points, ("batch", "context"), (1.0, 1.0))
    assert len(errors) > 100
    assert statistics.median(errors) < 0.10
    assert sum(e <= 0.10 for e in errors) / len(errors) >= 0.80


def test_grid_points_are_the_table_and_between_is_log_linear(table: OpsTable) -> None:
    ops = OperatorTable.of(table)
    row = next(g for g in table.gemm if (g.precision, g.m, g.n, g.k) == ("bf16", 64, 4096, 8192))
    got = ops.gemm_time("bf16", 64, 4096, 8192, loaded=False)  # the grid as measured
    assert got is not None and got.seconds == pytest.approx(row.median_us * 1e-6)
    lo = next(g for g in table.gemm if (g.precision, g.m, g.n, g.k) == ("bf16", 1024, 4096, 4096))
    hi = next(g for g in table.gemm if (g.precision, g.m, g.n, g.k) == ("bf16", 2048, 4096, 4096))
    mid = ops.gemm_time("bf16", 1024 * 2**0.25, 4096, 4096, loaded=False)
    assert mid is not None  # a quarter of the way in log M: log time a quarter of the way too
    assert mid.seconds * 1e6 == pytest.approx(lo.median_us**0.75 * hi.median_us**0.25)


def test_beyond_the_grid_is_scaled_and_said(table: OpsTable) -> None:
    ops = OperatorTable.of(table)
    edge = ops.gemm_time("bf16", 16384, 4096, 32768)
    past = ops.gemm_time("bf16", 16384, 4096, 65536)
    assert edge is not None and past is not None
    assert edge.beyond == () and past.beyond == ("K 65536 > 32768",)
    assert past.seconds == pytest.approx(2 * edge.seconds)  # GEMM time linear in K
    small = ops.gemm_time("bf16", 1, 512, 4096)  # below the smallest N: the edge's time, a floor
    floor = ops.gemm_time("bf16", 1, 1024, 4096)
    assert small is not None and floor is not None
    assert small.seconds == floor.seconds and small.beyond == ("N 512 < 1024",)
    assert ops.gemm_time("fp4", 1, 1024, 1024) is None  # not measured on the H200


def test_a_missing_row_shrinks_the_grid_to_what_is_complete() -> None:
    points: dict[tuple[float, ...], float] = {(1.0, 1.0): 1.0, (1.0, 2.0): 2.0, (2.0, 1.0): 2.0}
    # (2, 2) was skipped
    grid = LogGrid.build(("a", "b"), points, (1.0, 1.0))
    assert grid is not None
    assert grid.axes in (((1.0,), (1.0, 2.0)), ((1.0, 2.0), (1.0,)))


@pytest.fixture(autouse=True)
def tables_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model reads the shipped tables (on by default; ADVISOR_OPERATOR_TABLES=off turns them
    off): set here so that a developer's own setting does not change what these tests read."""
    monkeypatch.setenv("ADVISOR_OPERATOR_TABLES", "on")


def test_tables_are_on_unless_turned_off() -> None:
    assert model_tables({"ADVISOR_OPERATOR_TABLES": "off"}) == {}
    assert list(model_tables({})) == ["h100-sxm", "h200-sxm"]
    assert list(model_tables({"ADVISOR_OPERATOR_TABLES": "on"})) == ["h100-sxm", "h200-sxm"]


def _model(acc_id: str) -> InferenceModel:
    catalog = load_catalog()
    acc = catalog.accelerators[acc_id]
    shape = Shape.of(catalog.models["llama-3.1-8b"])
    return InferenceModel(shape, Deployment(acc, 1, 1, "bf16", acc.interconnect_gb_s), 1000, 200)


def test_a_rates_simulation_is_its_own_speeds_not_the_other_paths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same replica at the same request rate asked with the tables off, then on, in one
    process (these tests beside the roofline's; a service whose setting changes): each answer is
    simulated with its own speeds. At 0.1 requests/s a request finds the replica idle, so its
    median TTFT is its prefill alone, which the table times apart from the roofline."""
    monkeypatch.setenv("ADVISOR_OPERATOR_TABLES", "off")
    roofline = _model("h200-sxm")
    assert roofline.op_model is None
    assert roofline.at_rate(0.1).ttft_ms == pytest.approx(roofline.prefill_s(1000) * 1e3)
    monkeypatch.setenv("ADVISOR_OPERATOR_TABLES", "on")
    table = _model("h200-sxm")
    assert table.op_model is not None
    assert table.prefill_s(1000) != pytest.approx(roofline.prefill_s(1000))
    assert table.at_rate(0.1).ttft_ms == pytest.approx(table.prefill_s(1000) * 1e3)


def test_h200_passes_come_from_its_table_and_others_from_the_roofline() -> None:
    h200, a100 = _model("h200-sxm"), _model("a100-80gb-sxm")
    assert h200.op_model is not None and a100.op_model is None
    step = h200.iteration(1, 0, 1000)
    assert "operator table of h200-sxm measured 2026-12-05" in step.formula()
    # no fixed time per layer (the former 60 us): launches are in the table
    assert not re.search(r"(?<![\d.])6e-05", step.formula())
    assert "roofline" in a100.speed_source and "estimated" in a100.speed_source


def test_a_served_estimate_says_the_table_not_its_efficiency_timed_the_passes() -> None:
    """A served option reports the roofline's decode share of the memory bandwidth as its
    efficiency; on an H100, whose table times the passes, its source says the share times only
    what the table has no rows for, and on an A100 (no table) it is the roofline's alone."""
    catalog = load_catalog()
    said = "the operator table timed the passes"

    def source(acc: str) -> str:
        request = EstimateRequest(
            workload="high_throughput_inference", model="llama-3.1-8b", accelerator=acc, gpu_count=1
        )
        return estimate(catalog, request).efficiency_source

    assert said in source("h100-sxm") and said not in source("a100-80gb-sxm")
    assert source("a100-80gb-sxm") == _model("a100-80gb-sxm").efficiency_source
    assert "decode share of ampere memory bandwidth" in source("a100-80gb-sxm")


def test_decode_pays_per_sequence_attention_and_sampling() -> None:
    model = _model("h200-sxm")
    one, many = model.iteration(1, 0, 1000), model.iteration(64, 0, 1000)
    assert isinstance(one, TableIteration) and isinstance(many, TableIteration)
    # 64 sequences read 64 x the KV cache of one: attention grows with the batch
    assert many.attention_s > 4 * one.attention_s
    assert many.head_s > one.head_s  # sampling over the vocabulary per sequence
    per_layer = many.gemm_s + many.attention_s + many.memory_s + many.unexplained_s
    assert many.seconds == pytest.approx(many.layers * per_layer + many.head_s + many.ring_s)


def test_decode_attention_reads_each_sequence_at_its_own_context(table: OpsTable) -> None:
    """The table's decode rows hold 8 KV heads of 128 in bf16: 2 x 8 x 128 x 2 = 4,096 K and V
    bytes per token. 16 sequences of 1,024 tokens of a model with 256 bytes per token and GPU
    (one fp8 KV head, e.g. Llama-3.1-70B at TP 8) read the same bytes, each at the same length,
    as one of the table's sequences of 1,024 tokens: the table's own row, not a shorter context
    (which would reach a lower bandwidth: fewer tokens per thread block)."""
    ops = OperatorTable.of(table)
    row = next(
        a
        for a in table.attention_decode
        if (a.batch, a.tokens, a.head_dim, a.kv_heads) == (1, 1024, 128, 8)
    )
    got = ops.decode_time(16, 1024, 256)
    assert got is not None and got.beyond == ()
    assert got.seconds == pytest.approx(row.median_us * 1e-6)


def test_less_than_one_tables_sequence_is_the_same_bytes_at_a_shorter_context(
    table: OpsTable,
) -> None:
    """One sequence of 4,096 tokens at 512 K and V bytes per token and GPU (one FP8 KV head,
    Llama-3.1-70B at TP 8) streams 4,096 x 512 = 2.1 MB a layer: the bytes of the table's one
    sequence of 512 tokens at 4,096 bytes (8 KV heads of 128 in bf16), that row's own time; not
    the table's whole sequence of 4,096 tokens (8x the bytes)."""
    ops = OperatorTable.of(table)

    def row(tokens: int) -> float:
        return next(
            a.median_us
            for a in table.attention_decode
            if (a.batch, a.tokens, a.head_dim, a.kv_heads) == (1, tokens, 128, 8)
        )

    got = ops.decode_time(1, 4096, 512)
    assert got is not None and got.beyond == ()
    assert got.seconds == pytest.approx(row(512) * 1e-6)
    assert got.seconds < row(4096) * 1e-6


H100 = TABLE.parent / "h100-sxm--torch2.11.0-cu130-driver580.json"


def test_compute_bound_work_runs_at_the_sustained_gemms_settled_speed() -> None:
    """The H100 table's bf16 8,192 cube: its grid row against its settled time under 30 s of
    load is the factor (by hand from the file's two rows). A GEMM at a grid shape far past the
    ridge (16,384 tokens) and prefill attention are the table's time over it; one token's GEMM
    (a weight read) is the table's time as measured; a table measured before the sustained
    GEMM and the KV-cache writes reads its rows as measured and says so."""
    h100 = OpsTable.model_validate_json(H100.read_bytes())
    cube = next(g for g in h100.gemm if (g.precision, g.m, g.n, g.k) == ("bf16", 8192, 8192, 8192))
    settled = next(r for r in h100.sustained if r.phase == "settled")
    factor = cube.median_us / settled.median_us
    assert 0.8 < factor < 1.0
    ops = OperatorTable.of(h100)
    assert ops.settled == pytest.approx(factor)
    assert f"compute-bound work at {factor:.3g} of its speed" in ops.source

    def row(m: int, n: int, k: int) -> float:
        return next(
            g.median_us * 1e-6
            for g in h100.gemm
            if (g.precision, g.m, g.n, g.k, g.groups) == ("bf16", m, n, k, 1)
        )

    big = ops.gemm_time("bf16", 16384, 8192, 8192)
    one = ops.gemm_time("bf16", 1, 8192, 8192)
    assert big is not None and one is not None
    assert big.seconds == pytest.approx(row(16384, 8192, 8192) / factor)
    assert one.seconds == pytest.approx(row(1, 8192, 8192))
    prompt = next(a for a in h100.attention_prefill if a.head_dim == 128)
    got = ops.prefill_time(prompt.tokens, prompt.heads, 128)
    assert got is not None and got.seconds == pytest.approx(prompt.median_us * 1e-6 / factor)
    shipped = OpsTable.model_validate_json(TABLE.read_bytes())
    older = shipped.model_copy(  # as the H200's table was before the two were measured
        update={
            "sustained": [],
            "memory_ops": [r for r in shipped.memory_ops if r.op != "kv_write"],
        }
    )
    before = OperatorTable.of(older)
    assert before.settled == 1.0 and "no sustained GEMM: rows as measured" in before.source
    assert "no KV-cache write rows: not counted" in before.source
    assert OperatorTable.of(shipped).settled < 1.0


def test_a_precision_of_grouped_gemms_only_has_no_grid() -> None:
    """A table whose bf16 GEMMs are all batched experts (a fleet's partial table, say) builds,
    and has no plain bf16 GEMM to interpolate."""
    h100 = OpsTable.model_validate_json(H100.read_bytes())
    grouped = h100.model_copy(
        update={"gemm": [g for g in h100.gemm if g.precision != "bf16" or g.groups > 1]}
    )
    ops = OperatorTable.of(grouped)
    assert ops.gemm_time("bf16", 16, 4096, 4096) is None
    assert ops.gemm_time("fp8", 16, 4096, 4096) is not None


def test_a_pass_stores_its_tokens_keys_and_values() -> None:
    """8B at TP 1 on the H100, 1,024 decode tokens, 2,048 bytes of K and V per token and layer
    (8 KV heads x 128 x 2 x 1 byte, an FP8 cache): the pass's memory-bound time holds the
    table's kv_write row of 1,024 tokens x 1,024 16-bit elements, by the difference of the same
    pass with and without those bytes (a token of no K and V bytes writes the narrowest row)."""
    from advisor.perf.op_model import Geometry, OpModel

    h100 = OpsTable.model_validate_json(H100.read_bytes())
    row = next(
        r.median_us * 1e-6
        for r in h100.memory_ops
        if (r.op, r.tokens, r.width) == ("kv_write", 1024, 1024)
    )
    floor = next(
        r.median_us * 1e-6
        for r in h100.memory_ops
        if (r.op, r.tokens, r.width) == ("kv_write", 1024, 256)
    )
    geo = Geometry.of(Shape.of(load_catalog().models["llama-3.1-8b"]), 1, None)
    assert isinstance(geo, Geometry)
    model = OpModel(OperatorTable.of(h100), geo, "bf16")

    def memory_s(kv_bytes: float) -> float:
        it = model.iteration(1024, 0, 1, 2048, kv_bytes, (0.0, ""), lambda t: 1.0)
        return it.memory_s

    assert memory_s(2048) - memory_s(1.0) == pytest.approx(row - floor)


def test_a_decode_gemm_is_the_tables_own_time_at_a_grid_shape(table: OpsTable) -> None:
    """M = 16 tokens, N = K = 4096: the grid point itself (no interpolation) is what the pass
    adds for such a GEMM: checked through the table the model holds."""
    model = _model("h200-sxm")
    assert model.op_model is not None
    row = next(g for g in table.gemm if (g.precision, g.m, g.n, g.k) == ("bf16", 16, 4096, 4096))
    got = model.op_model.ops.gemm_time("bf16", 16, 4096, 4096)
    assert got is not None and got.seconds == pytest.approx(row.median_us * 1e-6)


@pytest.mark.parametrize(
    ("accelerator", "named"),
    [
        ("h200-sxm", "operator table of h200-sxm measured 2026-12-05"),
        ("h100-sxm", "operator table of h100-sxm measured 2026-12-05"),
        (
            "a100-80gb-sxm",
            "roofline: NVIDIA A100 SXM4 80GB datasheet peaks x estimated efficiencies",
        ),
    ],
)
def test_every_serving_figure_says_where_its_speed_came_from(accelerator: str, named: str) -> None:
    """An estimate's timing figures (prefill, decode step, ITL, throughput, and the simulated
    load's) each name the speeds they were computed with, and so does the estimate (JSON)."""
    got = estimate(
        load_catalog(),
        EstimateRequest(
            workload="low_latency_inference",
            model="llama-3.1-8b",
            accelerator=accelerator,
            gpu_count=1,
        ),
    )
    assert got.speed_source is not None and got.speed_source.startswith(
        named.split(" x ", maxsplit=1)[0]
    )
    assert named in got.model_dump(mode="json")["speed_source"]
    # the tokens served at a request rate are the rate's own (rate x output tokens): no speed
    timing = [
        f for f in got.figures if f.unit in ("s", "tokens/s") and "requests/s x" not in f.formula
    ]
    assert {f.name for f in timing} >= {"prefill_s", "decode_step_s", "itl_s", "ttft_p99_s"}
    for f in timing:
        assert named.split(" datasheet", maxsplit=1)[0] in f.formula, f.name


# All-reduces between two H200s joined by NVLink, measured by the team through torch.distributed
# (docs/reference-figures.md section 1): bus bandwidth in GB/s by buffer size. With two ranks
# bus bandwidth = algorithm bandwidth, so one call takes bytes / busbw.
TWO_H200_ALL_REDUCE = {
    8 << 20: 92.0,
    64 << 20: 207.0,
    256 << 20: 277.0,
    1 << 30: 313.0,
    4 << 30: 337.0,
}


@pytest.fixture
def with_collectives(table: OpsTable, monkeypatch: pytest.MonkeyPatch) -> OpsTable:
    """The shipped H200 table with the two-GPU all-reduce rows the lent machine could not
    measure (one GPU), put first among the model's tables."""
    from advisor.perf import op_model
    from probes.ops_table import CollectiveRow

    rows = [
        CollectiveRow(
            op="all_reduce",
            ranks=2,
            bytes=nbytes,
            busbw_gb_s=busbw,
            median_us=nbytes / (busbw * 1e9) * 1e6,
            iqr_us=0.0,
            cv=0.0,
        )
        for nbytes, busbw in TWO_H200_ALL_REDUCE.items()
    ]
    both = table.model_copy(update={"collectives": rows})
    monkeypatch.setattr(op_model, "TABLES", [lambda: {"h200-sxm": both}])
    return both


def test_tensor_parallel_all_reduces_come_from_the_tables_collectives(
    with_collectives: OpsTable,
) -> None:
    catalog = load_catalog()
    acc = catalog.accelerators["h200-sxm"]
    shape = Shape.of(catalog.models["llama-3.1-70b"])
    model = InferenceModel(shape, Deployment(acc, 2, 2, "bf16", acc.interconnect_gb_s), 8192, 256)
    prefill = model.iteration(0, 8192, 8192)
    assert isinstance(prefill, TableIteration)
    # 8,192 tokens x 8,192 hidden x 2 bytes = 128 MiB a call, halfway in log bytes between the
    # 64 MiB and 256 MiB rows: the geometric mean of their times, 2 calls a layer, 80 layers
    t64 = (64 << 20) / 207e9
    t256 = (256 << 20) / 277e9
    assert prefill.ring_s == pytest.approx(2 * 80 * (t64 * t256) ** 0.5, rel=1e-9)
    assert "over 2 GPUs (the operator table's)" in prefill.ring_formula
    # one decode token: 16 KiB, below the smallest row: that row's time, a floor, and said so
    decode = model.iteration(1, 0, 8192)
    assert isinstance(decode, TableIteration)
    assert decode.ring_s == pytest.approx(2 * 80 * (8 << 20) / 92e9, rel=1e-9)
    assert "bytes 16384 < 8.38861e+06" in decode.ring_formula
    # beyond the largest: linear in bytes (the bandwidth-bound regime)
    ops = OperatorTable.of(with_collectives)
    past = ops.collective_time("all_reduce", 2, 8 << 30)
    assert past is not None and past.seconds == pytest.approx(2 * (4 << 30) / 337e9, rel=1e-9)
    # another group size than the table's: the ring model, as without a table
    four = InferenceModel(shape, Deployment(acc, 4, 4, "bf16", acc.interconnect_gb_s), 8192, 256)
    step = four.iteration(0, 8192, 8192)
    assert isinstance(step, TableIteration) and "GB/s" in step.ring_formula
    assert ops.collective_time("all_reduce", 4, 1 << 20) is None
