"""Property: whatever text goes into any string field of any POST route, the server answers
below 500, and every list route still answers 200 afterwards.

The routes and their body schemas come from the tables (routes.toml and the schemas), not a
hand list: a new POST route or string field is covered the day it is added. One live
development server (`_kit.kit_server`, every service mounted) takes every example.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _kit import kit_server
from _session_client import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundle_contract._schemas import schema_documents, schema_uri
from bundle_contract._spec import get_spec
from bundle_server._dev_server import DevServer

# A value for each path parameter: the shape does not matter, the door answers first.
PATH_VALUE = "x1"
# Surrogates included (hypothesis leaves category Cs out by default).
TEXT = st.text(st.characters(codec=None, categories=None), max_size=12) | st.text(
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3
)


def resolve(node: Any, base: str) -> tuple[Any, str]:
    """Follow `$ref`s from `node` (in the document at `base`) to a schema and its document."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        uri, _, pointer = (ref if "://" in ref else schema_uri(ref)).partition("#")
        uri = uri or base
        node, base = schema_documents()[uri], uri
        for part in [p for p in pointer.split("/") if p]:
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node, base


def string_paths(
    node: Any, base: str, at: tuple[Any, ...] = (), depth: int = 0
) -> set[tuple[Any, ...]]:
    """Every place a string can go in instances of the schema (object keys, 0 for items)."""
    node, base = resolve(node, base)
    if not isinstance(node, dict) or depth > 6:
        return set()
    found: set[tuple[Any, ...]] = set()
    kinds = node.get("type")
    if kinds == "string" or (isinstance(kinds, list) and "string" in kinds):
        found.add(at)
    for branch in [*node.get("oneOf", []), *node.get("anyOf", []), *node.get("allOf", [])]:
        found |= string_paths(branch, base, at, depth + 1)
    for name, member in node.get("properties", {}).items():
        found |= string_paths(member, base, (*at, name), depth + 1)
    if "items" in node:
        found |= string_paths(node["items"], base, (*at, 0), depth + 1)
    return found


def placed(path: tuple[Any, ...], text: str) -> Any:
    """A body with `text` at `path` and nothing else."""
    value: Any = text
    for step in reversed(path):
        value = [value] if step == 0 else {step: value}
    return value


def fill(route_path: str) -> str:
    parts = route_path.split("/")
    return "/".join(PATH_VALUE if p.startswith("{") else p for p in parts)


POSTS = [
    (fill(row["path"]), path)
    for row in get_spec().rows("routes", "route")
    if row["method"] == "POST" and "request" in row
    for path in sorted(string_paths({"$ref": row["request"]}, schema_uri(row["request"])), key=repr)
]
# Every JSON GET route that needs no path or query value: the lists (and the status pages).
LISTS = [
    row["path"]
    for row in get_spec().rows("routes", "route")
    if row["method"] == "GET"
    and row.get("transport") == "json"
    and row["path"].startswith("/api/")
    and "{" not in row["path"]
    and not any(q.get("required") for q in row.get("query", {}).values())
]


def test_the_tables_give_the_property_its_fields() -> None:
    routes = {path for path, _ in POSTS}
    assert {"/api/routes/invocations", "/api/sessions", "/api/trace/receipts"} <= routes
    assert ("/api/routes/invocations", ("requestId",)) in POSTS
    assert {"/api/routes/invocations", "/api/sessions", "/api/trace"} <= set(LISTS)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    with kit_server(Path(tmp_path_factory.mktemp("door"))) as running:
        yield running


def post_status(server: DevServer, route: str, body: bytes) -> int:
    """POST `body` with both credentials (each guard looks at its own only); the status."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    headers = {
        "Host": f"127.0.0.1:{server.port}",
        "Content-Type": "application/json",
        "x-bundle-session": server.session_token,
        "Authorization": f"Bearer {server.receipt_token}",
    }
    try:
        conn.request("POST", route, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(target=st.sampled_from(POSTS), text=TEXT)
def test_any_text_in_any_string_field_is_never_a_server_error(
    server: DevServer, target: tuple[str, tuple[Any, ...]], text: str
) -> None:
    route, path = target
    status = post_status(server, route, json.dumps(placed(path, text)).encode())
    assert status < 500, (route, path, text)
    client = Client(server.port, server.session_token)
    for listed in LISTS:
        assert client.request("GET", listed).status == 200, listed
