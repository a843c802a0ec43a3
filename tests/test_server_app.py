"""The WSGI app over a real loopback socket: routing, guard, bodies, errors, headers, replay.

See `_live.py` for how the server runs; streams, receipts and the Workbench page have their
own test modules.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from _live import TOKEN, Response, Server, serve
from werkzeug.wrappers import Response as WerkzeugResponse

from bundle_contract._openapi import openapi_document
from bundle_contract._schemas import reference_validator
from bundle_contract._spec import get_spec
from bundle_server import complete_groups, create_app, unhandled_routes, unknown_handlers
from bundle_server._http.app import INTERNAL_ERROR, SECURITY_HEADERS
from bundle_server._http.routing import HANDLERS, Call, Reply
from bundle_server.trace.hub import TraceHub

RETENTION = 4
DELIVERED_GROUPS = {
    "workbench",
    "trace",
    "logs",
    "receipts",
    "sessions",
    "project",
    "notices",
    "invocations",
    "multiplex",
    "runtime",
    "mcp",
}


@pytest.fixture(scope="module")
def live() -> Iterator[Server]:
    """The app as delivered: the registered handlers only."""
    yield from serve(TraceHub(retention=RETENTION))


def echo(call: Call) -> WerkzeugResponse:
    # A raw response: probes report what the pipeline parsed, outside any response schema.
    body = {"params": call.params, "query": call.query, "body": call.body}
    return WerkzeugResponse(json.dumps(body), 200, content_type="application/json")


def off_contract(call: Call) -> Reply:
    return Reply(200, {"entries": "not a list"})


def off_status(call: Call) -> Reply:
    # The row declares 202 only.
    return Reply(200, {"invocation": {"secret": "undeclared-status-body"}})


def boom(call: Call) -> Any:
    raise RuntimeError("secret-internal-detail")


@pytest.fixture(scope="module")
def probe() -> Iterator[Server]:
    """Test handlers on rows with bodies, params and queries; a closed hub; a failing route."""
    hub = TraceHub()
    hub.close()
    handlers = {
        **HANDLERS,
        "sessions.resize": echo,
        "runtime.create": echo,
        "mcp.launches": echo,
        "invocations.list": echo,
        "invocations.get": echo,
        "runtime.list": boom,
        "runtime.get": off_contract,
        "invocations.cancel": off_status,
    }
    yield from serve(hub, handlers)


def assert_security_headers(response: Response) -> None:
    for name, value in SECURITY_HEADERS:
        assert response.headers.get(name) == value, name
    assert not any(h.lower() == "access-control-allow-origin" for h in response.headers)


# --- routing and the registry ---


def test_registry_matches_the_table() -> None:
    assert unknown_handlers(HANDLERS) == []
    routes = get_spec().rows("routes", "route")
    delivered = {row["id"] for row in routes if row["group"] in DELIVERED_GROUPS}
    # Every route of a delivered group has a handler, and nothing else is served (no stubs).
    assert set(HANDLERS) == delivered
    rows = {row["id"] for row in routes}
    assert set(unhandled_routes()) == rows - set(HANDLERS)
    assert complete_groups() == sorted(DELIVERED_GROUPS)
    groups = {g["name"] for g in get_spec().rows("routes", "group")}
    assert complete_groups(rows) == sorted(groups)
    assert complete_groups(["trace.replay", "trace.stream"]) == ["trace"]


def test_create_app_refuses_unknown_and_unguarded_routes(monkeypatch: pytest.MonkeyPatch) -> None:
    hub = TraceHub()
    with pytest.raises(ValueError, match=r"nope\.route"):
        create_app(port=1, session_token=TOKEN, hub=hub, handlers={"nope.route": echo})
    # An auth class routes.toml might gain without a guard here must never be served.
    monkeypatch.setattr("bundle_server._http.app.GUARDED_AUTH", ("browser", "bootstrap"))
    with pytest.raises(ValueError, match=r"trace\.receipts"):
        create_app(port=1, session_token=TOKEN, hub=hub, handlers={"trace.receipts": echo})
    monkeypatch.undo()
    assert create_app(port=1, session_token=TOKEN, hub=hub).mounted == sorted(HANDLERS)


@pytest.mark.parametrize("auth", [True, False])
def test_unknown_path_is_404_envelope(live: Server, auth: bool) -> None:
    for path in (
        "/nope",
        "/api/mcp/nope",
        "/api//trace",
        "/api/trace/",
        "/trace/",
        "/index.html",
    ):
        response = live.get(path, auth=auth)
        assert (response.status, response.code()) == (404, "BX1001"), path
        assert_security_headers(response)


def test_wrong_method_is_405_with_allow(live: Server) -> None:
    for method, path in (("POST", "/api/trace"), ("DELETE", "/api/openapi.json")):
        response = live.request(method, path, body=b"" if method == "POST" else None)
        assert (response.status, response.code()) == (405, "BX1002")
        assert response.headers["Allow"] == "GET, HEAD"
        assert response.json()["error"]["details"]["allow"] == ["GET", "HEAD"]
        assert_security_headers(response)
    response = live.request("OPTIONS", "/api/trace", headers={"Origin": "http://evil.example"})
    assert response.status == 405
    assert_security_headers(response)


# --- guard ---


@pytest.mark.parametrize(
    "host",
    [
        None,
        "",
        "evil.example",
        "localhost.evil.com:{port}",
        "127.0.0.1",
        "127.0.0.1:1",
        "127.0.0.2:{port}",
        "0.0.0.0:{port}",
        "127.0.0.1:{port}.evil.com",
    ],
)
def test_foreign_host_is_403(live: Server, host: str | None) -> None:
    value = None if host is None else host.format(port=live.port)
    response = live.get("/api/trace", host=value)
    assert (response.status, response.code()) == (403, "BX2002")
    assert_security_headers(response)


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}"])
def test_loopback_hosts_pass(live: Server, host: str) -> None:
    assert live.get("/api/trace", host=host.format(port=live.port)).status == 200


def test_host_is_checked_before_the_session(live: Server) -> None:
    response = live.get("/api/trace", host="evil.example", auth=False)
    assert response.code() == "BX2002"
    response = live.get("/api/trace", headers={"Origin": "null"}, auth=False)
    assert response.code() == "BX2003"


@pytest.mark.parametrize(
    "origin",
    [
        "null",
        "http://evil.example",
        "http://127.0.0.1:1",
        "https://127.0.0.1:{port}",
        "http://localhost:{port}",
        "http://127.0.0.1:{port}/",
        "http://localhost:5174",
    ],
)
def test_foreign_origin_is_403(live: Server, origin: str) -> None:
    response = live.get("/api/trace", headers={"Origin": origin.format(port=live.port)})
    assert (response.status, response.code()) == (403, "BX2003")
    assert_security_headers(response)


@pytest.mark.parametrize("origin", ["http://127.0.0.1:{port}", "http://localhost:5173"])
def test_own_and_dev_origins_pass(live: Server, origin: str) -> None:
    response = live.get("/api/trace", headers={"Origin": origin.format(port=live.port)})
    assert response.status == 200
    assert_security_headers(response)


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "wrong",
        "u" * len(TOKEN),
        TOKEN[:-1],
        TOKEN + "t",
        "t" * 300,
        ("t" * 42 + "é").encode("utf-8"),
        ("t" * 42 + "é").encode("latin-1"),
    ],
)
def test_bad_session_is_401_never_500(live: Server, value: str | bytes | None) -> None:
    headers = {} if value is None else {"x-bundle-session": value}
    response = live.get("/api/trace", headers=headers, auth=False)
    assert (response.status, response.code()) == (401, "BX2001")
    assert_security_headers(response)


def test_session_header_name_comes_from_the_auth_row(live: Server) -> None:
    response = live.get("/api/trace", headers={"X-Bundle-Session": TOKEN}, auth=False)
    assert response.status == 200
    response = live.get("/api/trace", headers={"Authorization": f"Bearer {TOKEN}"}, auth=False)
    assert response.status == 401


# --- handlers ---


def test_openapi_is_served(live: Server) -> None:
    response = live.get("/api/openapi.json")
    assert response.status == 200
    assert_security_headers(response)
    expected = openapi_document(f"http://127.0.0.1:{live.port}", route_ids=sorted(HANDLERS))
    assert response.json() == json.loads(json.dumps(expected))
    # It describes what this server serves: the mounted routes, no more.
    operations = {(m.upper(), p) for p, item in response.json()["paths"].items() for m in item}
    rows = get_spec().rows("routes", "route")
    assert operations == {(r["method"], r["path"]) for r in rows if r["id"] in HANDLERS}
    assert live.get("/api/openapi.json", auth=False).status == 401


def test_trace_replay_gap_and_cursors(live: Server) -> None:
    hub, validator = live.hub, reference_validator("TraceReplay.json")
    start = hub.latest_sequence
    empty = live.get(f"/api/trace?after={start}").json()
    assert empty == {"entries": [], "latestSequence": start}
    for index in range(RETENTION + 2):
        hub.publish("log", "test.entry", f"entry {index}", {"requestId": f"r{index}"})
    latest = hub.latest_sequence
    for path in ("/api/trace", "/api/trace?after=0"):
        replay = live.get(path).json()
        validator.validate(replay)
        assert [e["sequence"] for e in replay["entries"]] == list(
            range(latest - RETENTION + 1, latest + 1)
        )
        assert replay["gap"] == {
            "type": "trace.gap",
            "droppedCount": latest - RETENTION,
            "firstAvailableSequence": latest - RETENTION + 1,
            "requestedAfterSequence": 0,
            "droppedBySource": {"log": latest - RETENTION},
        }
    tail = live.get(f"/api/trace?after={latest - 1}").json()
    validator.validate(tail)
    assert [e["summary"] for e in tail["entries"]] == [f"entry {RETENTION + 1}"]
    assert "gap" not in tail and tail["latestSequence"] == latest
    ahead = live.get(f"/api/trace?after={latest + 1}")
    assert (ahead.status, ahead.code()) == (409, "BX3002")
    assert_security_headers(ahead)


@pytest.mark.parametrize(
    "cursor", ["-1", "x", "1.5", "", "9007199254740992", "%20", "1e3", "0x1", "%EF%BC%91"]
)
def test_malformed_cursor_is_400(live: Server, cursor: str) -> None:
    response = live.get(f"/api/trace?after={cursor}")
    assert (response.status, response.code()) == (400, "BX3001")


def test_closed_hub_is_503(probe: Server) -> None:
    response = probe.get("/api/trace")
    assert (response.status, response.code()) == (503, "BX3003")


def test_unexpected_failure_is_a_generic_500(
    probe: Server, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="bundle_server"):
        response = probe.get("/api/runtime/runs")
    assert any("secret-internal-detail" in r.exc_text for r in caplog.records if r.exc_text)
    assert response.status == 500
    assert response.json() == INTERNAL_ERROR
    assert b"secret-internal-detail" not in response.data
    assert b"Traceback" not in response.data
    assert_security_headers(response)


def test_a_body_off_the_contract_is_never_sent(
    probe: Server, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="bundle_server"):
        response = probe.get("/api/runtime/runs/rr_0123456789abcdef")
    assert any("does not conform" in r.getMessage() + str(r.exc_text) for r in caplog.records)
    assert response.status == 500
    assert response.json() == INTERNAL_ERROR
    assert b"not a list" not in response.data


def test_an_undeclared_status_is_never_sent(
    probe: Server, caplog: pytest.LogCaptureFixture
) -> None:
    path = "/api/routes/invocations/ri_0123456789abcdef/cancel"
    with caplog.at_level(logging.ERROR, logger="bundle_server"):
        response = probe.request("POST", path, body=b"")
    message = "invocations.cancel: status 200 is not declared"
    assert any(message in r.getMessage() + str(r.exc_text) for r in caplog.records)
    assert response.status == 500
    assert response.code() == INTERNAL_ERROR["error"]["code"]
    assert response.json() == INTERNAL_ERROR
    assert b"undeclared-status-body" not in response.data
    assert_security_headers(response)


# --- bodies, path and query parameters (test handlers) ---

JSON = {"Content-Type": "application/json"}


def test_valid_body_reaches_the_handler(probe: Server) -> None:
    path = "/api/sessions/hs_0123456789abcdef/resize"
    headers = {"Content-Type": "application/json; charset=utf-8"}
    response = probe.request("POST", path, headers, b'{"cols": 80, "rows": 24}')
    assert response.status == 200
    assert response.json()["body"] == {"cols": 80, "rows": 24}
    assert response.json()["params"] == {"sessionId": "hs_0123456789abcdef"}


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({"Content-Type": "text/plain"}, b'{"cols": 80, "rows": 24}'),
        ({"Content-Type": "application/jsonx"}, b'{"cols": 80, "rows": 24}'),
        ({}, b'{"cols": 80, "rows": 24}'),
        (JSON, b"{"),
        (JSON, b'{"cols": NaN, "rows": 24}'),
        (JSON, b"\xff"),
        (JSON, b"[" * 100_000),
        (JSON, b'{"cols": 0, "rows": 24}'),
        (JSON, b'{"cols": 80, "rows": 24, "extra": 1}'),
        (JSON, b""),
    ],
)
def test_bad_body_uses_the_rows_request_error(
    probe: Server, headers: dict[str, str], body: bytes
) -> None:
    response = probe.request("POST", "/api/sessions/hs_0123456789abcdef/resize", headers, body)
    assert (response.status, response.code()) == (400, "AB8261")


@pytest.mark.parametrize(
    ("headers", "body", "status", "code"),
    [
        ({"Content-Type": "text/plain"}, b"{}", 415, "BX1003"),
        (JSON, b"nope", 400, "BX1004"),
        (JSON, b'{"surfaceId": 1}', 400, "BX1004"),
    ],
)
def test_bad_body_without_request_error(
    probe: Server, headers: dict[str, str], body: bytes, status: int, code: str
) -> None:
    response = probe.request("POST", "/api/runtime/runs", headers, body)
    assert (response.status, response.code()) == (status, code)
    assert_security_headers(response)


@pytest.mark.parametrize(
    ("path", "code"),
    [("/api/runtime/runs", "BX1005"), ("/api/sessions/hs_0123456789abcdef/resize", "AB8261")],
)
def test_declared_oversize_body_is_refused_unread(probe: Server, path: str, code: str) -> None:
    # Nothing after the headers is sent: a server that read the body would time out instead.
    limit = get_spec().limit("json-body")["maximum"]
    headers = {**JSON, "Content-Length": str(limit + 1)}
    response = probe.request("POST", path, headers, b"")
    assert (response.status, response.code()) == (413, code)


def test_chunked_oversize_body_is_413(probe: Server) -> None:
    limit = get_spec().limit("json-body")["maximum"]
    data = b'"' + b"a" * limit + b'"'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)
    headers = {**JSON, "Transfer-Encoding": "chunked"}
    response = probe.request("POST", "/api/runtime/runs", headers, chunked)
    assert (response.status, response.code()) == (413, "BX1005")


def test_path_parameters_are_validated(probe: Server) -> None:
    response = probe.get("/api/sessions/hs_NOPE/resize")
    assert response.status == 405  # the path exists for POST only
    response = probe.request("POST", "/api/sessions/hs_NOPE/resize", JSON, b'{"cols":1,"rows":1}')
    assert (response.status, response.code()) == (400, "AB8261")
    response = probe.get("/api/routes/invocations/ri_0123456789abcdef")
    assert response.json()["params"] == {"invocationId": "ri_0123456789abcdef"}
    response = probe.get("/api/routes/invocations/hs_0123456789abcdef")
    assert (response.status, response.code()) == (400, "BX1004")


def test_query_parameters_are_parsed_and_validated(probe: Server) -> None:
    response = probe.get("/api/mcp/launches?epochId=e1&serverName=s&other=x")
    assert response.json()["query"] == {"epochId": "e1", "serverName": "s"}
    response = probe.get("/api/mcp/launches?epochId=e1")
    assert (response.status, response.code()) == (400, "BX1004")
    response = probe.get("/api/mcp/launches?epochId=&serverName=s")
    assert (response.status, response.code()) == (400, "BX1004")
    assert probe.get("/api/routes/invocations?limit=5").json()["query"] == {"limit": 5}
    assert probe.get("/api/routes/invocations").json()["query"] == {}
    for bad in ("0", "201", "abc", "5.0"):
        response = probe.get(f"/api/routes/invocations?limit={bad}")
        assert (response.status, response.code()) == (400, "BX1004"), bad


def test_the_internal_error_envelope_conforms() -> None:
    from bundle_contract._schemas import reference_validator

    assert reference_validator("ErrorEnvelope.json").is_valid(INTERNAL_ERROR)
