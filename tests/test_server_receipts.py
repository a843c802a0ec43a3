"""POST /api/trace/receipts over a real socket: seed 000 Authentication 2-7 and the 16 KiB
limit, and what a valid receipt becomes in the trace and the raw logs."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from _live import RECEIPT_TOKEN, TOKEN, Server, serve
from werkzeug.test import Client

from bundle_contract._spec import get_spec
from bundle_server import create_app
from bundle_server._http.guard import check_peer
from bundle_server.receipts.entries import receipt_entries
from bundle_server.trace.hub import TraceHub

PATH = "/api/trace/receipts"
EXECUTION = {
    "event": "tool/before",
    "executionId": "x1",
    "host": "host_a",
    "nativeEvent": "PreToolUse",
}
RECEIPT: dict[str, Any] = {
    "version": 1,
    "execution": EXECUTION,
    "startedAt": "2025-01-31T12:00:00Z",
    "events": [
        {
            "at": 0,
            "execution": EXECUTION,
            "kind": "handler.start",
            "phase": "handler",
            "sequence": 1,
        },
        {
            "at": 3.2,
            "durationMs": 3.2,
            "execution": EXECUTION,
            "kind": "handler.outcome",
            "outcome": "deny",
            "phase": "handler",
            "sequence": 2,
        },
    ],
    "host": "host_a",
    "requestId": "r1",
    "lineage": {"axis": "turn", "value": "t1"},
}
BEARER = {"Authorization": f"Bearer {RECEIPT_TOKEN}", "Content-Type": "application/json"}
LIMIT = get_spec().limit("receipt-body")["maximum"]


@pytest.fixture
def live() -> Iterator[Server]:
    yield from serve(TraceHub())


def post(server: Server, body: Any, headers: dict[str, str] | None = None, **kw: Any) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return server.request("POST", PATH, headers if headers is not None else BEARER, raw, **kw)


def test_a_valid_receipt_becomes_hook_entries_and_a_log_record(live: Server) -> None:
    response = post(live, RECEIPT, auth=False)
    assert (response.status, response.data) == (204, b"")
    entries = live.hub.replay(0)["entries"]
    assert [e["kind"] for e in entries] == ["handler.start", "handler.outcome"]
    for entry in entries:
        assert entry["source"] == "hook"
        assert entry["correlation"] == {"host": "host_a", "executionId": "x1", "requestId": "r1"}
    assert entries[1]["durationMs"] == 3.2
    assert entries[1]["details"]["outcome"] == "deny"
    assert entries[1]["summary"] == "host_a tool/before: handler.outcome (deny)"
    (record,) = live.logs.replay(0)["records"]
    assert record["context"] == {"requestId": "r1"}
    assert "host_a" in record["message"]


@pytest.mark.parametrize(
    "origin", ["http://127.0.0.1:{port}", "http://[::1]:{port}", "null", "https://evil.example"]
)
def test_any_origin_is_refused_even_with_the_token(live: Server, origin: str) -> None:
    headers = {**BEARER, "Origin": origin.format(port=live.port)}
    response = post(live, RECEIPT, headers, auth=False)
    assert (response.status, response.code()) == (403, "BX2006")
    assert live.hub.latest_sequence == 0


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        f"Bearer {TOKEN}",
        f"Basic {RECEIPT_TOKEN}",
        f"Bearer {RECEIPT_TOKEN}x",
        f"Bearer {'r' * 42}s",
        "Bearer \u00e9t\u00e9",
    ],
)
def test_the_receipt_token_is_required(live: Server, authorization: str | None) -> None:
    headers = {"Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization.encode("utf-8").decode("latin-1")
    response = post(live, RECEIPT, headers, auth=False)
    assert (response.status, response.code()) == (401, "BX2004")


def test_the_workbench_session_does_not_authorize_receipts(live: Server) -> None:
    cookie = f"bundle_session_{live.port}={TOKEN}"
    headers = {"Content-Type": "application/json", "Cookie": cookie}
    response = post(live, RECEIPT, headers, auth=True)
    assert (response.status, response.code()) == (401, "BX2004")


def test_scheme_is_case_insensitive(live: Server) -> None:
    headers = {**BEARER, "Authorization": f"bearer {RECEIPT_TOKEN}"}
    assert post(live, RECEIPT, headers, auth=False).status == 204


def test_foreign_host_is_refused(live: Server) -> None:
    response = post(live, RECEIPT, auth=False, host=f"evil.example:{live.port}")
    assert (response.status, response.code()) == (403, "BX2002")


def test_non_loopback_peer_is_refused() -> None:
    app = create_app(port=80, session_token=TOKEN, receipt_token=RECEIPT_TOKEN, hub=TraceHub())
    client = Client(app)
    for address, status in (
        ("10.0.0.7", 403),
        ("::ffff:10.0.0.7", 403),
        ("127.0.0.5", 204),
        ("::1", 204),
        ("::ffff:127.0.0.1", 204),
    ):
        response = client.post(
            PATH,
            data=json.dumps(RECEIPT),
            headers={**BEARER, "Host": "127.0.0.1:80"},
            environ_base={"REMOTE_ADDR": address},
        )
        assert response.status_code == status, address
        if status == 403:
            assert response.json is not None
            assert response.json["error"]["code"] == "BX2005"
    with pytest.raises(Exception, match="loopback"):
        check_peer("not-an-address")


def test_declared_oversize_body_is_413_before_it_is_sent(live: Server) -> None:
    conn = live.connect(
        "POST", PATH, {**BEARER, "Content-Length": str(LIMIT + 1)}, auth=False
    )  # headers only: the server must answer without waiting for the body
    try:
        response = conn.getresponse()
        assert response.status == 413
        assert json.loads(response.read())["error"]["code"] == "BX1005"
        assert "close" in (response.getheader("Connection") or "")
    finally:
        conn.close()
    assert live.hub.latest_sequence == 0


def test_body_at_the_limit_is_read_and_judged_by_schema(live: Server) -> None:
    body = json.dumps(RECEIPT).encode()
    padded = body[:-1] + b" " * (LIMIT - len(body)) + b"}"
    assert len(padded) == LIMIT
    assert post(live, padded, auth=False).status == 204


def test_chunked_oversize_body_is_413(live: Server) -> None:
    chunk = b"x" * 4096
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(LIMIT // 4096 + 1))
    headers = {**BEARER, "Transfer-Encoding": "chunked"}
    response = live.request("POST", PATH, headers, chunks + b"0\r\n\r\n", auth=False)
    assert (response.status, response.code()) == (413, "BX1005")


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r.update(payload={"tool_input": "secret"}),
        lambda r: r.update(version=2),
        lambda r: r["events"][0].update(stack="Traceback ..."),
        lambda r: r.update(events=[]) or r.pop("events"),
        lambda r: r.update(host="host_z"),
    ],
)
def test_schema_invalid_receipt_is_400_and_records_nothing(live: Server, mutate: Any) -> None:
    receipt = copy.deepcopy(RECEIPT)
    mutate(receipt)
    response = post(live, receipt, auth=False)
    assert (response.status, response.code()) == (400, "BX1004")
    assert live.hub.latest_sequence == 0


def test_text_plain_is_415(live: Server) -> None:
    headers = {**BEARER, "Content-Type": "text/plain"}
    response = post(live, RECEIPT, headers, auth=False)
    assert (response.status, response.code()) == (415, "BX1003")


@pytest.mark.parametrize("session_id", ["bogus", "hs_0123456789abcdef", "hs_0123456789abcdeF", ""])
def test_an_invalid_dev_session_is_ab8266(live: Server, session_id: str) -> None:
    response = post(live, {**RECEIPT, "sessionId": session_id}, auth=False)
    assert (response.status, response.code()) == (401, "AB8266")
    assert live.hub.latest_sequence == 0


def test_the_route_offers_no_read(live: Server) -> None:
    response = live.request("GET", PATH, BEARER, auth=False)
    assert (response.status, response.code()) == (405, "BX1002")
    assert response.headers["Allow"] == "POST"


def test_entries_carry_the_session_when_the_server_knows_it() -> None:
    entries = receipt_entries({**RECEIPT, "sessionId": "hs_0123456789abcdef"})
    assert {e["correlation"]["sessionId"] for e in entries} == {"hs_0123456789abcdef"}
    hub = TraceHub()
    hub.publish_all(entries)
    assert hub.latest_sequence == 2


def test_a_failure_says_the_handlers_answer_did_not_apply() -> None:
    # A safety hook that did not run must never read as a quiet continue in the trace.
    failed = copy.deepcopy(RECEIPT)
    failed["events"][1] = {
        "at": 1.0,
        "execution": EXECUTION,
        "kind": "failure",
        "phase": "handler",
        "sequence": 2,
        "error": {"name": "NativeDecodeFailed", "message": "missing required property"},
    }
    start, failure = receipt_entries(failed)
    assert "status" not in start
    assert failure["status"] == "error"
    assert failure["summary"] == (
        "host_a tool/before: failure (NativeDecodeFailed): the handler's answer did not apply;"
        " the host went on"
    )
