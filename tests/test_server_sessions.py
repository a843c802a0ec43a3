"""The host-session routes over real sockets (seed 000, "Host sessions", "Host-session stream"):
every route's answers and errors, the SSE stream (replay, live frames, keep-alives, end), the
cap under concurrent creates, slow readers, and the trace entries, against tests/fake_host.py.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from _live import TOKEN, serve, stalled_reader
from _session_client import Client, Sse, valid
from fake_host import host, pattern

import bundle_server.sessions.handlers  # noqa: F401  (registers the session handlers until the app module does)
from bundle_contract._schemas import reference_validator
from bundle_contract._spec import get_spec
from bundle_server import DevServer, start_dev_server
from bundle_server.sessions.pty import Frame, SessionManager
from bundle_server.sessions.sse import encode_batch
from bundle_server.trace.hub import TraceHub

RETAINED = get_spec().limit("retained-output")["maximum"]
INPUT_MAX = get_spec().limit("session-input")["maximum"]
ACTIVE_MAX = get_spec().limit("active-sessions")["maximum"]
DIM_MIN = get_spec().limit("terminal-dimension")["minimum"]
DIM_MAX = get_spec().limit("terminal-dimension")["maximum"]
UNKNOWN = "hs_" + "0" * 16


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Callable[..., tuple[DevServer, Client]]]:
    made: list[DevServer] = []

    def factory(
        *actions: str, host_b: tuple[str, ...] | str = ("sleep",)
    ) -> tuple[DevServer, Client]:
        b = host_b if isinstance(host_b, str) else host(*host_b)
        server = start_dev_server(
            tmp_path,
            host_executables={"host_a": host(*actions), "host_b": b},
            check_responses=True,
        )
        assert server.sessions is not None
        server.sessions._grace = 0.3  # a short terminate grace keeps the ladder quick
        made.append(server)
        return server, Client(server.port, server.session_token)

    yield factory
    for server in made:
        server.close()


# -- list, create, get -----------------------------------------------------------------------


def test_list_reports_sessions_and_host_availability(make_server: Any) -> None:
    _server, client = make_server("sleep", host_b="/nonexistent/host")
    reply = client.request("GET", "/api/sessions")
    assert reply.status == 200
    body = reply.json()
    reference_validator("SessionList.json").validate(body)
    hosts = {h["host"]: h for h in body["hosts"]}
    assert hosts["host_a"]["launchable"] is True
    assert hosts["host_a"]["executable"] == sys.executable
    assert hosts["host_b"]["launchable"] is False and "nonexistent" in hosts["host_b"]["reason"]
    # What to do about it: the executable the server's override named, or the real CLI.
    setup = hosts["host_b"]["setup"]
    assert (setup["lookedFor"], setup["fromConfig"]) == ("/nonexistent/host", True)
    assert setup["install"]["npmPackage"] == "@openai/codex" and "config" not in setup
    # A bare project targets every host kind a session launches.
    assert [h["host"] for h in body["hosts"] if h["targeted"]] == ["host_a", "host_b", "host_c"]
    assert body["sessions"] == []
    first = client.create()
    assert [s["id"] for s in client.request("GET", "/api/sessions").json()["sessions"]] == [
        first["id"]
    ]


def test_create_then_get(make_server: Any, tmp_path: Path) -> None:
    _server, client = make_server("env", "sleep")
    session = client.create(cols=120, rows=40, prompt="hé")
    assert session["state"] == "running" and session["host"] == "host_a"
    assert (session["cols"], session["rows"], session["prompt"]) == (120, 40, "hé")
    assert session["authority"]["projectRoot"] == str(tmp_path.resolve())
    # A bare project (no bundle config): the host runs without a development install.
    assert session["authority"]["epochId"] == "none"
    assert session["authority"]["installDestination"] == ""
    got = client.request("GET", f"/api/sessions/{session['id']}")
    assert got.status == 200 and got.json() == {"session": session}
    stream = client.stream(session["id"])
    try:
        stream.wait_output(lambda out: f"env {session['id']} ".encode() in out)
    finally:
        stream.close()


# -- errors ----------------------------------------------------------------------------------

ID_ROUTES = [
    ("GET", "/api/sessions/{}", None),
    ("GET", "/api/sessions/{}/stream", None),
    ("POST", "/api/sessions/{}/input", {"data": "x"}),
    ("POST", "/api/sessions/{}/resize", {"cols": 10, "rows": 10}),
    ("POST", "/api/sessions/{}/terminate", {}),
    ("POST", "/api/sessions/{}/restart", {"cols": 10, "rows": 10}),
    ("DELETE", "/api/sessions/{}", None),
]


def test_malformed_and_unknown_ids(make_server: Any) -> None:
    _server, client = make_server("sleep")
    for method, path, body in ID_ROUTES:
        for bad in ("hs_ABCDEFGHIJKLMNOP", "hs_abc", "hs_" + "a" * 17, "x"):
            reply = client.request(method, path.format(bad), body)
            assert (reply.status, reply.code()) == (400, "AB8261"), (method, path, bad)
        reply = client.request(method, path.format(UNKNOWN), body)
        assert (reply.status, reply.code()) == (404, "AB8262"), (method, path)


@pytest.mark.parametrize(
    "body",
    [
        {"host": "host_a", "cols": DIM_MIN - 1, "rows": 24},
        {"host": "host_a", "cols": 80, "rows": DIM_MAX + 1},
        {"host": "host_a", "cols": 80, "rows": "24"},
        {"host": "host_a", "cols": 80},
        {"host": "host_d", "cols": 80, "rows": 24},
        {"host": "host_a", "cols": 80, "rows": 24, "extra": 1},
        {"host": "host_a", "cols": 80, "rows": 24, "prompt": 5},
        {"host": "host_a", "cols": 80.5, "rows": 24},
        [],
    ],
)
def test_create_bodies_are_strict(make_server: Any, body: Any) -> None:
    _server, client = make_server("sleep")
    reply = client.request("POST", "/api/sessions", body)
    assert (reply.status, reply.code()) == (400, "AB8261")
    assert client.request("GET", "/api/sessions").json()["sessions"] == []


def test_body_media_type_and_json(make_server: Any) -> None:
    _server, client = make_server("sleep")
    ok = json.dumps({"host": "host_a", "cols": 80, "rows": 24}).encode()
    reply = client.request("POST", "/api/sessions", raw=ok, content_type="text/plain")
    assert (reply.status, reply.code()) == (400, "AB8261")
    reply = client.request("POST", "/api/sessions", raw=b"{not json")
    assert (reply.status, reply.code()) == (400, "AB8261")
    # A lone surrogate is valid JSON but no UTF-8 text: refused, never a 500.
    raw = b'{"host": "host_a", "cols": 80, "rows": 24, "prompt": "\\ud800"}'
    reply = client.request("POST", "/api/sessions", raw=raw)
    assert (reply.status, reply.code()) == (400, "AB8261")


def test_dimensions_on_resize_and_restart(make_server: Any) -> None:
    _server, client = make_server("sleep")
    session_id = client.create()["id"]
    for path in ("resize", "restart"):
        for dims in (
            {"cols": DIM_MIN - 1, "rows": 10},
            {"cols": 10, "rows": DIM_MAX + 1},
            {"cols": 10},
        ):
            reply = client.request("POST", f"/api/sessions/{session_id}/{path}", dims)
            assert (reply.status, reply.code()) == (400, "AB8261"), (path, dims)
    for edge in ({"cols": DIM_MIN, "rows": DIM_MIN}, {"cols": DIM_MAX, "rows": DIM_MAX}):
        reply = client.request("POST", f"/api/sessions/{session_id}/resize", edge)
        assert reply.status == 204, reply


def test_input_limit_is_16_kib_of_utf8_bytes(make_server: Any) -> None:
    _server, client = make_server("sleep")
    path = f"/api/sessions/{client.create()['id']}/input"
    assert client.request("POST", path, {"data": "a" * INPUT_MAX}).status == 204
    reply = client.request("POST", path, {"data": "a" * (INPUT_MAX + 1)})
    assert (reply.status, reply.code()) == (413, "AB8261")
    # Counted in bytes, not characters: 5462 euro signs are 16386 bytes.
    euros = "€" * (INPUT_MAX // 3 + 1)
    reply = client.request("POST", path, {"data": euros})
    assert (reply.status, reply.code()) == (413, "AB8261")
    assert client.request("POST", path, {"data": "€" * (INPUT_MAX // 3)}).status == 204
    reply = client.request("POST", path, raw=b'{"data": "\\udc80"}')
    assert (reply.status, reply.code()) == (400, "AB8261")
    for bad in ({}, {"data": 1}, {"data": "x", "more": 1}):
        reply = client.request("POST", path, bad)
        assert (reply.status, reply.code()) == (400, "AB8261")


def test_a_float_where_the_schema_says_integer_is_refused_even_when_integral(
    make_server: Any,
) -> None:
    """GUARD-106: `100.0` is a fraction as written; sessions take whole numbers only."""
    _server, client = make_server("sleep")
    reply = client.request("POST", "/api/sessions", {"host": "host_a", "cols": 100.0, "rows": 30})
    assert (reply.status, reply.code()) == (400, "AB8261")
    assert client.request("GET", "/api/sessions").json()["sessions"] == []
    session = client.create(cols=100, rows=30)
    path = f"/api/sessions/{session['id']}"
    for body in ({"cols": 90.0, "rows": 20}, {"cols": 90.5, "rows": 20}):
        reply = client.request("POST", f"{path}/resize", body)
        assert (reply.status, reply.code()) == (400, "AB8261")
    assert client.request("POST", f"{path}/resize", {"cols": 90, "rows": 20}).status == 204


def test_the_input_body_is_read_no_further_than_legal_input_can_reach(make_server: Any) -> None:
    _server, client = make_server("sleep")
    path = f"/api/sessions/{client.create()['id']}/input"
    # The longest legal body: 16 KiB of control characters, each escaped as \u00XX.
    longest = json.dumps({"data": "\x01" * INPUT_MAX}).encode()
    assert len(longest) <= get_spec().limit("session-input-body")["maximum"]
    assert client.request("POST", path, raw=longest).status == 204
    # A declared length past that is refused before a byte of the body is sent.
    bound = get_spec().limit("session-input-body")["maximum"]
    with socket.create_connection(("127.0.0.1", client.port), timeout=10) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{client.port}\r\n"
            f"x-bundle-session: {client.token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {bound + 1}\r\n\r\n".encode()
        )
        head = sock.recv(65536)
    assert head.startswith(b"HTTP/1.1 413 ")


def test_unsupported_method_is_405(make_server: Any) -> None:
    _server, client = make_server("sleep")
    for method, path in (
        ("PUT", "/api/sessions"),
        ("POST", f"/api/sessions/{UNKNOWN}"),
        ("GET", f"/api/sessions/{UNKNOWN}/input"),
    ):
        reply = client.request(method, path)
        assert (reply.status, reply.code()) == (405, "AB8261"), (method, path)


def test_a_session_over_the_cap_is_refused_and_a_slot_frees_on_exit(make_server: Any) -> None:
    _server, client = make_server("sleep")
    sessions = [client.create() for _ in range(ACTIVE_MAX)]
    reply = client.request("POST", "/api/sessions", {"host": "host_b", "cols": 80, "rows": 24})
    assert (reply.status, reply.code()) == (409, "AB8264")
    done = client.request("POST", f"/api/sessions/{sessions[0]['id']}/terminate", {})
    assert done.status == 200
    client.create("host_b")


def test_a_missing_executable_is_ab8263(make_server: Any) -> None:
    _server, client = make_server("sleep", host_b="/nonexistent/host")
    reply = client.request("POST", "/api/sessions", {"host": "host_b", "cols": 80, "rows": 24})
    assert (reply.status, reply.code()) == (422, "AB8263")


def test_without_a_session_service_every_route_is_ab8265() -> None:
    for server in serve(TraceHub()):
        client = Client(server.port, TOKEN)
        reply = client.request("GET", "/api/sessions")
        assert (reply.status, reply.code()) == (503, "AB8265")
        for method, path, body in ID_ROUTES:
            reply = client.request(method, path.format(UNKNOWN), body)
            assert (reply.status, reply.code()) == (503, "AB8265"), (method, path)


def test_a_closed_service_is_ab8265(make_server: Any) -> None:
    server, client = make_server("sleep")
    session_id = client.create()["id"]
    server.sessions.close()
    for method, path in (("GET", "/api/sessions"), ("GET", f"/api/sessions/{session_id}")):
        reply = client.request(method, path)
        assert (reply.status, reply.code()) == (503, "AB8265")


def test_session_routes_need_the_session_value(make_server: Any) -> None:
    server, _client = make_server("sleep")
    stranger = Client(server.port, "x" * 43)
    for method, path, body in [("GET", "/api/sessions/{}", None), *ID_ROUTES]:
        reply = stranger.request(method, path.format(UNKNOWN), body)
        assert (reply.status, reply.code()) == (401, "BX2001")


# -- lifecycle -------------------------------------------------------------------------------


def test_terminate_delete_and_forget(make_server: Any) -> None:
    _server, client = make_server("sleep")
    session_id = client.create()["id"]
    reply = client.request("DELETE", f"/api/sessions/{session_id}")
    assert (reply.status, reply.code()) == (409, "AB8261")
    assert client.request("GET", f"/api/sessions/{session_id}").json()["session"]["state"] == (
        "running"
    )
    reply = client.request("POST", f"/api/sessions/{session_id}/terminate", {})
    assert reply.status == 200
    ended = valid(reply.json()["session"])
    assert ended["state"] == "terminated" and "endedAt" in ended and ended["signal"] == "SIGHUP"
    again = client.request("POST", f"/api/sessions/{session_id}/terminate", {})
    assert again.status == 200 and again.json()["session"] == ended
    # Input and resize conflict with an ended session's state (409); a bad body is still 400.
    reply = client.request("POST", f"/api/sessions/{session_id}/input", {"data": "x"})
    assert (reply.status, reply.code()) == (409, "AB8261")
    reply = client.request("POST", f"/api/sessions/{session_id}/resize", {"cols": 9, "rows": 9})
    assert (reply.status, reply.code()) == (409, "AB8261")
    reply = client.request("POST", f"/api/sessions/{session_id}/terminate", {"x": 1})
    assert (reply.status, reply.code()) == (400, "AB8261")
    assert client.request("DELETE", f"/api/sessions/{session_id}").status == 204
    reply = client.request("GET", f"/api/sessions/{session_id}")
    assert (reply.status, reply.code()) == (404, "AB8262")


def test_restart_carries_restart_of(make_server: Any) -> None:
    _server, client = make_server("sleep")
    original = client.create(prompt="go")
    reply = client.request(
        "POST", f"/api/sessions/{original['id']}/restart", {"cols": 100, "rows": 30}
    )
    assert reply.status == 201
    replacement = valid(reply.json()["session"])
    assert replacement["restartOf"] == original["id"] and replacement["id"] != original["id"]
    assert (replacement["cols"], replacement["rows"], replacement["prompt"]) == (100, 30, "go")
    assert replacement["state"] == "running"
    old = client.request("GET", f"/api/sessions/{original['id']}").json()["session"]
    assert old["state"] == "terminated"


def test_lifecycle_entries_reach_the_trace(make_server: Any) -> None:
    _server, client = make_server("sleep")
    session_id = client.create()["id"]
    client.request("POST", f"/api/sessions/{session_id}/terminate", {})
    entries = client.request("GET", "/api/trace").json()["entries"]
    mine = [e for e in entries if e["correlation"].get("sessionId") == session_id]
    assert [e["kind"] for e in mine] == ["session.started", "session.terminated"]
    for entry in mine:
        reference_validator("TraceEntry.json").validate(entry)
        assert entry["source"] == "session"
        assert entry["correlation"] == {"sessionId": session_id, "host": "host_a"}


# -- the stream ------------------------------------------------------------------------------


def test_stream_order_state_replay_live_end(make_server: Any) -> None:
    _server, client = make_server("ready", "echo")
    session = client.create()
    stream = client.stream(session["id"])
    try:
        assert stream.response.getheader("Content-Type", "").startswith("text/event-stream")
        assert stream.response.getheader("Connection") == "close"
        first = stream.event()
        assert first is not None and first.name == "state"
        assert first.data["session"]["id"] == session["id"]
        replay = stream.event()
        assert replay is not None and replay.name == "output"
        stream.wait_output(lambda out: b"ready" in out)
        client.request("POST", f"/api/sessions/{session['id']}/input", {"data": "ping\r"})
        stream.wait_output(lambda out: out.count(b"ping") >= 2)  # tty echo + host echo
        client.request("POST", f"/api/sessions/{session['id']}/resize", {"cols": 90, "rows": 20})
        state = stream.until(lambda e: e.name == "state")[-1]
        assert (state.data["session"]["cols"], state.data["session"]["rows"]) == (90, 20)
        client.request("POST", f"/api/sessions/{session['id']}/input", {"data": "\x04"})
        end = stream.until(lambda e: e.name == "end")[-1]
        assert end.data["session"]["state"] == "exited"
        assert end.data["session"]["exitCode"] == 0
        assert stream.event() is None and stream.ended  # closed after end
    finally:
        stream.close()


def test_an_ended_session_streams_state_replay_end(make_server: Any) -> None:
    _server, client = make_server("ready", "exit:3")
    session_id = client.create()["id"]
    deadline = time.monotonic() + 5
    while client.request("GET", f"/api/sessions/{session_id}").json()["session"]["state"] == (
        "running"
    ):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    stream = client.stream(session_id)
    try:
        names = [stream.event(), stream.event(), stream.event()]
        assert [e.name for e in names if e] == ["state", "output", "end"]
        assert b"ready" in stream.output
        assert names[2] is not None and names[2].data["session"]["exitCode"] == 3
        assert stream.event() is None
    finally:
        stream.close()


def test_end_arrives_within_a_second_of_the_exit(make_server: Any) -> None:
    _server, client = make_server("ready", "line", "exit:7")
    session_id = client.create()["id"]
    stream = client.stream(session_id)
    try:
        stream.wait_output(lambda out: b"ready" in out)
        sent = time.monotonic()
        client.request("POST", f"/api/sessions/{session_id}/input", {"data": "bye\r"})
        end = stream.until(lambda e: e.name == "end")[-1]
        assert end.at - sent < 1.0
        assert end.data["session"]["exitCode"] == 7
    finally:
        stream.close()


def replay_of(client: Client, session_id: str) -> bytes:
    """The retained output a new stream of the session replays (its `output` after `state`)."""
    late = client.stream(session_id)
    try:
        late.event(), late.event()
        return bytes(late.output)
    finally:
        late.close()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_replay_is_the_last_256_kib_byte_exact(make_server: Any) -> None:
    size = 3 * RETAINED + 12345
    _server, client = make_server("raw", f"emit:{size}", "sleep")
    early = client.stream(client.create()["id"])
    session_id = client.request("GET", "/api/sessions").json()["sessions"][0]["id"]
    expected = pattern(size)
    try:
        early.wait_output(lambda out: len(out) >= RETAINED and out[-32:] == expected[-32:])
        # Replay and live frames meet with no gap and no overlap.
        assert expected.endswith(bytes(early.output))
    finally:
        early.close()
    assert sha256_hex(replay_of(client, session_id)) == sha256_hex(expected[-RETAINED:])


def test_a_flood_that_exits_loses_no_byte_of_its_tail(make_server: Any) -> None:
    # The child writes far more than the PTY buffers and exits at once: its last output is
    # still in the kernel when it is reaped, and must all reach the ring before `end`.
    size = 16 * 1024 * 1024 + 7
    _server, client = make_server("raw", f"emit:{size}", "exit:0")
    session_id = client.create()["id"]
    live = client.stream(session_id)
    try:
        events = live.until(lambda event: event.name == "end")
        assert events[-1].data["session"]["state"] == "exited"
        assert pattern(size).endswith(bytes(live.output))
    finally:
        live.close()
    assert sha256_hex(replay_of(client, session_id)) == sha256_hex(pattern(size)[-RETAINED:])


def test_output_still_arriving_after_the_exit_reaches_the_stream(make_server: Any) -> None:
    # The child exits at once; a setsid descendant keeps writing to the PTY for ~0.2 s. The
    # session ends only once output has stopped arriving, so none of it is cut off (a fixed
    # 50 ms drain lost all but the first lines), and `end` still comes within a second.
    _server, client = make_server("raw", "trail:10", "exit:0")
    live = client.stream(client.create()["id"])
    try:
        started = time.monotonic()
        events = live.until(lambda event: event.name == "end")
        assert time.monotonic() - started < 1.0
        assert events[-1].data["session"]["exitCode"] == 0
        lines = bytes(live.output).split(b"\r\n")
        assert [line for line in lines if line] == [f"trail {i}".encode() for i in range(10)]
    finally:
        live.close()


def test_a_utf8_character_split_across_reads_survives(make_server: Any) -> None:
    _server, client = make_server("raw", "split", "sleep")
    stream = client.stream(client.create()["id"])
    try:
        stream.wait_output(lambda out: b"\r\n" in out)
        assert bytes(stream.output) == "€".encode() + b"\r\n"
    finally:
        stream.close()


def test_output_events_are_byte_exact_at_every_split_offset() -> None:
    text = "aé€😀z".encode()
    for cut in range(len(text) + 1):
        frames = [Frame.output(text[:cut]), Frame.output(text[cut:])]
        for batch in ([frames[0]], [frames[1]]), (frames,):
            decoded = b""
            for part in batch:
                raw = encode_batch(part)
                for block in raw.split(b"\n\n"):
                    if block:
                        data = json.loads(block.split(b"data: ", 1)[1])
                        reference_validator("SessionOutputFrame.json").validate(data)
                        decoded += base64.b64decode(data["data"])
            assert decoded == text, cut


def test_resize_reaches_the_child(make_server: Any) -> None:
    _server, client = make_server("winsize", "sleep")
    session = client.create(cols=80, rows=24)
    stream = client.stream(session["id"])
    try:
        stream.wait_output(lambda out: b"size 24 80" in out)
        reply = client.request(
            "POST", f"/api/sessions/{session['id']}/resize", {"cols": 132, "rows": 43}
        )
        assert reply.status == 204
        stream.wait_output(lambda out: b"size 43 132" in out)
        got = client.request("GET", f"/api/sessions/{session['id']}").json()["session"]
        assert (got["cols"], got["rows"]) == (132, 43)
    finally:
        stream.close()


def test_fifty_concurrent_creates_give_exactly_the_cap(make_server: Any) -> None:
    server, client = make_server("sleep")
    body = {"host": "host_a", "cols": 80, "rows": 24}
    barrier = threading.Barrier(50)

    def create(_: int) -> tuple[int, str | None]:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            barrier.wait()
            conn.request(
                "POST",
                "/api/sessions",
                body=json.dumps(body).encode(),
                headers={
                    "Host": f"127.0.0.1:{server.port}",
                    "x-bundle-session": server.session_token,
                    "Content-Type": "application/json",
                },
            )
            response = conn.getresponse()
            data = json.loads(response.read())
            return response.status, data.get("error", {}).get("code")
        finally:
            conn.close()

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(create, range(50)))
    assert sorted(results, key=str).count((201, None)) == ACTIVE_MAX
    assert results.count((409, "AB8264")) == 50 - ACTIVE_MAX
    listed = client.request("GET", "/api/sessions").json()["sessions"]
    assert len([s for s in listed if s["state"] == "running"]) == ACTIVE_MAX


def next_keepalive(stream: Sse) -> float:
    """Read the next keep-alive comment (it must come next); when it was received."""
    assert stream._line() == b": keep-alive"
    received = time.monotonic()
    assert stream._line() == b""
    return received


def test_keepalive_comment_on_an_idle_stream(tmp_path: Path) -> None:
    keepalive = 0.3
    manager = SessionManager(tmp_path, executables={"host_a": host("sleep")}, terminate_grace=0.3)
    try:
        for server in serve(TraceHub(), keepalive=keepalive, sessions=manager):
            client = Client(server.port, TOKEN)
            stream = client.stream(client.create()["id"])
            try:
                stream.event(), stream.event()
                opened = time.monotonic()
                next_keepalive(stream)
                assert time.monotonic() - opened < 1.0
                # Timed between two later keep-alives, each awaited as it comes: a late read of
                # the first one cannot shorten the interval measured.
                second = next_keepalive(stream)
                interval = next_keepalive(stream) - second
                assert keepalive / 2 < interval < keepalive + 1.0, interval
            finally:
                stream.close()
    finally:
        manager.close()


def test_a_stalled_reader_is_cut_and_the_session_and_other_readers_go_on(make_server: Any) -> None:
    size = 24 * 1024 * 1024
    server, client = make_server("raw", "ready", "sleep", host_b=("raw", f"emit:{size}", "sleep"))
    session = client.create("host_b")
    stalled = stalled_reader(
        server.port, f"/api/sessions/{session['id']}/stream", server.session_token
    )
    try:
        # The reader that keeps up gets every byte, in order, up to the end of the flood.
        reader = client.stream(session["id"], check=False)
        expected = pattern(size)
        try:
            reader.wait_output(lambda out: out[-32:] == expected[-32:] and len(out) > 0)
            assert expected.endswith(bytes(reader.output))
        finally:
            reader.close()
        # Another session is served promptly meanwhile.
        other = client.create()
        quick = client.stream(other["id"])
        try:
            began = time.monotonic()
            quick.wait_output(lambda out: b"ready" in out)
            assert time.monotonic() - began < 2
        finally:
            quick.close()
        # The stalled reader was cut: once read, its stream ends (a `: lagged` comment) rather
        # than skipping output silently.
        stalled.settimeout(10)
        received = b""
        while True:
            try:
                chunk = stalled.recv(1 << 20)
            except TimeoutError:
                break
            if not chunk:
                break
            received += chunk
        assert b": lagged" in received
    finally:
        stalled.close()
