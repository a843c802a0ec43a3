"""OpenAPI 3.1 description of the development server, generated from spec/routes.toml.

Every schema resource becomes a component (its relative `$ref`s rewritten to component
pointers, since OpenAPI tools resolve refs within one document); every route row becomes an
operation with its parameters, body, responses per status and error responses per code. SSE and
NDJSON routes describe one event's or one frame's schema under their media type.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from importlib import metadata
from typing import Any

from bundle_contract._derived import DIALECT
from bundle_contract._generated.errors import ERRORS
from bundle_contract._schemas import schema_documents
from bundle_contract._spec import SCHEMA_BASE, Spec, get_spec, plain

COMPONENTS = "#/components/schemas/"
MEDIA = {"json": "application/json", "sse": "text/event-stream", "ndjson": "application/x-ndjson"}
# What an `asset` route serves, by file suffix (the Workbench's scripts, styles and licenses).
ASSET_MEDIA = {
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".css": "text/css",
    ".txt": "text/plain",
}


def component_ref(ref: str, resource: str) -> str:
    """`Other.json#/$defs/x` or `#/$defs/x` (inside `resource`) -> a component pointer."""
    name, _, pointer = ref.removeprefix(SCHEMA_BASE).partition("#")
    target = name.removesuffix(".json") if name else resource
    return COMPONENTS + target + pointer


def _rewrite(node: Any, resource: str) -> Any:
    if isinstance(node, Mapping):
        return {
            key: component_ref(value, resource) if key == "$ref" else _rewrite(value, resource)
            for key, value in node.items()
            if key not in ("$id", "$schema")
        }
    if isinstance(node, list):
        return [_rewrite(item, resource) for item in node]
    return node


def components() -> dict[str, Any]:
    """Every schema resource, hand-written and derived, as an OpenAPI component."""
    result = {}
    for uri, document in sorted(schema_documents().items()):
        name = uri.removeprefix(SCHEMA_BASE).removesuffix(".json")
        result[name] = _rewrite(document, name)
    return result


def _ref(ref: str) -> dict[str, str]:
    return {"$ref": component_ref(ref, "")}


def _body(response: Mapping[str, Any]) -> dict[str, Any] | None:
    if "envelope" in response:
        inner = _ref(response["schema"]) if "schema" in response else {
            "type": "array", "items": _ref(response["items"])
        }  # fmt: skip
        return {
            "type": "object",
            "required": [response["envelope"]],
            "properties": {response["envelope"]: inner},
            "additionalProperties": False,
        }
    if "schema" in response:
        return _ref(response["schema"])
    if "frame" in response:
        return _ref(response["frame"])
    if "events" in response:
        return {"type": "string"}
    return None


def _responses(spec: Spec, route: Mapping[str, Any]) -> dict[str, Any]:
    if route["transport"] == "asset":
        return _asset_responses(spec, route)
    media = "text/html" if route["transport"] == "html" else MEDIA[route["transport"]]
    responses: dict[str, Any] = {}
    for status, response in route["responses"].items():
        entry: dict[str, Any] = {"description": _describe(status, response)}
        body = _body(response)
        if body is not None:
            entry["content"] = {media: {"schema": body}}
        elif route["transport"] == "html" and status == "200":
            entry["content"] = {media: {"schema": {"type": "string"}}}
        if "events" in response:
            entry["x-sse-events"] = {name: _ref(ref) for name, ref in response["events"].items()}
        responses[status] = entry
    return responses | _error_responses(spec, route)


def _asset_responses(spec: Spec, route: Mapping[str, Any]) -> dict[str, Any]:
    text = {"schema": {"type": "string"}}
    by_kind = {media: text for media in ASSET_MEDIA.values()}
    ok = {"description": "the file", "content": by_kind}
    errors = _error_responses(spec, route)
    # A file the installation should have but lacks answers 404 in its own media type, the
    # code and message in a comment (bundle_server/workbench/handlers.py).
    missing = errors["404"]
    missing["description"] += " (in the file's own media type for one the page needs)"
    missing["content"] = missing["content"] | by_kind
    return {"200": ok} | errors


def _error_responses(spec: Spec, route: Mapping[str, Any]) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    by_status: dict[int, list[str]] = defaultdict(list)
    for code in effective_errors(spec, route):
        error = ERRORS[code]
        for status in {error.http_status, *error.variants.values()}:
            by_status[status].append(code)
    for status, codes in sorted(by_status.items()):
        responses[str(status)] = {
            "description": "error: " + ", ".join(sorted(codes)),
            "content": {"application/json": {"schema": _ref("ErrorEnvelope.json")}},
        }
    return responses


def _describe(status: str, response: Mapping[str, Any]) -> str:
    if "events" in response:
        terminal = response.get("terminal_event")
        return f"server-sent events {', '.join(response['events'])}; ends after {terminal}"
    if "frame" in response:
        return "newline-delimited JSON, one frame per line"
    return {"201": "created", "202": "accepted", "204": "no content", "303": "see other"}.get(
        status, "ok"
    )


def effective_errors(spec: Spec, route: Mapping[str, Any]) -> list[str]:
    """Codes a route can answer with: its own, every request's, its auth class's, and the body
    checks'."""
    auth = spec.auth(route["auth"])
    codes = [*route["errors"], *spec.tables["routes"]["request"]["errors"], *auth["errors"]]
    if "request" in route:
        codes += [
            route.get("request_error", code) for code in spec.tables["routes"]["body"]["errors"]
        ]
    return sorted(set(codes))


def _schemes(spec: Spec) -> dict[str, Any]:
    """Security schemes: the auth classes of routes.toml that carry a credential."""
    return {
        a["name"]: plain(a["credential"]) for a in spec.rows("routes", "auth") if "credential" in a
    }


def _parameters(route: Mapping[str, Any]) -> list[dict[str, Any]]:
    parameters: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": _ref(ref)}
        for name, ref in route.get("params", {}).items()
    ]
    for name, query in route.get("query", {}).items():
        schema: dict[str, Any] = _ref(query["schema"])
        if "default" in query:
            schema = {"allOf": [schema], "default": query["default"]}
        parameters.append(
            {"name": name, "in": "query", "required": query["required"], "schema": schema}
        )
    return parameters


def _operation(spec: Spec, route: Mapping[str, Any]) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": route["id"],
        "tags": [route["group"]],
        "security": [{route["auth"]: []}] if route["auth"] in _schemes(spec) else [],
        "responses": _responses(spec, route),
    }
    if "why" in route:
        operation["description"] = route["why"]
    parameters = _parameters(route)
    if parameters:
        operation["parameters"] = parameters
    if "request" in route:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(route["request"])}},
        }
    return operation


def openapi_document(
    server_url: str | None = None, route_ids: Collection[str] | None = None
) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the routes of spec/routes.toml (all, or those named)."""
    spec = get_spec()
    paths: dict[str, dict[str, Any]] = defaultdict(dict)
    for route in spec.rows("routes", "route"):
        if route_ids is None or route["id"] in route_ids:
            paths[route["path"]][route["method"].lower()] = _operation(spec, route)
    try:
        version = metadata.version("bundle-devkit")
    except metadata.PackageNotFoundError:
        version = "0+unknown"
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "bundle-devkit development server", "version": version},
        "jsonSchemaDialect": DIALECT,
        "tags": [
            {"name": g["name"], "description": g["title"]} for g in spec.rows("routes", "group")
        ],
        "paths": dict(paths),
        "components": {
            "schemas": components(),
            "securitySchemes": _schemes(spec),
        },
    }
    if server_url is not None:
        document["servers"] = [{"url": server_url}]
    return document
