"""A request field is declared once, on its request model (advisor/request.py): the command
line's option (flag, short flag, help, panel, default), the HTTP body and the field groups the
cross-field rules read are all derived from that one declaration."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
import typer
from pydantic import Field
from typer.testing import CliRunner

from advisor.cli import sizing_opts
from advisor.cli.estimate_cmd import estimate_cmd
from advisor.cli.recommend_cmd import recommend
from advisor.errors import InputError, flag_name
from advisor.request import (
    FROM_A_MODEL,
    SERVING,
    SERVING_FIELDS,
    TRAINING,
    TRAINING_ONLY,
    WORK,
    Cli,
    EstimateRequest,
    RecommendRequest,
    SizedWork,
    SizesWork,
    parse_request,
)


def _options(command: Any) -> dict[str, Any]:
    """The options Typer builds for one command function, by parameter name."""
    app = typer.Typer(add_completion=False)
    app.command()(command)
    built = typer.main.get_command(app)
    return {p.name: p for p in built.params if p.name}


# The flags the README, DESIGN's CLI contract and earlier releases use, written out by hand:
# every one must still be there, with the same short flag.
RECOMMEND_FLAGS = {
    "workload": ["--workload", "-w"],
    "memory_gb": ["--memory-gb"],
    "power_budget_w": ["--power-budget-w"],
    "interconnect_gb_s": ["--interconnect-gb-s"],
    "region": ["--region", "-r"],
    "provider": ["--provider", "-P"],
    "max_hourly_usd": ["--max-hourly-usd"],
    "purchase": ["--purchase", "-p"],
    "gpu_count": ["--gpu-count", "-g"],
    "objective": ["--objective", "-o"],
    "limit": ["--limit", "-n"],
    "model": ["--model", "-m"],
    "deadline_days": ["--deadline-days"],
    "max_ttft_ms": ["--max-ttft-ms"],
    "max_itl_ms": ["--max-itl-ms"],
    "throughput_tokens_s": ["--throughput-tokens-s"],
    "json_out": ["--json", "-j"],
}
ESTIMATE_FLAGS = {
    "workload": ["--workload", "-w"],
    "model": ["--model", "-m"],
    "params_b": ["--params-b"],
    "instance_type": ["--instance-type", "-i"],
    "accelerator": ["--accelerator", "-a"],
    "gpu_count": ["--gpu-count", "-g"],
    "tokens": ["--tokens"],
    "method": ["--method"],
    "tensor_parallel": ["--tensor-parallel"],
    "precision": ["--precision"],
    "input_tokens": ["--input-tokens"],
    "output_tokens": ["--output-tokens"],
    "concurrency": ["--concurrency"],
    "max_itl_ms": ["--max-itl-ms"],
    "json_out": ["--json", "-j"],
}


@pytest.mark.parametrize(
    ("command", "flags"), [(recommend, RECOMMEND_FLAGS), (estimate_cmd, ESTIMATE_FLAGS)]
)
def test_the_contract_flags_are_kept(command: Any, flags: dict[str, list[str]]) -> None:
    options = _options(command)
    for name, decls in flags.items():
        assert sorted(options[name].opts) == sorted(decls), name


@pytest.mark.parametrize(
    ("command", "model"), [(recommend, RecommendRequest), (estimate_cmd, EstimateRequest)]
)
def test_every_field_of_the_request_is_an_option_as_declared(command: Any, model: Any) -> None:
    """Each field's option carries the help, panel, short flag and default of its declaration;
    the command's own options (output, --server) are not fields of the request."""
    options = _options(command)
    for name, info in model.model_fields.items():
        mark = sizing_opts.cli_mark(info)
        assert mark is not None, f"{model.__name__}.{name} has no command-line declaration"
        option = options[name]
        assert option.help == mark.help
        assert getattr(option, "rich_help_panel", None) == mark.panel
        assert (mark.short in option.opts) if mark.short else len(option.opts) == 1
        assert option.required == info.is_required()
    assert set(options) - set(model.model_fields) <= {"json_out", "fmt", "wide", "server", "emit"}


