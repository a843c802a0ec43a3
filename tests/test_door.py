"""The HTTP door (`_http.request`, `_http.strict_json`): text UTF-8 cannot carry, a key given
twice and an integral float where the schema says integer are refused with the route's own
malformed-request code; and text that got in below the door never takes a list down.

Live requests go to the real app in the gevent shell (`_live.serve`), with no services
mounted: the door answers before any handler runs, so a refusal here is the door's.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _live import RECEIPT_TOKEN, TOKEN, Server, serve, wait_for

from bundle_contract._error_bases import ContractError
from bundle_contract._validation import validate
from bundle_server._http.strict_json import DuplicateKey, WrittenFraction, loads
from bundle_server.invocations.service import InvocationService
from bundle_server.trace.hub import TraceHub

SESSION = {"host": "host_a", "cols": 80, "rows": 24}
EXECUTION = {"event": "tool/before", "executionId": "x1", "host": "host_a", "nativeEvent": "x"}
RECEIPT = (
    '{"version": 1, "execution": %s, "startedAt": "2025-01-31T12:00:00Z", "events": [],'
    ' "host": "host_a", %s"lineage": {"axis": "turn", "value": "t1"}}'
)


@pytest.fixture
def server() -> Iterator[Server]:
    yield from serve(TraceHub())


def post(server: Server, path: str, text: str, **headers: str) -> tuple[int, dict[str, Any]]:
    """POST JSON text as written (json.dumps would escape a surrogate the same way)."""
    sent = {"Content-Type": "application/json", **headers}
    reply = server.request("POST", path, sent, text.encode("ascii"))
    return reply.status, json.loads(reply.data) if reply.data else {}


# --- text UTF-8 cannot carry -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "code", "where"),
    [
        # The report's request: stored, never run, and every list a 500 from then on.
        (
            "/api/routes/invocations",
            {"routeId": "stop-review", "requestId": "\ud800"},
            "BX1004",
            "/requestId",
        ),
        ("/api/routes/invocations", {"routeId": "a\udfffb"}, "BX1004", "/routeId"),
        ("/api/sessions", SESSION | {"prompt": "x\udc00"}, "AB8261", "/prompt"),
        ("/api/project/builds", {"paths": ["ok", "\ud83d"]}, "BX1004", "/paths/1"),
        ("/api/routes/invocations", {"routeId": "r", "input": {"\ud800": 1}}, "BX1004", None),
    ],
    ids=["requestId", "routeId", "session-prompt", "array-item", "object-key"],
)
def test_a_lone_surrogate_in_a_body_is_a_400_in_the_routes_envelope(
    server: Server, path: str, body: dict[str, Any], code: str, where: str | None
) -> None:
    status, envelope = post(server, path, json.dumps(body))
    assert (status, envelope["error"]["code"]) == (400, code), envelope
    assert envelope["error"]["details"]["in"] == "body"
    if where is not None:
        assert envelope["error"]["details"]["path"] == where
    assert "\ud800" not in json.dumps(envelope, ensure_ascii=False)


def test_a_valid_surrogate_pair_is_text_and_passes_the_door(server: Server) -> None:
    # An escaped pair is one code point (U+1F600): the door lets it through to the handler,
    # which answers that its service is not mounted here.
    status, envelope = post(server, "/api/routes/invocations", '{"routeId": "\\ud83d\\ude00"}')
    assert status == 503, envelope


# --- duplicate keys and integral floats ----------------------------------------------------------


def test_a_key_given_twice_is_a_400(server: Server) -> None:
    auth = {"Authorization": f"Bearer {RECEIPT_TOKEN}"}
    once = RECEIPT % (json.dumps(EXECUTION), "")
    assert post(server, "/api/trace/receipts", once, **auth)[0] == 204
    twice = RECEIPT % (json.dumps(EXECUTION), '"host": "host_b", ')
    status, envelope = post(server, "/api/trace/receipts", twice, **auth)
    assert (status, envelope["error"]["code"]) == (400, "BX1004"), envelope
    assert "'host' appears twice" in envelope["error"]["message"]


@pytest.mark.parametrize("cols", ["80.0", "8e1", "80.5"])
def test_a_number_written_with_a_fraction_is_not_an_integer(server: Server, cols: str) -> None:
    text = '{"host": "host_a", "cols": ' + cols + ', "rows": 24}'
    status, envelope = post(server, "/api/sessions", text)
    assert (status, envelope["error"]["code"]) == (400, "AB8261"), envelope
    assert envelope["error"]["details"]["path"] == "$.cols"


def test_strict_parsing_keeps_numbers_and_refuses_repeats() -> None:
    validate("SessionCreateRequest.json", loads('{"host": "host_a", "cols": 80, "rows": 24}'))
    with pytest.raises(ContractError):
        validate("SessionCreateRequest.json", loads('{"host": "host_a", "cols": 80.0, "rows": 1}'))
    # Where the schema says number, a fraction is still a number, and keeps its value.
    duration = loads("2.0")
    assert isinstance(duration, WrittenFraction) and duration == 2.0
    validate("DurationMs.json", duration)
    with pytest.raises(DuplicateKey):
        loads('{"a": {"b": 1, "b": 1}}')
    with pytest.raises(ValueError, match="NaN"):
        loads('{"a": NaN}')
    for overflow in ("1e400", "-1e400", '{"a": [2.5e308]}'):
        with pytest.raises(ValueError, match="not finite"):
            loads(overflow)


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1.5E+999"])
def test_a_number_too_large_for_a_float_is_a_400(server: Server, number: str) -> None:
    # Read as a float it is inf, which no JSON encoder may write: stored, it broke every list
    # and get that held it. Refused at the door, before any handler (here: none mounted).
    text = f'{{"routeId": "r", "input": {number}}}'
    status, envelope = post(server, "/api/routes/invocations", text)
    assert (status, envelope["error"]["code"]) == (400, "BX1004"), envelope
    assert "not finite" in envelope["error"]["message"]


# --- below the door --------------------------------------------------------------------------


def test_a_trace_entry_that_cannot_be_encoded_keeps_the_trace_answering(server: Server) -> None:
    # Published below the door (as a worker's reply could be): the list stays 200, the text
    # goes out with U+FFFD in place of the lone surrogate.
    server.hub.publish("invocation", "kernel.note", "broken \ud800 text", {"requestId": "\udfff"})
    server.hub.publish("invocation", "kernel.note", "fine", {})
    reply = server.get("/api/trace?after=0")
    assert reply.status == 200
    entries = [e for e in reply.json()["entries"] if e["source"] == "invocation"]
    assert [e["summary"] for e in entries] == ["broken \ufffd text", "fine"]
    assert entries[0]["correlation"] == {"requestId": "\ufffd"}

    def reported() -> bool:  # loud: a warning in the log, mirrored into the trace
        found = server.get("/api/trace?after=0").json()["entries"]
        return any(e["source"] == "log" and "lone surrogate" in e["summary"] for e in found)

    wait_for(reported)


def test_an_invocation_that_could_not_be_published_is_never_stored(tmp_path: Path) -> None:
    manifest = {"routes": [{"id": "stop-review", "handler": "routes:review", "event": "x"}]}
    (tmp_path / "bundle.manifest.json").write_text(json.dumps(manifest))
    service = InvocationService(lambda: ("ep_1", tmp_path))
    with pytest.raises(ValueError, match="/requestId"):
        service.start({"routeId": "stop-review", "requestId": "\ud800"})
    # A number the lists' encoder cannot write (inf, as 1e400 reads) is refused the same way.
    for number in (float("inf"), float("-inf"), float("nan")):
        with pytest.raises(ValueError, match="/input/n/0"):
            service.start({"routeId": "stop-review", "input": {"n": [number]}})
    assert service.recent(50) == []


def test_a_record_holding_a_non_finite_number_keeps_the_trace_answering(server: Server) -> None:
    # Published below the door: the list stays 200, the number goes out as null.
    server.hub.publish("invocation", "kernel.note", "inf", {}, details={"n": [float("inf"), 1.5]})
    reply = server.get("/api/trace?after=0")
    assert reply.status == 200
    [entry] = [e for e in reply.json()["entries"] if e["source"] == "invocation"]
    assert entry["details"] == {"n": [None, 1.5]}

    def reported() -> bool:  # loud: a warning in the log, mirrored into the trace
        found = server.get("/api/trace?after=0").json()["entries"]
        return any(e["source"] == "log" and "non-finite number" in e["summary"] for e in found)

    wait_for(reported)


# --- ambiguous credentials ---------------------------------------------------------------------


def send_pairs(server: Server, path: str, pairs: list[tuple[str, str]], body: bytes = b"") -> int:
    """A request with header lines exactly as given (repeats included); its status."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.putrequest("POST" if body else "GET", path, skip_host=True, skip_accept_encoding=True)
    for name, value in [("Host", server.host), *pairs]:
        conn.putheader(name, value)
    if body:
        conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body or None)
    try:
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@pytest.mark.parametrize("right_first", [True, False], ids=["right-first", "right-last"])
def test_two_credentials_are_refused_even_when_one_is_right(
    server: Server, right_first: bool
) -> None:
    def twice(name: str, right: str, wrong: str) -> list[tuple[str, str]]:
        return [(name, right), (name, wrong)] if right_first else [(name, wrong), (name, right)]

    receipt = (RECEIPT % (json.dumps(EXECUTION), "")).encode()
    bearer = twice("Authorization", f"Bearer {RECEIPT_TOKEN}", "Bearer wrong")
    json_type = [("Content-Type", "application/json")]
    assert send_pairs(server, "/api/trace/receipts", bearer[:1] + json_type, receipt) in (204, 401)
    assert send_pairs(server, "/api/trace/receipts", bearer + json_type, receipt) == 401
    assert send_pairs(server, "/api/trace", [("x-bundle-session", TOKEN)]) == 200
    assert send_pairs(server, "/api/trace", twice("x-bundle-session", TOKEN, "t" * 42)) == 401
    cookie = f"bundle_session_{server.port}"
    right, wrong = f"{cookie}={TOKEN}", f"{cookie}={'x' * 43}"
    assert send_pairs(server, "/api/trace", [("Cookie", right)]) == 200
    both = f"{right}; {wrong}" if right_first else f"{wrong}; {right}"
    assert send_pairs(server, "/api/trace", [("Cookie", both)]) == 401
