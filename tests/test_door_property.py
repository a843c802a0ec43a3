"""Property: whatever text goes into any string of a POST body, or whatever bytes into a query
or path value, the server answers below 500 in the envelope, and every list route still
answers 200 afterwards.

Each POST route with a body is sent a complete, valid body (`BODIES`: a route that runs, a
host session that lives, an MCP session that answers, a receipt of that session), so the text
reaches the handler that stores it unless the door refuses it first. One string of the body
(a field, an array item, or a key or value of a free-form object: a route's `input`, a tool
call's `arguments`) is replaced by generated text, surrogates included. The answer is:

- text UTF-8 cannot carry: 400 with the route's malformed-request code, naming where;
- text the route's schema refuses: 400 with that code;
- any other text: never 400, and where the answer carries the value back (a route's result,
  the echo tool's), it carries it as sent.

Query and path values get bytes percent-encoded (a surrogate's CESU form, any invalid UTF-8):
never a 5xx; a query value that is not UTF-8 is kept as its escapes and a path value reads the
bytes as U+FFFD (werkzeug's decoding), so no surrogate reaches a handler (GUARD-104).

One live development server (`_kit.kit_server`, every service mounted) takes every example:
its project has the kit's routes, the MCP test server `tools`, and a fake host.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from _kit import kit_server, route_project
from _mcp import TOOLS
from _session_client import Client
from fake_host import host
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from werkzeug.datastructures import MultiDict

from bundle_contract._error_bases import ContractError
from bundle_contract._openapi import effective_errors
from bundle_contract._schemas import reference_validator, schema_documents, schema_uri
from bundle_contract._spec import get_spec
from bundle_server._dev_server import DevServer
from bundle_server._http.request import path_params, query_values, request_error
from bundle_server._utf8 import replace_surrogates

# Surrogates included (hypothesis leaves category Cs out by default).
TEXT = st.text(st.characters(codec=None, categories=None), max_size=12) | st.text(
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3
)
# Bytes for a query or path value: a text's UTF-8 (a surrogate in its CESU-8 form), or any.
VALUE_BYTES = TEXT.map(lambda text: text.encode("utf-8", "surrogatepass")) | st.binary(max_size=8)
ENVELOPE = reference_validator("ErrorEnvelope.json")


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


ROUTES = {row["id"]: row for row in get_spec().rows("routes", "route")}
WITH_BODY = {name for name, row in ROUTES.items() if row["method"] == "POST" and "request" in row}
# Every JSON GET route that needs no path or query value: the lists (and the status pages).
LISTS = [
    row["path"]
    for row in ROUTES.values()
    if row["method"] == "GET"
    and row.get("transport") == "json"
    and row["path"].startswith("/api/")
    and "{" not in row["path"]
    and not any(q.get("required") for q in row.get("query", {}).values())
]


# --- the valid bodies ---------------------------------------------------------------------


@dataclass(frozen=True)
class World:
    """What a valid body names: a live host session, the `tools` server's MCP session (its
    launch), the active epoch and runtime generation; a pending App binding and an open
    multiplexed stream, made afresh for each example that needs one."""

    session: str = "hs_0123456789abcdef"
    launch: str = "ml_0123456789abcdef"
    epoch: str = "ep_0123456789abcdef"
    generation: str = "rg_0123456789abcdef"
    binding: str = "ab_0123456789abcdef"
    stream: str = "AbCdEfGhIjKlMnOpQrStUv"


@dataclass(frozen=True)
class KeyOf:
    """A place that is an object's key (`name`) rather than a value."""

    name: str


Place = tuple[Any, ...]  # keys and indexes down to a string; a KeyOf last for a key


@dataclass(frozen=True)
class Body:
    """A valid request of a route: its path (a format string over the World's fields) and
    body. `free`: the free-form objects in it (a route's input, a tool's arguments), whose
    keys are places too; `echoes`: places whose text a 2xx answer carries back as sent;
    `stream`: the answer is a stream (only its status is read); `needs`: a World field made
    afresh for each example ("binding", "stream")."""

    path: str
    value: Callable[[World], dict[str, Any]]
    free: tuple[Place, ...] = ()
    echoes: tuple[Place, ...] = ()
    stream: bool = False
    needs: str | None = None


