"""Measured serving runs read from the result files of three load generators, compared with the
performance model, and the bounded correction they support.

Formats, as the tools write them:
- `vllm bench serve --save-result`: one JSON object; top level `model_id`, `num_prompts`,
  `request_rate` (a number or "inf"), `max_concurrency` (null without a cap), then the metrics:
  `completed`, `total_input_tokens`, `total_output_tokens`, `output_throughput` (tokens/s),
  `median_ttft_ms`, `median_tpot_ms`, `median_itl_ms` (and mean_/std_/p99_ forms);
- NVIDIA AIPerf `profile_export_aiperf.json`: one object of metrics, each `{"unit", "avg",
  "p50", ...}`: `time_to_first_token`, `inter_token_latency` (ms), `output_token_throughput`
  (tokens/sec), `input_sequence_length`, `output_sequence_length` (tokens), and `input_config`
  with `endpoint.model_names` and `loadgen.concurrency` or `loadgen.request_rate`;
- GuideLLM's report (`benchmarks.json`): `benchmarks`, a list, each with `metrics` whose entries
  are status distributions `{"successful": {"mean", "median", ...}, ...}`:
  `time_to_first_token_ms`, `inter_token_latency_ms`, `output_tokens_per_second`,
  `prompt_token_count`, `output_token_count`, `request_concurrency`; the model under `args`.

A run is compared at the load it ran under: a concurrency cap (the model at that concurrency) or
a request rate (the model at that rate, Little's law), with the run's mean input and output
lengths. TTFT and ITL are compared on medians, throughput on output tokens/s.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from advisor.errors import InputError

Tool = Literal["vllm", "aiperf", "guidellm"]
FACTOR_BOUNDS = (0.5, 2.0)  # a correction outside this says the run is not the configuration asked


@dataclass(frozen=True)
class MeasuredRun:
    source: str  # the file (and the benchmark's index within it)
    tool: Tool
    model: str | None
    input_tokens: float
    output_tokens: float
    concurrency: float | None
    request_rate: float | None
    ttft_ms: float | None
    itl_ms: float | None
    throughput_tokens_s: float | None


def detect(data: Any) -> Tool:
    """Which tool wrote `data`; InputError naming what a result file of each one holds."""
    if isinstance(data, dict):
        if isinstance(data.get("benchmarks"), list):
            return "guidellm"
        if isinstance(data.get("time_to_first_token"), dict) or "input_config" in data:
            return "aiperf"
        if "median_ttft_ms" in data or "output_throughput" in data:
            return "vllm"
    raise InputError(
        "not a result file of vllm bench serve (median_ttft_ms, output_throughput), AIPerf "
        "(profile_export_aiperf.json: time_to_first_token, input_config) or GuideLLM "
        "(benchmarks.json: benchmarks)",
        field="files",
    )


def read_runs(data: Any, source: str) -> list[MeasuredRun]:
    tool = detect(data)
    readers: dict[Tool, Callable[[dict[str, Any], str], list[MeasuredRun]]] = {
        "vllm": _vllm,
        "aiperf": _aiperf,
        "guidellm": _guidellm,
    }
    try:
        return readers[tool](data, source)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise InputError(f"{source}: a {tool} result without {exc}", field="files") from None


def _number(value: Any) -> float | None:
    if value is None or value == "inf":
        return None
    out = float(value)
    return out if math.isfinite(out) else None


def _vllm(data: dict[str, Any], source: str) -> list[MeasuredRun]:
    done = float(data["completed"])
    return [
        MeasuredRun(
            source,
            "vllm",
            data.get("model_id"),
            float(data["total_input_tokens"]) / done,
            float(data["total_output_tokens"]) / done,
            _number(data.get("max_concurrency")),
            _number(data.get("request_rate")),
            _number(data.get("median_ttft_ms")),
            _number(data.get("median_itl_ms")),
            _number(data.get("output_throughput")),
        )
    ]


def _stat(data: Mapping[str, Any], name: str, key: str = "p50") -> float | None:
    metric = data.get(name)
    return _number(metric.get(key, metric.get("avg"))) if isinstance(metric, dict) else None


def _aiperf(data: dict[str, Any], source: str) -> list[MeasuredRun]:
    config = data.get("input_config") or {}
    loadgen = config.get("loadgen") or {}
    names = (config.get("endpoint") or {}).get("model_names") or [None]
    return [
        MeasuredRun(
            source,
            "aiperf",
            names[0],
            float(_stat(data, "input_sequence_length", "avg") or "nan"),
            float(_stat(data, "output_sequence_length", "avg") or "nan"),
            _number(loadgen.get("concurrency")),
            _number(loadgen.get("request_rate")),
            _stat(data, "time_to_first_token"),
            _stat(data, "inter_token_latency"),
            _stat(data, "output_token_throughput", "avg"),
        )
    ]


def _ok(metrics: Mapping[str, Any], name: str, key: str) -> float | None:
    summary = (metrics.get(name) or {}).get("successful") or {}
    return _number(summary.get(key))


def _guidellm(data: dict[str, Any], source: str) -> list[MeasuredRun]:
    runs = []
    model = (data.get("args") or {}).get("model")
    for i, bench in enumerate(data["benchmarks"]):
        m = bench["metrics"]
        runs.append(
            MeasuredRun(
                f"{source}#{i}",
                "guidellm",
                model,
                float(_ok(m, "prompt_token_count", "mean") or "nan"),
                float(_ok(m, "output_token_count", "mean") or "nan"),
                _ok(m, "request_concurrency", "mean"),
                None,
                _ok(m, "time_to_first_token_ms", "median"),
                _ok(m, "inter_token_latency_ms", "median"),
                _ok(m, "output_tokens_per_second", "mean"),
            )
        )
    return runs


@dataclass(frozen=True)
class Comparison:
    source: str
    metric: str  # ttft_ms, itl_ms, throughput_tokens_s
    predicted: float
    measured: float

    @property
    def ratio(self) -> float:
        """Predicted / measured."""
        return self.predicted / self.measured


@dataclass(frozen=True)
class Correction:
    """measured / predicted ITL for this accelerator x engine: the geometric mean over the runs,
    bounded to FACTOR_BOUNDS; `held_out` is each run's ITL error after the factor fitted on the
    other runs only (leave-one-out), the test that the correction generalises."""

    factor: float
    bounded: bool
    runs: int
    held_out: tuple[tuple[str, float], ...]


def _geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def _bound(x: float) -> float:
    return min(max(x, FACTOR_BOUNDS[0]), FACTOR_BOUNDS[1])


def correction(comparisons: list[Comparison]) -> Correction | None:
    """The bounded ITL factor and leave-one-out residuals; None without an ITL comparison."""
    itl = [c for c in comparisons if c.metric == "itl_ms"]
    if not itl:
        return None
    ratios = [c.measured / c.predicted for c in itl]
    raw = _geomean(ratios)
    held: list[tuple[str, float]] = []
    if len(itl) > 1:
        for i, c in enumerate(itl):
            others = _bound(_geomean(ratios[:i] + ratios[i + 1 :]))
            held.append((c.source, c.predicted * others / c.measured - 1))
    return Correction(_bound(raw), _bound(raw) != raw, len(itl), tuple(held))
