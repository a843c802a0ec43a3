"""The NDJSON trace and log streams over a real socket: replay, gap, live frames, keep-alives,
cursor errors, a cut slow reader, and the raw-log replay route."""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator

import pytest
from _live import Server, Stream, serve, stalled_reader, wait_for

from bundle_contract._schemas import reference_validator
from bundle_server.logs.hub import LogHub
from bundle_server.trace.hub import TraceHub

KEEPALIVE = 0.2


@pytest.fixture
def live() -> Iterator[Server]:
    yield from serve(TraceHub(retention=4, queue_capacity=8), keepalive=KEEPALIVE)


def open_stream(server: Server, path: str) -> Stream:
    stream = Stream(server.connect("GET", path))
    assert stream.response.status == 200
    assert stream.response.getheader("Content-Type") == "application/x-ndjson"
    return stream


def publish(hub: TraceHub, count: int) -> None:
    for index in range(count):
        hub.publish("diagnostic", "test.entry", f"entry {index}")


def test_trace_stream_replays_then_follows_live_entries(live: Server) -> None:
    publish(live.hub, 2)
    stream = open_stream(live, "/api/trace/stream?after=1")
    try:
        first = stream.frame()
        assert first["type"] == "trace.entry" and first["entry"]["sequence"] == 2
        publish(live.hub, 3)
        frames = [f for f in stream.frames(3) if f["type"] == "trace.entry"]
        while len(frames) < 3:
            frame = stream.frame()
            if frame["type"] == "trace.entry":
                frames.append(frame)
        assert [f["entry"]["sequence"] for f in frames] == [3, 4, 5]
        validator = reference_validator("TraceMessage.json")
        for frame in [first, *frames]:
            validator.validate(frame)
    finally:
        stream.close()


def test_trace_stream_gap_is_one_frame_first(live: Server) -> None:
    publish(live.hub, 7)  # retention 4: entries 4..7 remain
    stream = open_stream(live, "/api/trace/stream")
    try:
        gap, *entries = stream.frames(5)
        assert gap == {
            "type": "trace.gap",
            "droppedCount": 3,
            "firstAvailableSequence": 4,
            "requestedAfterSequence": 0,
            "droppedBySource": {"diagnostic": 3},
        }
        assert [f["entry"]["sequence"] for f in entries] == [4, 5, 6, 7]
    finally:
        stream.close()


def test_idle_stream_sends_keepalives(live: Server) -> None:
    stream = open_stream(live, "/api/trace/stream")
    try:
        assert stream.frames(3) == [{"type": "trace.keepalive"}] * 3
    finally:
        stream.close()


@pytest.mark.parametrize(
    ("query", "status", "code"),
    [("after=-1", 400, "BX3001"), ("after=abc", 400, "BX3001"), ("after=99", 409, "BX3002")],
)
@pytest.mark.parametrize("path", ["/api/trace/stream", "/api/logs/stream", "/api/logs/replay"])
def test_stream_cursor_errors_come_before_the_stream(
    live: Server, path: str, query: str, status: int, code: str
) -> None:
    response = live.get(f"{path}?{query}")
    assert (response.status, response.code()) == (status, code)


def test_closed_hubs_are_503() -> None:
    hub, logs = TraceHub(), LogHub()
    hub.close()
    logs.close()
    for server in serve(hub, logs=logs):
        for path in ("/api/trace/stream", "/api/logs/stream", "/api/logs/replay"):
            response = server.get(path)
            assert (response.status, response.code()) == (503, "BX3003")


def test_closing_the_hub_ends_open_streams(live: Server) -> None:
    stream = open_stream(live, "/api/trace/stream")
    try:
        assert stream.frame() == {"type": "trace.keepalive"}
        live.hub.close()
        assert stream.response.read() in (b"", b'{"type":"trace.keepalive"}\n')
    finally:
        stream.close()


