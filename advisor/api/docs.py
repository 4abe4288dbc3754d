"""GET /docs: the HTTP contract as one self-contained HTML page, rendered on the server from the
live OpenAPI document (GET /openapi.json, served here too). FastAPI's Swagger UI loads its
scripts and styles from a CDN (no use on a network without one, and a third party sees every
visit); this page needs nothing outside it: inline CSS, no scripts (its Content-Security-Policy
allows none), Jinja2 with autoescaping.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from jinja2 import Environment, StrictUndefined

from advisor.api.state import built_for

router = APIRouter()

CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
ENUM_SHOWN = 12  # values of a long enum listed before "and N more"

_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ spec.info.title }} {{ spec.info.version }}: HTTP API</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:70rem;padding:0 1rem;color:#222}
code,pre{font:13px ui-monospace,monospace}h2{margin-top:2.5rem;border-bottom:1px solid #ccc}
section{border:1px solid #ddd;border-radius:6px;padding:.5rem 1rem;margin:1rem 0}
.m{display:inline-block;min-width:4.5rem;font-weight:700}.get{color:#0a6}.post{color:#06c}
table{border-collapse:collapse;width:100%}td,th{text-align:left;vertical-align:top;
padding:.2rem .5rem;border-bottom:1px solid #eee}small{color:#666}
</style></head><body>
<h1>{{ spec.info.title }} <small>{{ spec.info.version }}</small></h1>
<p>{{ spec.info.description }}</p>
<p>The machine-readable contract: <a href="{{ openapi_url }}">{{ openapi_url }}</a>
(OpenAPI {{ spec.openapi }}).</p>
<h2>Operations</h2>
{% for op in operations %}
<section id="{{ op.id }}"><h3><span class="m {{ op.method }}">{{ op.method|upper }}</span>
<code>{{ op.path }}</code></h3>
{% if op.summary %}<p>{{ op.summary }}</p>{% endif %}
{% if op.security %}<p><small>Needs <code>Authorization: Bearer &lt;token&gt;</code>.</small>
</p>{% endif %}
{% if op.parameters %}<table><tr><th>parameter</th><th>in</th><th>schema</th></tr>
{% for p in op.parameters %}<tr><td><code>{{ p.name }}</code>{% if p.required %} *{% endif %}</td>
<td>{{ p.in }}</td><td>{{ p.schema }}</td></tr>{% endfor %}</table>{% endif %}
{% if op.body %}<p>Body ({{ op.body_type }}): {{ op.body }}</p>{% endif %}
<table><tr><th>status</th><th>meaning</th><th>body</th></tr>
{% for r in op.responses %}<tr><td>{{ r.code }}</td><td>{{ r.description }}</td>
<td>{{ r.body }}</td></tr>{% endfor %}</table></section>
{% endfor %}
<h2>Schemas</h2>
{% for s in schemas %}
<section id="schema-{{ s.name }}"><h3>{{ s.name }}</h3>
{% if s.description %}<p>{{ s.description }}</p>{% endif %}
{% if s.rule %}<p><small>Rule: {{ s.rule }}</small></p>{% endif %}
{% if s.properties %}<table><tr><th>field</th><th>schema</th><th>about</th></tr>
{% for p in s.properties %}<tr><td><code>{{ p.name }}</code>{% if p.required %} *{% endif %}</td>
<td>{{ p.schema }}</td><td>{{ p.description }}</td></tr>{% endfor %}</table>{% endif %}
</section>
{% endfor %}
<footer><p><small>* required. Errors are application/problem+json
(<a href="#schema-Problem">Problem</a>).</small></p></footer>
</body></html>
"""
_PAGE = Environment(autoescape=True, undefined=StrictUndefined).from_string(_TEMPLATE)


