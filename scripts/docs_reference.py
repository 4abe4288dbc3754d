"""The reference pages of the docs, generated so that they cannot drift from the tool:
docs/reference/cli.md from the commands themselves (every command, argument and option, its
type, default and help) and docs/reference/http.md from openapi.yaml (every route, its body's
fields, its answers).

    python scripts/docs_reference.py          # write both pages
    python scripts/docs_reference.py --check  # exit 1 when a page is not what it would write
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
CLI_PAGE = REPO / "docs" / "reference" / "cli.md"
HTTP_PAGE = REPO / "docs" / "reference" / "http.md"


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def cli_page() -> str:
    from typer.main import get_command

    from advisor.cli import build_app

    root = get_command(build_app())
    lines = [
        "# CLI reference",
        "",
        "Generated from the commands by `scripts/docs_reference.py`; `advisor COMMAND --help`",
        "prints the same. Global options (`--catalog DIR`, `--replace-catalog`, `--debug`) go",
        "before or after the command.",
        "",
    ]
    lines += _command("advisor", root, root.context_class(root, info_name="advisor"))
    return "\n".join(lines).rstrip() + "\n"


def _command(path: str, command: Any, ctx: Any) -> list[str]:
    out = [f"## `{path}`", "", _cell(command.help or command.short_help or ""), ""]
    params = [p for p in command.params if not getattr(p, "hidden", False)]
    arguments = [p for p in params if p.param_type_name == "argument"]
    options = [p for p in params if p.param_type_name == "option"]
    if arguments:
        out += ["| argument | help |", "|---|---|"]
        out += [
            f"| `{_metavar(p, ctx)}` | {_cell(getattr(p, 'help', '') or '')} |" for p in arguments
        ]
        out.append("")
    if options:
        out += ["| option | value | default | help |", "|---|---|---|---|"]
        for p in options:
            flags = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
            value = "" if p.is_flag else f"`{_metavar(p, ctx)}`"
            out.append(f"| {flags} | {value} | {_default(p)} | {_cell(p.help or '')} |")
        out.append("")
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        if getattr(sub, "hidden", False):
            continue
        out += _command(f"{path} {name}", sub, sub.context_class(sub, info_name=name, parent=ctx))
    return out


def _metavar(param: Any, ctx: Any) -> str:
    if param.param_type_name == "argument":
        return _cell(param.metavar or param.name.upper())
    shown = param.display_type_rich(ctx=ctx) if hasattr(param, "display_type_rich") else None
    return _cell(shown or param.make_metavar(ctx))


def _default(param: Any) -> str:
    default = param.default
    if default is None or callable(default) or default == () or param.name == "help":
        return ""
    if hasattr(default, "value"):
        default = default.value
    if param.is_flag and param.secondary_opts:
        return f"`{param.opts[0] if default else param.secondary_opts[0]}`"
    if param.is_flag:
        return "" if not default else "on"
    return f"`{_cell(default)}`"


def http_page() -> str:
    spec = yaml.safe_load((REPO / "openapi.yaml").read_text())
    schemas = spec.get("components", {}).get("schemas", {})
    lines = [
        "# HTTP reference",
        "",
        "Generated from `openapi.yaml` (the contract a test holds the service to) by",
        "`scripts/docs_reference.py`. A running service also serves it at `/openapi.json` and",
        "renders it at `/docs`. Errors are `application/problem+json`.",
        "",
    ]
    for route, methods in spec["paths"].items():
        for method, op in methods.items():
            lines += [f"## `{method.upper()} {route}`", ""]
            text = op.get("description") or op.get("summary") or ""
            lines += [_cell(text), ""]
            if op.get("security"):
                names = sorted({k for req in op["security"] for k in req}) or ["none"]
                lines += [
                    f"Authorization: {', '.join(names)} (or none where `{{}}` is listed).",
                    "",
                ]
            lines += _parameters(op.get("parameters") or [])
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            ref = body.get("schema", {}).get("$ref")
            if ref:
                name = ref.rsplit("/", 1)[1]
                lines += [f"Body: `{name}`", "", *_fields(schemas.get(name, {}))]
            codes = ", ".join(
                f"{code} {_cell(r.get('description', ''))}" for code, r in op["responses"].items()
            )
            lines += [f"Answers: {codes}.", ""]
    return "\n".join(lines).rstrip() + "\n"


def _parameters(params: list[dict[str, Any]]) -> list[str]:
    if not params:
        return []
    out = ["| parameter | in | type | help |", "|---|---|---|---|"]
    for p in params:
        kind = _type(p.get("schema", {}))
        out.append(f"| `{p['name']}` | {p['in']} | {kind} | {_cell(p.get('description', ''))} |")
    return [*out, ""]


def _fields(schema: dict[str, Any]) -> list[str]:
    props = schema.get("properties") or {}
    if not props:
        return []
    required = set(schema.get("required") or [])
    out = ["| field | type | required | help |", "|---|---|---|---|"]
    for name, prop in props.items():
        need = "yes" if name in required else ""
        out.append(f"| `{name}` | {_type(prop)} | {need} | {_cell(prop.get('description', ''))} |")
    return [*out, ""]


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[1]
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    if "enum" in prop:
        shown = prop["enum"][:6]
        more = ", ..." if len(prop["enum"]) > 6 else ""
        return "one of " + ", ".join(f"`{v}`" for v in shown) + more
    if prop.get("type") == "array":
        return f"array of {_type(prop.get('items', {}))}"
    return str(prop.get("type", "any"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args()
    stale = []
    for page, text in ((CLI_PAGE, cli_page()), (HTTP_PAGE, http_page())):
        if args.check:
            if not page.exists() or page.read_text() != text:
                stale.append(str(page.relative_to(REPO)))
        else:
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(text)
    for page_name in stale:
        print(f"{page_name} is out of date: run python scripts/docs_reference.py")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