def test_a_stalled_reader_costs_the_others_nothing_and_is_cut_once_out_of_history(
    live: Server,
) -> None:
    # A reader that never reads: its socket buffers fill and its writer blocks.
    stalled = socket.create_connection(("127.0.0.1", live.port))
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.sendall(
        f"GET /api/trace/stream HTTP/1.1\r\nHost: {live.host}\r\n"
        f"x-bundle-session: {'t' * 43}\r\n\r\n".encode()
    )
    reader = open_stream(live, "/api/trace/stream")
    seen: list[int] = []

    def read_all() -> None:
        while len(seen) < 400:
            frame = reader.frame()
            if frame["type"] == "trace.entry":
                seen.append(frame["entry"]["sequence"])

    thread = threading.Thread(target=read_all)
    thread.start()
    wait_for(lambda: live.hub.subscriber_count == 2)
    # 400 x 20 kB: far more than the stalled socket's buffers hold, so its writer blocks.
    big = "x" * 20_000
    for index in range(400):
        live.hub.publish("diagnostic", "test.entry", f"{index} {big}")
        if index % 4 == 3:
            wait_for(lambda index=index: len(seen) > index)
    thread.join(10)
    assert seen == list(range(1, 401))
    # History (4 entries) moved past what the stalled writer still had to write: it was cut
    # and its subscription dropped, though its client is still there, never reading.
    assert live.hub.subscriber_count == 1
    stalled.close()
    reader.close()


def test_a_client_that_leaves_is_dropped_at_once_not_at_the_next_keepalive() -> None:
    for server in serve(TraceHub(), keepalive=60):
        for polite in (True, False):
            client = stalled_reader(server.port, "/api/trace/stream")
            wait_for(lambda server=server: server.hub.subscriber_count == 1)
            if not polite:  # a reset rather than a FIN
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()
            # The keep-alive is a minute away: only the read side can tell.
            wait_for(lambda server=server: server.hub.subscriber_count == 0, timeout=1.0)


def test_a_stream_whose_reader_stopped_is_dropped_after_the_io_timeout() -> None:
    for server in serve(TraceHub(), keepalive=KEEPALIVE, io_timeout=0.5):
        stalled = socket.create_connection(("127.0.0.1", server.port))
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.sendall(
            f"GET /api/trace/stream HTTP/1.1\r\nHost: {server.host}\r\n"
            f"x-bundle-session: {'t' * 43}\r\n\r\n".encode()
        )
        wait_for(lambda server=server: server.hub.subscriber_count == 1)
        big = "x" * 20_000
        for index in range(300):  # far more than the socket buffers hold
            server.hub.publish("diagnostic", "test.entry", f"{index} {big}")
        # The blocked write gives up after the I/O timeout and the stream is dropped, while
        # the client is still connected.
        wait_for(lambda server=server: server.hub.subscriber_count == 0, timeout=5)
        stalled.close()


def test_log_replay_and_stream(live: Server) -> None:
    live.logs.publish("info", "first", {"invocationId": "inv_1", "secret": "no"})
    response = live.get("/api/logs/replay")
    assert response.status == 200
    body = response.json()
    reference_validator("DevLogReplayResponse.json").validate(body)
    (record,) = body["replay"]["records"]
    assert record["context"] == {"invocationId": "inv_1"}
    assert record["href"] == "/trace?correlation=inv_1"
    stream = open_stream(live, "/api/logs/stream?after=1")
    try:
        live.logs.publish("warn", "second \x1b[2J")
        frame = stream.frame()
        while frame["type"] == "log.keepalive":
            frame = stream.frame()
        reference_validator("DevLogMessage.json").validate(frame)
        assert frame["record"]["sequence"] == 2
        assert frame["record"]["message"] == "second \ufffd[2J"
        assert "href" not in frame["record"]
    finally:
        stream.close()


def test_stream_frames_are_compact_single_lines(live: Server) -> None:
    live.hub.publish("diagnostic", "test.entry", "line\nbreak", details={"text": "a\nb"})
    stream = open_stream(live, "/api/trace/stream")
    try:
        raw = stream.response.readline()
        assert raw.count(b"\n") == 1
        assert json.loads(raw)["entry"]["summary"] == "line\nbreak"
    finally:
        stream.close()


@pytest.mark.parametrize("path", ["/api/trace/stream", "/api/logs/stream"])
def test_a_head_request_on_a_stream_leaves_no_subscriber(live: Server, path: str) -> None:
    # HEAD is answered without iterating the body: what the stream subscribed must still be
    # released when the body is closed, or every HEAD would leave a reader behind for good.
    hub = live.logs if path.startswith("/api/logs") else live.hub
    for _ in range(3):
        reply = live.request("HEAD", path)
        assert reply.status == 200 and reply.data == b""
    wait_for(lambda: hub.subscriber_count == 0)
    stream = open_stream(live, path)  # a GET still subscribes, and holds its reader
    try:
        wait_for(lambda: hub.subscriber_count == 1)
    finally:
        stream.close()
    wait_for(lambda: hub.subscriber_count == 0)
