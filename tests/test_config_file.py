"""The config file (TOML under the XDG config directory, or $ADVISOR_CONFIG) as a layer of
defaults: a flag and the option's environment variable win over it; `config show` says what is
in force and where from; shell completion is installable and answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(*args: str, config: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("ADVISOR_CONFIG", "ADVISOR_TOKEN")}
    if config is not None:
        base["ADVISOR_CONFIG"] = str(config)
    return subprocess.run(
        [sys.executable, "-m", "advisor", *args],
        capture_output=True,
        text=True,
        env={**base, "COLUMNS": "120", **env},
        cwd=REPO,
        timeout=120,
    )


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def _regions(p: subprocess.CompletedProcess[str]) -> set[str]:
    assert p.returncode == 0, p.stderr
    return {o["region"] for o in json.loads(p.stdout)["recommendations"]}


def test_file_defaults_apply_and_a_flag_wins(tmp_path: Path) -> None:
    cfg = _config(tmp_path, '[defaults]\nregion = "eu-west-1"\n[recommend]\nlimit = 2\n')
    ask = ("recommend", "--workload", "fine_tuning", "--memory-gb", "80", "--json")
    without = _regions(run(*ask))
    assert len(without) > 1  # the shipped catalog prices fine_tuning in many regions
    from_file = json.loads(run(*ask, config=cfg).stdout)["recommendations"]
    assert {o["region"] for o in from_file} == {"eu-west-1"} and len(from_file) == 2
    assert _regions(run(*ask, "--region", "us-east-1", config=cfg)) == {"us-east-1"}


def test_a_command_table_beside_the_global_catalog_option(tmp_path: Path) -> None:
    """[catalog.instances] sets that command's option; the global --catalog option (a name the
    `catalog` group shares) keeps its own default."""
    cfg = _config(tmp_path, '[catalog.instances]\naccelerator = "h200-sxm"\n')
    p = run("catalog", "instances", "--json", config=cfg)
    assert p.returncode == 0, p.stderr
    assert {i["accelerator"] for i in json.loads(p.stdout)} == {"h200-sxm"}


def test_an_unknown_key_or_table_is_exit_2_with_a_hint(tmp_path: Path) -> None:
    bad_key = run(
        "recommend", "-w", "fine_tuning", config=_config(tmp_path, "[recommend]\nregoin = 1\n")
    )
    assert bad_key.returncode == 2
    assert "[recommend] unknown option 'regoin' (did you mean 'region'?)" in bad_key.stderr
    bad_table = run("config", "show", config=_config(tmp_path, '[recomend]\nregion = "x"\n'))
    assert bad_table.returncode == 2 and "did you mean 'recommend'" in bad_table.stderr
    not_toml = run("catalog", "models", config=_config(tmp_path, "region = \n"))
    assert not_toml.returncode == 2 and "not TOML" in not_toml.stderr


def test_config_show_names_each_source_and_hides_tokens(tmp_path: Path) -> None:
    cfg = _config(tmp_path, '[defaults]\nregion = "eu-west-1"\ntoken = "file-secret"\n')
    shown = json.loads(run("config", "show", "--json", config=cfg).stdout)
    assert shown["config_file"] == str(cfg) and shown["exists"] is True
    rows = {(r["command"], r["option"]): r for r in shown["defaults"]}
    assert rows[("recommend", "--region")] == {
        "command": "recommend",
        "option": "--region",
        "value": "eu-west-1",
        "source": "config file [defaults]",
    }
    assert rows[("probe", "--token")]["value"] == "(set, not shown)"
    # the option's environment variable wins, and is said to
    env = json.loads(run("config", "show", "--json", config=cfg, ADVISOR_TOKEN="e").stdout)
    token = next(r for r in env["defaults"] if r["option"] == "--token")
    assert token["source"] == "environment ADVISOR_TOKEN (wins over the file)"
    assert "file-secret" not in json.dumps(env) and env["environment"]["ADVISOR_TOKEN"] != "e"


def test_the_file_lives_under_the_xdg_config_home(tmp_path: Path) -> None:
    p = run("config", "path", XDG_CONFIG_HOME=str(tmp_path))
    assert p.stdout.strip() == str(tmp_path / "advisor" / "config.toml")
    (tmp_path / "advisor").mkdir()
    (tmp_path / "advisor" / "config.toml").write_text("[recommend]\nlimit = 1\n")
    shown = json.loads(run("config", "show", "--json", XDG_CONFIG_HOME=str(tmp_path)).stdout)
    assert [(r["option"], r["value"]) for r in shown["defaults"]] == [("--limit", 1)]
    none = run("config", "show", XDG_CONFIG_HOME=str(tmp_path / "empty"))
    assert "(none: built-in defaults apply)" in none.stdout


def test_shell_completion_script_and_answers() -> None:
    script = run("--show-completion", "bash")
    assert script.returncode == 0 and "_ADVISOR_COMPLETE=complete_bash" in script.stdout
    words = run(
        _ADVISOR_COMPLETE="complete_bash", COMP_WORDS="advisor recommend --wor", COMP_CWORD="2"
    )
    assert words.stdout.split() == ["--workload"]
    group = run(_ADVISOR_COMPLETE="complete_bash", COMP_WORDS="advisor catalog reg", COMP_CWORD="2")
    assert group.stdout.split() == ["regions"]


def test_flags_show_no_metavar_in_help() -> None:
    """A flag takes no value: its help line shows no `<bool>`; an option with a value keeps its
    type."""
    for command in (["recommend"], ["catalog", "instances"], ["serve"], ["probe"]):
        p = run(*command, "--help", COLUMNS="200")
        assert p.returncode == 0 and ("--json" in p.stdout or "--access-log" in p.stdout)
        assert "<bool>" not in p.stdout, command
    assert "<table|json|csv>" in run("recommend", "--help", COLUMNS="200").stdout


def test_a_value_outside_an_options_choices_gets_a_did_you_mean() -> None:
    for args, hint in (
        (["recommend", "-w", "fine_tuning", "-f", "jsn"], "(did you mean 'json'?)"),
        (["catalog", "accelerators", "--form-factor", "edg"], "(did you mean 'edge'?)"),
        (["serve", "--log-format", "jsn"], "(did you mean 'json'?)"),
    ):
        p = run(*args)
        assert p.returncode == 2 and hint in p.stderr, (args, p.stderr)