def receipt(world: World) -> dict[str, Any]:
    execution = {
        "event": "tool/before",
        "executionId": "x1",
        "host": "host_a",
        "nativeEvent": "PreToolUse",
    }
    return {
        "version": 1,
        "host": "host_a",
        "sessionId": world.session,
        "requestId": "r1",
        "startedAt": "2025-01-31T12:00:00Z",
        "lineage": {"axis": "turn", "value": "t1"},
        "execution": execution,
        "events": [
            {"at": 0, "execution": execution, "kind": "handler.start", "phase": "handler",
             "sequence": 1},
            {"at": 3.2, "durationMs": 3.2, "execution": execution, "kind": "handler.outcome",
             "outcome": "deny", "phase": "handler", "sequence": 2},
        ],
    }  # fmt: skip


OPERATIONS = "/api/mcp/sessions/{launch}/operations"
# No request of the MCP server is pending: an answer is a 404 once the door let it in.
ANSWER = "/api/mcp/sessions/{launch}/requests/sr_0123456789abcdef"
# Route id -> its valid requests. The kit's route `review` answers its input back, so does the
# runtime run of it; the MCP server's tool `echo` answers its text.
BODIES: dict[str, list[Body]] = {
    "invocations.create": [
        Body(
            "/api/routes/invocations",
            lambda w: {"routeId": "review", "input": {"note": "v"}, "args": {"flag": "a"},
                       "requestId": "q1", "correlationId": "c1"},
            free=(("input",), ("args",)),
            echoes=(("input",),),
        ),
        Body(
            "/api/routes/invocations",
            lambda w: {"routeId": "review", "input": None,
                       "eventFixture": {"fixtureId": "f1", "target": "host_a"}},
        ),
    ],
    "sessions.create": [
        Body("/api/sessions", lambda w: {"host": "host_a", "cols": 80, "rows": 24, "prompt": "p"})
    ],
    "sessions.input": [Body("/api/sessions/{session}/input", lambda w: {"data": "ls\r"})],
    "runtime.create": [
        Body(
            "/api/runtime/runs",
            lambda w: {"surfaceId": "review", "target": "host_a", "input": {"note": "v"},
                       "expectedGenerationId": w.generation},
            free=(("input",),),
            echoes=(("input",),),
        ),
        Body(
            "/api/runtime/runs",
            lambda w: {"surfaceId": "review", "target": "host_a", "input": None,
                       "fixtureId": "f1"},
        ),
    ],
    "mcp.operations": [
        Body(
            OPERATIONS,
            lambda w: {"method": "tools/call",
                       "params": {"name": "echo", "arguments": {"text": "v"}},
                       "correlationId": "c1", "operationId": "op-1"},
            free=(("params", "arguments"),),
            echoes=(("params", "arguments", "text"),),
        ),
        Body(
            OPERATIONS,
            lambda w: {"method": "prompts/get",
                       "params": {"name": "greet", "arguments": {"name": "Ada"}}},
            free=(("params", "arguments"),),
        ),
        Body(
            OPERATIONS,
            lambda w: {"method": "resources/read", "params": {"uri": "tools://readme"}},
        ),
    ],
    "mcp.apps.mount": [
        Body(
            "/api/mcp/sessions/{launch}/apps",
            lambda w: {"toolName": "echo", "input": {"text": "v"}},
            free=(("input",),),
        )
    ],
    "mcp.apps.result": [
        Body(
            "/api/mcp/apps/{binding}/result",
            lambda w: {"result": {"content": [{"type": "text", "text": "v"}]}},
            free=(("result",),),
            needs="binding",
        )
    ],
    "mcp.requests.answer": [
        Body(ANSWER, lambda w: {"action": "accept", "content": {"name": "Ada"}},
             free=(("content",),)),
        Body(ANSWER, lambda w: {"action": "accept", "text": "hi"}),
    ],
    "project.builds": [Body("/api/project/builds", lambda w: {"paths": ["handlers.py"]})],
    "multiplex.open": [
        Body(
            "/api/multiplex/stream",
            lambda w: {"subscriptions": [
                {"id": "s1", "route": "trace.stream", "query": {"after": 0}},
                {"id": "s2", "route": "sessions.stream", "params": {"sessionId": w.session}},
            ]},
            stream=True,
        )
    ],
    "multiplex.subscribe": [
        Body(
            "/api/multiplex/{stream}/subscriptions",
            lambda w: {"subscriptions": [
                {"id": "s1", "route": "trace.stream", "query": {"after": 0}}
            ]},
            needs="stream",
        )
    ],
    "trace.receipts": [Body("/api/trace/receipts", receipt)],
}  # fmt: skip
# Routes whose body holds no string at all: nothing for the property to place.
WITHOUT_TEXT = {"sessions.resize", "sessions.restart", "sessions.terminate", "multiplex.consumed"}