def test_the_estimate_words_its_own_gpu_count_and_region() -> None:
    """A field a question reads its own way is declared again on that question's model."""
    ours = _options(estimate_cmd)
    theirs = _options(recommend)
    assert ours["gpu_count"].help.startswith("GPUs of the deployment or job")
    assert theirs["gpu_count"].help == "At least this many GPUs."
    assert ours["region"].help == "Price region." != theirs["region"].help


def test_a_yes_no_field_left_unset_offers_both_words() -> None:
    recompute = _options(estimate_cmd)["recompute"]
    assert recompute.opts == ["--recompute"] and recompute.secondary_opts == ["--no-recompute"]
    assert recompute.default is None


class _Tiny(SizedWork):
    """A request with one field more, declared only here."""

    max_queue_ms: Annotated[
        float | None,
        Field(gt=0, le=1e6, description="queueing target"),
        Cli("Queueing delay target, ms.", SERVING, "-q"),
        SizesWork("serving"),
    ] = None
    color: Annotated[Literal["red", "blue"], Cli("A choice.", WORK)] = "red"


def test_a_field_declared_on_the_model_alone_reaches_the_command() -> None:
    """The one declaration gives the option, its parsing, and the model's own check (an error
    naming the flag)."""
    seen: list[_Tiny] = []

    @sizing_opts.request_options(_Tiny)
    def tiny(fields: dict[str, Any], json_out: sizing_opts.JsonOut = False) -> None:
        seen.append(parse_request(_Tiny, fields))

    app = typer.Typer()
    app.command()(tiny)
    runner = CliRunner()
    ok = runner.invoke(app, ["-w", "x", "-q", "12.5", "--color", "blue", "--json"])
    assert ok.exit_code == 0, ok.output
    assert seen[-1].max_queue_ms == 12.5 and seen[-1].color == "blue"
    bad = runner.invoke(app, ["-w", "x", "--max-queue-ms", "0"])
    assert bad.exit_code != 0
    assert isinstance(bad.exception, InputError)  # the CLI's handler prints it, exit 2
    assert bad.exception.render(flag_name).startswith("invalid request: --max-queue-ms: ")


def test_the_field_groups_are_read_from_the_declarations() -> None:
    """The groups the idle-field and bare-size rules read, written out by hand."""
    assert TRAINING_ONLY == (
        "tokens",
        "zero_stage",
        "dualpipe",
        "deadline_days",
        "budget_usd",
        "global_batch_tokens",
    )
    assert set(SERVING_FIELDS) == {
        "context_tokens", "throughput_tokens_s", "input_tokens", "output_tokens",
        "concurrency", "request_rate", "tensor_parallel", "max_ttft_ms", "max_itl_ms",
        "percentile", "kv_precision", "prefix_cache_hit_rate", "trace", "lora_adapters",
        "draft_tokens", "acceptance_length", "engine",
    }  # fmt: skip
    assert set(FROM_A_MODEL) == {
        *TRAINING_ONLY,
        *SERVING_FIELDS,
        "seq_len",
        "batch",
        "recompute",
    }
    # each flag in the training panel that sizes work is a training or shared field
    for name, info in RecommendRequest.model_fields.items():
        mark = sizing_opts.cli_mark(info)
        if name in SERVING_FIELDS:
            assert mark is not None and mark.panel == SERVING, name
        if name in TRAINING_ONLY and name != "tokens":
            assert mark is not None and mark.panel == TRAINING, name


@pytest.mark.parametrize("model", [RecommendRequest, EstimateRequest])
def test_a_cross_field_rule_lives_in_the_model_and_names_its_field(model: Any) -> None:
    """One output token has no inter-token latency: refused by the model, before any plan,
    named --max-itl-ms by the CLI and max_itl_ms by the API."""
    fields = {"workload": "low_latency_inference", "model": "llama-3-8b", "output_tokens": 1}
    assert parse_request(model, {**fields, "max_itl_ms": None}).output_tokens == 1
    with pytest.raises(InputError) as err:
        parse_request(model, {**fields, "max_itl_ms": 20})
    assert err.value.field == "max_itl_ms"
    assert err.value.render(flag_name).startswith(
        "invalid request: --max-itl-ms: one output token has no inter-token latency; drop it "
        "or raise output_tokens"
    )
    assert str(err.value).startswith("invalid request: max_itl_ms: one output token")
    assert "\x1f" not in str(err.value)  # no field mark left unrendered (the API shows it)