def describe(schema: dict[str, Any]) -> str:
    """One line for a JSON schema: its type, constraints and (a few of its) allowed values."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " or ".join(describe(s) for s in schema["anyOf"])
    if "allOf" in schema:
        return " and ".join(describe(s) for s in schema["allOf"])
    kind = str(schema.get("type", "any"))
    if kind == "array":
        kind = f"list of {describe(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        kind = f"map to {describe(schema['additionalProperties'])}"
    if schema.get("format"):
        kind += f" ({schema['format']})"
    limits = [
        f"{word} {schema[key]}"
        for key, word in (
            ("minimum", ">="),
            ("exclusiveMinimum", ">"),
            ("maximum", "<="),
            ("exclusiveMaximum", "<"),
            ("minLength", "length >="),
            ("maxLength", "length <="),
        )
        if key in schema
    ]
    if "enum" in schema:
        values = [str(v) for v in schema["enum"]]
        shown = ", ".join(values[:ENUM_SHOWN])
        more = len(values) - ENUM_SHOWN
        limits.append(f"one of {shown}" + (f" and {more} more" if more > 0 else ""))
    if "default" in schema:
        limits.append(f"default {json.dumps(schema['default'])}")
    return kind + (f"; {'; '.join(limits)}" if limits else "")


def _rule(schema: dict[str, Any]) -> str:
    rules = {k: schema[k] for k in ("allOf", "oneOf", "anyOf", "not") if k in schema}
    return json.dumps(rules) if rules else ""


def page(spec: dict[str, Any], openapi_url: str) -> str:
    operations = []
    for path, item in spec.get("paths", {}).items():
        for method, op in item.items():
            content: dict[str, Any] = op.get("requestBody", {}).get("content", {})
            body_type, body = next(iter(content.items()), ("", None))
            operations.append(
                {
                    "id": op.get("operationId", f"{method}-{path}"),
                    "method": method,
                    "path": path,
                    "summary": op.get("description") or op.get("summary", ""),
                    "security": bool(op.get("security")),
                    "parameters": [
                        {
                            "name": p["name"],
                            "in": p["in"],
                            "required": p.get("required", False),
                            "schema": describe(p.get("schema", {})),
                        }
                        for p in op.get("parameters", [])
                    ],
                    "body_type": body_type,
                    "body": describe(body.get("schema", {})) if body else "",
                    "responses": [
                        {
                            "code": code,
                            "description": r.get("description", ""),
                            "body": "; ".join(
                                f"{media}: {describe(c.get('schema', {}))}"
                                for media, c in (r.get("content") or {}).items()
                            ),
                        }
                        for code, r in op.get("responses", {}).items()
                    ],
                }
            )
    schemas = [
        {
            "name": name,
            "description": s.get("description", ""),
            "rule": _rule(s),
            "properties": [
                {
                    "name": prop,
                    "required": prop in s.get("required", ()),
                    "schema": describe(ps),
                    "description": ps.get("description", ""),
                }
                for prop, ps in s.get("properties", {}).items()
            ],
        }
        for name, s in spec.get("components", {}).get("schemas", {}).items()
    ]
    return _PAGE.render(spec=spec, operations=operations, schemas=schemas, openapi_url=openapi_url)


# The API document is served at this path (FastAPI's own route is off: advisor/api/__init__.py).
OPENAPI_PATH = "/openapi.json"


# The document's JSON (130 kB: 4-5 ms of CPU to encode on the event loop, as FastAPI's own route
# did for every request) and the page rendered from it (about 20 ms) are built once per document
# (advisor/api/contract.py builds one per catalog loaded).
@router.get(OPENAPI_PATH, include_in_schema=False)
def openapi_document(request: Request) -> Response:
    spec = request.app.openapi()
    root_path = request.scope.get("root_path", "").rstrip("/")
    if root_path and root_path not in {s.get("url") for s in spec.get("servers", [])}:
        spec = {**spec, "servers": [{"url": root_path}, *spec.get("servers", [])]}  # as FastAPI
        return Response(_encoded(spec), media_type="application/json")
    body = built_for(spec, "openapi.json", lambda: _encoded(spec))
    return Response(body, media_type="application/json")


def _encoded(spec: dict[str, Any]) -> bytes:
    """As starlette's JSONResponse encodes it."""
    return json.dumps(spec, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


@router.get("/docs", include_in_schema=False)
def docs(request: Request) -> HTMLResponse:
    spec = request.app.openapi()
    html = built_for(spec, "docs", lambda: page(spec, OPENAPI_PATH))
    return HTMLResponse(html, headers={"Content-Security-Policy": CSP})