def places(value: Any, free: tuple[Place, ...], at: Place = ()) -> Iterator[Place]:
    """Every string of `value`, and every key of the objects in `free` (and below them)."""
    if isinstance(value, str):
        yield at
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from places(item, free, (*at, index))
    elif isinstance(value, dict):
        keyed = any(at[: len(prefix)] == prefix for prefix in free)
        for name, item in value.items():
            if keyed:
                yield (*at, KeyOf(name))
            yield from places(item, free, (*at, name))


def placed(value: Any, place: Place, text: str) -> Any:
    """`value` with `text` at `place` (a copy; a KeyOf renames that key, keeping its value)."""
    if not place:
        return text
    step, rest = place[0], place[1:]
    if isinstance(step, KeyOf):
        return {(text if key == step.name else key): item for key, item in value.items()}
    copied = list(value) if isinstance(value, list) else dict(value)
    copied[step] = placed(value[step], rest, text)
    return copied


def pointer(place: Place, text: str) -> str:
    """The JSON pointer the door names for `text` at `place` (a key is named as it is now,
    U+FFFD in place of each surrogate)."""
    steps = [replace_surrogates(text) if isinstance(s, KeyOf) else str(s) for s in place]
    return "".join("/" + s.replace("~", "~0").replace("/", "~1") for s in steps)


# The places of a body do not depend on the ids its World holds: a sample World will do.
SAMPLE = World()
TARGETS = [
    (route, variant, place)
    for route, bodies in sorted(BODIES.items())
    for variant, body in enumerate(bodies)
    for place in places(body.value(SAMPLE), body.free)
]

# A route first, then a place in its body: a receipt's dozens of strings do not crowd out the
# one string of a session's input.
EACH_ROUTE_ALIKE = st.sampled_from(sorted(BODIES)).flatmap(
    lambda route: st.sampled_from([target for target in TARGETS if target[0] == route])
)


def test_the_tables_give_the_property_its_bodies() -> None:
    # A new POST route with a body is covered the day it is added: it needs a valid body here.
    assert set(BODIES) | WITHOUT_TEXT == WITH_BODY
    for route in WITHOUT_TEXT:
        ref = ROUTES[route]["request"]
        assert not string_paths({"$ref": ref}, schema_uri(ref)), route
    for route, bodies in BODIES.items():
        for body in bodies:
            reference_validator(ROUTES[route]["request"]).validate(body.value(SAMPLE))
    assert {"/api/routes/invocations", "/api/sessions", "/api/trace"} <= set(LISTS)
    assert ("invocations.create", 0, ("requestId",)) in TARGETS
    assert ("invocations.create", 0, ("input", KeyOf("note"))) in TARGETS
    assert ("mcp.operations", 0, ("params", "arguments", "text")) in TARGETS


# --- the server ------------------------------------------------------------------------------


@dataclass
class Live:
    server: DevServer
    client: Client
    world: World


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    root = Path(tmp_path_factory.mktemp("door"))
    members = {"mcpServers": [{"name": "tools", "kind": "compiled", "server": "mcp_tools:server"}]}
    project = route_project(root / "project", members, {"mcp_tools.py": TOOLS})
    with kit_server(
        root, project, check_responses=True, host_executables={"host_a": host("sleep")}
    ) as server:
        client = Client(server.port, server.session_token)
        assert server.project is not None
        active = server.project.active_epoch()
        assert active is not None
        launches = client.request(
            "GET", f"/api/mcp/launches?epochId={active[0]}&serverName=tools", timeout=60
        )
        (launch,) = launches.json()["launches"]
        session = client.create("host_a")["id"]
        generation = server.status()["runtime"]["generationId"]
        world = World(session, launch["launchId"], active[0], generation)
        # The MCP server starts at its first call (the SDK loads then): not in an example's time.
        first = BODIES["mcp.operations"][0]
        reply = client.request(
            "POST", first.path.format(**vars(world)), first.value(world), timeout=60
        )
        assert reply.status == 200, reply.json()
        yield Live(server, client, world)


@contextlib.contextmanager
def fresh(live: Live, needs: str | None) -> Iterator[World]:
    """The live World, with a fresh pending App binding or an open multiplexed stream (closed
    afterwards) when a body needs one."""
    client, world = live.client, live.world
    if needs == "binding":
        path = f"/api/mcp/sessions/{world.launch}/apps"
        reply = client.request("POST", path, {"toolName": "echo", "input": {}})
        assert reply.status == 201, reply.json()
        yield replace(world, binding=reply.json()["binding"]["bindingId"])
    elif needs == "stream":
        conn = client.connect("POST", "/api/multiplex/stream", {"subscriptions": []})
        sock = conn.sock
        response = conn.getresponse()
        try:
            assert response.status == 200
            opened = json.loads(response.readline())
            yield replace(world, stream=opened["streamId"])
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            response.close()
            conn.close()
    else:
        yield world


def send(live: Live, path: str, data: bytes, stream: bool) -> tuple[int, Any]:
    """POST `data` to `path` with both credentials (each guard looks at its own only); the
    status and the answer's JSON (None for none, or for a stream)."""
    server = live.server
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    headers = {
        "Host": f"127.0.0.1:{server.port}",
        "Content-Type": "application/json",
        "x-bundle-session": server.session_token,
        "Authorization": f"Bearer {server.receipt_token}",
    }
    try:
        conn.request("POST", path, body=data, headers=headers)
        response = conn.getresponse()
        if stream and response.status == 200:
            response.close()
            return response.status, None
        raw = response.read()
        # Strict UTF-8: an answer never carries a surrogate out.
        return response.status, json.loads(raw.decode("utf-8")) if raw else None
    finally:
        conn.close()


def strings(value: Any) -> Iterator[str]:
    """Every string of a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)


def assert_lists_answer(client: Client) -> None:
    for listed in LISTS:
        reply = client.request("GET", listed)
        assert reply.status == 200, (listed, reply.data[:300])
        reply.data.decode("utf-8")  # strict: no surrogate ever goes out


def assert_refused(route: dict[str, Any], status: int, answer: Any, context: Any) -> str:
    """A 4xx in the envelope with a code the route documents; the code."""
    assert 400 <= status < 500, context
    ENVELOPE.validate(answer)
    code: str = answer["error"]["code"]
    assert code in effective_errors(get_spec(), route), (code, context)
    return code


def encodable(text: str) -> bool:
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(target=EACH_ROUTE_ALIKE, text=TEXT, as_utf8=st.booleans())
def test_any_text_in_any_string_field_is_never_a_server_error(
    live: Live, target: tuple[str, int, Place], text: str, as_utf8: bool
) -> None:
    route_id, variant, place = target
    route, made = ROUTES[route_id], BODIES[route_id][variant]
    malformed = request_error(route).code
    context = (route_id, place, text, as_utf8)
    with fresh(live, made.needs) as world:
        body = placed(made.value(world), place, text)
        # As JSON escapes (\ud800 for a lone surrogate; a high one and a low one in a row are
        # one character), or as the characters' own bytes (a surrogate's CESU-8 bytes, which
        # are no UTF-8).
        data = (
            json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
            if as_utf8
            else json.dumps(body).encode("ascii")
        )
        status, answer = send(live, made.path.format(**vars(world)), data, made.stream)
    if route_id == "sessions.create" and status == 201:  # active sessions are limited
        ended = f"/api/sessions/{answer['session']['id']}/terminate"
        assert live.client.request("POST", ended, {}).status == 200
    read = text if as_utf8 else json.loads(json.dumps(text))  # the text the server reads
    if not encodable(read):
        assert status == 400, (status, answer, context)
        assert assert_refused(route, status, answer, context) == malformed
        if not as_utf8:  # parsed, then refused for its text: the door says where
            assert answer["error"]["details"] == {"in": "body", "path": pointer(place, read)}
    elif not reference_validator(route["request"]).is_valid(placed(body, place, read)):
        assert status == 400, (status, answer, context)
        assert assert_refused(route, status, answer, context) == malformed
    else:
        assert status < 500 and status != 400, (status, answer, context)
        if status >= 400:
            assert_refused(route, status, answer, context)
        elif answer is not None and any(place[: len(e)] == e for e in made.echoes):
            assert read in set(strings(answer)), (answer, context)
    assert_lists_answer(live.client)


# --- query and path values ---------------------------------------------------------------------


# A valid value for each query and path parameter of the JSON GET routes (a World's ids, or
# the shape the schema asks for; an unknown id is a 404, which is fine).
def valid_values(world: World) -> dict[str, str]:
    return {
        "epochId": world.epoch,
        "serverName": "tools",
        "mcpSessionId": world.launch,
        "sessionId": world.session,
        "operationId": "op-1",
        "invocationId": "ri_0123456789abcdef",
        "runId": "rr_0123456789abcdef",
        "mcpMessageId": "mm_0123456789abcdef",
        "collectionName": "smoke",
        "limit": "5",
        "after": "0",
        "state": "all",
    }


GETS = sorted(
    (row["id"], where, name)
    for row in ROUTES.values()
    if row["method"] == "GET" and row.get("transport") == "json"
    for where, names in (("path", row.get("params", {})), ("query", row.get("query", {})))
    for name in names
)


def url(route: dict[str, Any], values: dict[str, str], where: str, name: str, raw: bytes) -> str:
    """The route's path and query with `raw` percent-encoded as parameter `name`."""
    encoded = {key: quote(value, safe="") for key, value in values.items()}
    encoded[name] = quote(raw, safe="")
    path = route["path"]
    for param in route.get("params", {}):
        path = path.replace("{" + param + "}", encoded[param])
    query = [f"{q}={encoded[q]}" for q in route.get("query", {}) if q == name or q in values]
    return path + ("?" + "&".join(query) if query else "")


def test_the_tables_give_the_query_property_its_values() -> None:
    assert {name for _, _, name in GETS} <= set(valid_values(SAMPLE))
    assert ("mcp.launches", "query", "epochId") in GETS
    assert ("mcp.sessions.get", "path", "mcpSessionId") in GETS


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(target=st.sampled_from(GETS), raw=VALUE_BYTES)
def test_any_bytes_in_a_query_or_path_value_are_never_a_server_error(
    live: Live, target: tuple[str, str, str], raw: bytes
) -> None:
    route_id, where, name = target
    route = ROUTES[route_id]
    assume(raw or where == "query")  # an empty path value makes another path
    reply = live.client.request("GET", url(route, valid_values(live.world), where, name, raw))
    context = (route_id, where, name, raw)
    text = reply.data.decode("utf-8")  # strict
    assert reply.status < 500, (reply.status, text, context)
    if reply.status >= 400:
        assert_refused(route, reply.status, json.loads(text), context)
    assert_lists_answer(live.client)


def test_a_query_value_that_is_not_utf8_is_kept_as_written(live: Live) -> None:
    # werkzeug keeps a percent-escape that is not UTF-8 as the escape's own text: the value
    # holds no surrogate, and the answer names it as the client wrote it.
    for escaped in ("%ED%A0%80", "%FF", "a%C0%AFb"):
        reply = live.client.request("GET", f"/api/mcp/launches?epochId={escaped}&serverName=tools")
        assert (reply.status, reply.code()) == (404, "BX3203")
        assert reply.json()["error"]["details"]["epochId"] == escaped
        reply = live.client.request(
            "GET", f"/api/mcp/launches?epochId={live.world.epoch}&serverName={escaped}"
        )
        assert (reply.status, reply.code()) == (404, "BX3203")
        assert reply.json()["error"]["details"]["serverName"] == escaped


def test_a_path_value_that_is_not_utf8_reads_as_replacement_characters(live: Live) -> None:
    # A path's bytes are read as UTF-8 with U+FFFD for what is not (werkzeug's decoding).
    reply = live.client.request("GET", "/api/mcp/sessions/%ED%A0%80")
    assert (reply.status, reply.code()) == (404, "BX3203")
    assert reply.json()["error"]["details"]["mcpSessionId"] == "\ufffd" * 3
    reply = live.client.request("GET", "/api/sessions/a%FFb")
    assert (reply.status, reply.code()) == (400, "AB8261")
    assert "a\ufffdb" in reply.json()["error"]["message"]


@pytest.mark.parametrize(
    ("route_id", "where", "name", "values"),
    [
        ("mcp.launches", "query", "epochId", {"epochId": "e\ud800", "serverName": "tools"}),
        ("mcp.sessions.get", "path", "mcpSessionId", {"mcpSessionId": "ml_\udfff"}),
        ("sessions.get", "path", "sessionId", {"sessionId": "\ud83d"}),
    ],
)
def test_the_door_refuses_a_surrogate_any_server_hands_it_in_a_query_or_path_value(
    route_id: str, where: str, name: str, values: dict[str, str]
) -> None:
    # Over HTTP none arrives (above); a server that decoded otherwise would still not pass one.
    route = ROUTES[route_id]
    with pytest.raises(ContractError) as refused:
        if where == "query":
            query_values(route, MultiDict(values))
        else:
            path_params(route, values)
    assert refused.value.code == request_error(route).code
    assert refused.value.details == {"in": f"{where} parameter {name}", "path": "/"}
