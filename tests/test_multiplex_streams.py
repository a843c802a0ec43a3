"""The multiplexed stream over real sockets: one NDJSON response carrying trace, log, project and
host-session subscriptions, each with its own stream's frames; subscribe and unsubscribe by
short requests; resume after a reconnect; per-subscription error frames that leave the stream
and its other subscriptions going; a reader cut by its hub; session output paced by what the
page consumed; keep-alives; a client that leaves. Every frame is validated against
MultiplexMessage.json.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _live import TOKEN, Server, serve, wait_for
from _session_client import Client
from fake_host import host

from bundle_contract._schemas import reference_validator
from bundle_contract._spec import get_spec
from bundle_server import DevServer, start_dev_server
from bundle_server.multiplex.service import MultiplexService
from bundle_server.trace.hub import TraceHub

KEEPALIVE = 0.2
WINDOW = get_spec().limit("multiplex-session-window")["maximum"]
HIGH_WATER = get_spec().limit("session-stream-high-water")["maximum"]
RETAINED = get_spec().limit("retained-output")["maximum"]
SUBSCRIPTIONS = get_spec().limit("multiplex-subscriptions")["maximum"]
VALIDATOR = reference_validator("MultiplexMessage.json")
Frame = dict[str, Any]


class Mux:
    """An open multiplexed stream, read frame by frame (each validated)."""

    def __init__(
        self,
        port: int,
        subscriptions: list[dict[str, Any]],
        token: str = TOKEN,
        sock: socket.socket | None = None,
        check: bool = True,
    ) -> None:
        self.port = port
        self.check = check  # validate every frame (too slow for a reader that must keep up)
        self.token = token
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        if sock is not None:
            self.conn.sock = sock
        body = json.dumps({"subscriptions": subscriptions}).encode()
        self.conn.request("POST", "/api/multiplex/stream", body, self.headers())
        self.sock = self.conn.sock  # the response keeps it; the connection lets go of it
        self.response = self.conn.getresponse()
        assert self.response.status == 200, self.response.read()
        assert self.response.getheader("Content-Type") == "application/x-ndjson"
        self.buffer = bytearray()
        opened = self.frame()
        assert opened["type"] == "multiplex.opened"
        self.id: str = opened["streamId"]
        self.window: int = opened["sessionWindow"]

    def headers(self) -> dict[str, str]:
        return {
            "Host": f"127.0.0.1:{self.port}",
            "x-bundle-session": self.token,
            "Content-Type": "application/json",
        }

    def frame(self) -> Frame:
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self.buffer[:newline])
                del self.buffer[: newline + 1]
                frame: Frame = json.loads(line)
                if self.check:
                    VALIDATOR.validate(frame)
                return frame
            data = self.response.read1(1 << 20)
            assert data, "the stream ended"
            self.buffer += data

    def until(self, predicate: Callable[[Frame], bool], limit: int = 100_000) -> list[Frame]:
        """Frames up to and including the first that satisfies `predicate`."""
        frames = []
        for _ in range(limit):
            frame = self.frame()
            frames.append(frame)
            if predicate(frame):
                return frames
        raise AssertionError(f"no such frame in {limit}")

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            data = None if body is None else json.dumps(body).encode()
            conn.request(method, path, data, self.headers())
            reply = conn.getresponse()
            raw = reply.read()
            return reply.status, json.loads(raw) if raw else None
        finally:
            conn.close()

    def subscribe(self, *subscriptions: dict[str, Any]) -> None:
        status, body = self.call(
            "POST", f"/api/multiplex/{self.id}/subscriptions", {"subscriptions": subscriptions}
        )
        assert status == 204, body

    def unsubscribe(self, subscription: str) -> None:
        status, body = self.call("DELETE", f"/api/multiplex/{self.id}/subscriptions/{subscription}")
        assert status == 204, body

    def consumed(self, subscription: str, total: int) -> None:
        path = f"/api/multiplex/{self.id}/subscriptions/{subscription}/consumed"
        status, body = self.call("POST", path, {"bytes": total})
        assert status == 204, body

    def close(self) -> None:
        # Shut the socket first: a reader thread blocked on it returns at once (closing the
        # response alone would wait for that read's timeout).
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.response.close()
        self.conn.close()


def trace(id: str, after: int = 0) -> dict[str, Any]:
    return {"id": id, "route": "trace.stream", "query": {"after": after}}


def entries(frames: list[Frame], subscription: str) -> list[int]:
    return [
        f["frame"]["entry"]["sequence"]
        for f in frames
        if f.get("subscription") == subscription
        and f["type"] == "multiplex.frame"
        and f["frame"]["type"] == "trace.entry"
    ]


def publish(hub: TraceHub, count: int, summary: str = "entry") -> None:
    for index in range(count):
        hub.publish("diagnostic", "test.entry", f"{summary} {index}")


def is_entry(sequence: int, subscription: str = "t") -> Callable[[Frame], bool]:
    return lambda f: (
        f.get("subscription") == subscription and entries([f], subscription) == [sequence]
    )


@pytest.fixture(scope="module")
def live() -> Iterator[Server]:
    yield from serve(TraceHub(retention=64), keepalive=KEEPALIVE)


# -- hubs ------------------------------------------------------------------------------------


def test_a_subscription_carries_its_streams_own_frames(live: Server) -> None:
    """The same frames, byte for byte, as /api/trace/stream from the same cursor."""
    publish(live.hub, 3)
    after = live.hub.latest_sequence - 2
    mux = Mux(live.port, [trace("t", after)])
    direct = http.client.HTTPConnection("127.0.0.1", live.port, timeout=10)
    try:
        direct.request(
            "GET",
            f"/api/trace/stream?after={after}",
            headers={"x-bundle-session": TOKEN, "Host": f"127.0.0.1:{live.port}"},
        )
        plain = direct.getresponse()
        mine = [
            f["frame"] for f in mux.until(is_entry(after + 2)) if f["type"] != "multiplex.keepalive"
        ]
        theirs = [json.loads(plain.readline()) for _ in mine]
        assert mine == theirs and len(mine) == 2
        publish(live.hub, 1, "live")
        frame = mux.until(is_entry(after + 3))[-1]
        assert frame["frame"]["entry"]["summary"] == "live 0"
        assert json.loads(plain.readline()) == frame["frame"]
    finally:
        direct.close()
        mux.close()


def is_log(message: str) -> Callable[[Frame], bool]:
    return lambda f: (
        f.get("subscription") == "l" and f["frame"].get("record", {}).get("message") == message
    )


def test_subscribe_and_unsubscribe_by_short_requests(live: Server) -> None:
    start = live.hub.latest_sequence
    mux = Mux(live.port, [])
    try:
        mux.subscribe(
            trace("t", start),
            {"id": "l", "route": "logs.stream", "query": {"after": live.logs.latest_sequence}},
        )
        live.logs.publish("info", "a log line")
        publish(live.hub, 1)
        frames = mux.until(is_entry(start + 1))
        if not any(is_log("a log line")(f) for f in frames):
            mux.until(is_log("a log line"))
        mux.unsubscribe("t")
        closed = mux.until(lambda f: f["type"] == "multiplex.closed")[-1]
        assert closed == {"type": "multiplex.closed", "subscription": "t", "reason": "unsubscribed"}
        # Nothing of `t` after its end; `l` goes on.
        publish(live.hub, 1)
        live.logs.publish("info", "after")
        after = mux.until(is_log("after"))
        assert not [f for f in after if f.get("subscription") == "t"]
        mux.unsubscribe("t")  # gone already: no error
    finally:
        mux.close()


def test_an_unsubscribe_that_overtakes_its_subscribe_wins(live: Server) -> None:
    """A DELETE and the subscribe POST before it are not ordered: a DELETE that arrives first
    finds nothing, and the subscribe then is refused (its error frame), never a subscription
    no one follows."""
    start = live.hub.latest_sequence

    def refused(frames: list[Frame], subscription: str) -> bool:
        mine = [f for f in frames if f.get("subscription") == subscription]
        return [(f["type"], f.get("error", {}).get("code")) for f in mine] == [
            ("multiplex.error", "BX1012")
        ]

    mux = Mux(live.port, [])
    try:
        mux.unsubscribe("t")
        mux.subscribe(trace("t", start), trace("u", start))
        publish(live.hub, 1)
        frames = mux.until(is_entry(start + 1, "u"))
        assert refused(frames, "t"), frames
        # Once unsubscribed, an id stays unsubscribed on this stream.
        mux.unsubscribe("u")
        mux.until(lambda f: f["type"] == "multiplex.closed")
        mux.subscribe(trace("u", start + 1), trace("v", start + 1))
        publish(live.hub, 1)
        frames = mux.until(is_entry(start + 2, "v"))
        assert refused(frames, "u"), frames
    finally:
        mux.close()


def test_resume_after_a_reconnect_from_the_last_sequence(live: Server) -> None:
    publish(live.hub, 2)
    seen = live.hub.latest_sequence
    mux = Mux(live.port, [trace("t", seen - 1)])
    mux.until(is_entry(seen))
    mux.close()
    # The server lets the dropped stream's subscription go at once.
    wait_for(lambda: live.hub.subscriber_count == 0)
    publish(live.hub, 3, "missed")
    again = Mux(live.port, [trace("t", seen)])
    try:
        frames = again.until(is_entry(seen + 3))
        assert entries(frames, "t") == [seen + 1, seen + 2, seen + 3]
    finally:
        again.close()


def test_a_reader_its_hub_cuts_is_told_lagged_and_resumes_after_the_gap(live: Server) -> None:
    """A tab that stops reading: its writer blocks, the hub moves past its subscription and
    cuts it (the others read on, and the stalled stream holds nothing of the history); when it
    reads again it is told `lagged`, and subscribing again from its cursor starts with the gap."""
    start = live.hub.latest_sequence
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(("127.0.0.1", live.port))
    slow = Mux(live.port, [trace("t", start)], sock=stalled)
    fast = Mux(live.port, [trace("t", start)])
    seen: list[int] = []

    def read_all() -> None:
        while len(seen) < 400:
            seen.extend(entries([fast.frame()], "t"))

    reader = threading.Thread(target=read_all)
    try:
        reader.start()
        wait_for(lambda: live.hub.subscriber_count == 2)
        big = "x" * 20_000
        for index in range(400):  # far more than the stalled socket's buffers hold
            live.hub.publish("diagnostic", "test.entry", f"{index} {big}")
            if index % 16 == 15:  # the reader that reads keeps up: only the stalled one lags
                wait_for(lambda index=index: len(seen) > index)
        reader.join(timeout=10)
        assert seen == list(range(start + 1, start + 401))
        wait_for(lambda: live.hub.subscriber_count == 1)  # the stalled one, cut
        frames = slow.until(lambda f: f["type"] == "multiplex.closed")
        assert frames[-1] == {"type": "multiplex.closed", "subscription": "t", "reason": "lagged"}
        got = entries(frames, "t")
        assert got == list(range(start + 1, start + 1 + len(got)))  # in order, no hole
        cursor = got[-1] if got else start
        slow.subscribe(trace("t", cursor))
        gap = slow.until(lambda f: f.get("subscription") == "t")[-1]
        assert gap["frame"]["type"] == "trace.gap"
        assert gap["frame"]["requestedAfterSequence"] == cursor
        # The rest of the history follows the gap, to the newest entry.
        assert entries(slow.until(is_entry(start + 400)), "t")[-1] == start + 400
    finally:
        slow.close()
        fast.close()


def test_error_frames_leave_the_stream_going(live: Server) -> None:
    publish(live.hub, 1)
    latest = live.hub.latest_sequence
    bad = [
        ({"id": "u", "route": "nothing.stream"}, "BX1011"),
        ({"id": "i", "route": "invocations.stream", "params": {"invocationId": "x"}}, "BX1011"),
        ({"id": "c", "route": "trace.stream", "query": {"after": "soon"}}, "BX3001"),
        ({"id": "a", "route": "trace.stream", "query": {"after": latest + 10}}, "BX3002"),
        ({"id": "s", "route": "sessions.stream", "params": {"sessionId": "nope"}}, "AB8261"),
        ({"id": "m", "route": "sessions.stream"}, "AB8261"),
        ({"id": "h", "route": "sessions.stream", "params": {"sessionId": "hs_" + "0" * 16}}, None),
        (trace("t", latest), None),
        (trace("t", latest), "BX1012"),  # its id is in use
    ]
    mux = Mux(live.port, [request for request, _ in bad])
    try:
        errors = {}
        for _ in range(len(bad) - 1):
            frame = mux.frame()
            assert frame["type"] == "multiplex.error", frame
            errors[frame["subscription"]] = frame["error"]["code"]
        # This server has no host sessions: the route's own refusal, AB8265.
        assert errors == {r["id"]: c or "AB8265" for r, c in bad if r["id"] != "t"} | {
            "t": "BX1012"
        }
        publish(live.hub, 1)
        assert entries(mux.until(is_entry(latest + 1)), "t") == [latest + 1]
        # A request for a stream that is gone, or a body the schema refuses.
        status, body = mux.call(
            "POST",
            "/api/multiplex/AAAAAAAAAAAAAAAAAAAAAA/subscriptions",
            {"subscriptions": [trace("x")]},
        )
        assert (status, body["error"]["code"]) == (404, "BX1010")
        status, body = mux.call(
            "POST",
            f"/api/multiplex/{mux.id}/subscriptions",
            {"subscriptions": [{"id": "bad id", "route": "trace.stream"}]},
        )
        assert (status, body["error"]["code"]) == (400, "BX1004")
        status, body = mux.call(
            "POST",
            "/api/multiplex/stream",
            {"subscriptions": [{"id": "bad id", "route": "trace.stream"}]},
        )
        assert (status, body["error"]["code"]) == (400, "BX1004")
        many = [trace(f"n{i}", latest) for i in range(SUBSCRIPTIONS + 1)]
        status, body = mux.call(
            "POST", f"/api/multiplex/{mux.id}/subscriptions", {"subscriptions": many}
        )
        assert (status, body["error"]["code"]) == (400, "BX1004")
    finally:
        mux.close()


def test_keepalives_and_auth(live: Server) -> None:
    mux = Mux(live.port, [])
    try:
        assert mux.frame() == {"type": "multiplex.keepalive"}
    finally:
        mux.close()
    refused = http.client.HTTPConnection("127.0.0.1", live.port, timeout=10)
    refused.request(
        "POST",
        "/api/multiplex/stream",
        b'{"subscriptions":[]}',
        {"Host": f"127.0.0.1:{live.port}", "Content-Type": "application/json"},
    )
    reply = refused.getresponse()
    assert reply.status == 401 and json.loads(reply.read())["error"]["code"].startswith("BX2")
    refused.close()


def test_a_client_that_leaves_is_let_go_at_once(live: Server) -> None:
    sock = socket.create_connection(("127.0.0.1", live.port))
    body = json.dumps({"subscriptions": [trace("t", live.hub.latest_sequence)]}).encode()
    sock.sendall(
        f"POST /api/multiplex/stream HTTP/1.1\r\nHost: 127.0.0.1:{live.port}\r\n"
        f"x-bundle-session: {TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    wait_for(lambda: live.hub.subscriber_count == 1)
    sock.close()
    wait_for(lambda: live.hub.subscriber_count == 0)


# -- sessions and project events ---------------------------------------------------------------


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevServer, Client]]:
    root = tmp_path_factory.mktemp("multiplex")
    server = start_dev_server(
        root,
        host_executables={"host_a": host("raw", "ready", "echo"), "host_b": host("raw", "yes")},
        check_responses=True,
    )
    assert server.sessions is not None
    server.sessions._grace = 0.3
    try:
        yield server, Client(server.port, server.session_token)
    finally:
        server.close()


def session(id: str, session_id: str) -> dict[str, Any]:
    return {"id": id, "route": "sessions.stream", "params": {"sessionId": session_id}}


def output_of(frames: list[Frame], subscription: str) -> bytes:
    return b"".join(
        base64.b64decode(f["data"]["data"])
        for f in frames
        if f.get("subscription") == subscription and f.get("event") == "output"
    )


def test_sessions_and_project_events_share_one_stream(dev: tuple[DevServer, Client]) -> None:
    server, client = dev
    first, second = client.create(), client.create()
    mux = Mux(
        server.port,
        [session("a", first["id"]), {"id": "p", "route": "project.stream"}],
        token=server.session_token,
    )
    try:
        head = mux.until(lambda f: f.get("subscription") == "a" and f.get("event") == "output")
        state = next(f for f in head if f.get("event") == "state")
        assert state["data"]["session"]["id"] == first["id"]
        mux.subscribe(session("b", second["id"]))
        for subscription, record in (("a", first), ("b", second)):
            reply = client.request(
                "POST", f"/api/sessions/{record['id']}/input", {"data": f"to {subscription}\r"}
            )
            assert reply.status == 204
        seen: dict[str, bytes] = {"a": b"", "b": b""}
        while not all(f"to {s}".encode() in seen[s] for s in seen):
            frame = mux.frame()
            if frame.get("event") == "output":
                seen[frame["subscription"]] += base64.b64decode(frame["data"]["data"])
        assert b"to b" not in seen["a"] and b"to a" not in seen["b"]
        # The session ends: its `end` event, then the subscription's end; the others go on.
        client.request("POST", f"/api/sessions/{first['id']}/terminate", {})
        frames = mux.until(lambda f: f["type"] == "multiplex.closed")
        assert frames[-2]["event"] == "end" and frames[-1] == {
            "type": "multiplex.closed",
            "subscription": "a",
            "reason": "ended",
        }
        reply = client.request("POST", "/api/project/builds", {})
        assert reply.status == 202
        project = mux.until(lambda f: f.get("subscription") == "p")[-1]
        assert project["frame"]["type"] == "invalidation"
        assert project["frame"]["payload"]["reason"] == "manual"
    finally:
        mux.close()
        client.request("POST", f"/api/sessions/{second['id']}/terminate", {})


def settled(read: Callable[[], int], quiet: float = 1.0, limit: float = 30.0) -> int:
    """`read()` once it stopped growing for `quiet` seconds (what a paced stream waits at), or
    after `limit` seconds if it never did."""
    value, since = read(), time.monotonic()
    deadline = since + limit
    while time.monotonic() - since < quiet and time.monotonic() < deadline:
        time.sleep(0.05)
        if read() != value:
            value, since = read(), time.monotonic()
    return value


def test_session_output_is_paced_by_what_the_page_consumed(dev: tuple[DevServer, Client]) -> None:
    """A flooding session sends at most the window past what was consumed, then waits (its
    queue holding the PTY), while the connection is read on: another subscription's frames
    still arrive. Consuming lets more through."""
    server, client = dev
    flood = client.create("host_b")
    echo = client.create("host_a")
    mux = Mux(
        server.port,
        [session("y", flood["id"]), session("e", echo["id"])],
        token=server.session_token,
        check=False,
    )
    received = {"y": 0, "e": b""}

    def read_all() -> None:
        try:
            while True:
                frame = mux.frame()
                if frame.get("event") == "output":
                    data = base64.b64decode(frame["data"]["data"])
                    if frame["subscription"] == "y":
                        received["y"] += len(data)
                    else:
                        received["e"] += data
        except Exception:  # whatever http.client raises once the test closed the stream
            return

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    try:
        spent = settled(lambda: received["y"])
        # The window, plus at most one batch taken while inside it (a queue holds the PTY at
        # its high water), plus the replay.
        assert mux.window <= spent <= mux.window + 2 * HIGH_WATER + RETAINED, spent
        # The connection is not held up by the paced session: the other one echoes.
        reply = client.request("POST", f"/api/sessions/{echo['id']}/input", {"data": "still"})
        assert reply.status == 204
        wait_for(lambda: b"still" in received["e"])
        # A total past what was sent opens nothing beyond it; the total sent opens a window.
        mux.consumed("y", 1 << 50)
        wait_for(lambda: received["y"] >= spent + mux.window, timeout=10)
        more = settled(lambda: received["y"], limit=10)
        assert more <= spent + mux.window + 2 * HIGH_WATER, (spent, more)
    finally:
        mux.close()
        for record in (flood, echo):
            client.request("POST", f"/api/sessions/{record['id']}/terminate", {})


def test_the_server_ends_its_streams_when_it_stops(tmp_path: Path) -> None:
    server = start_dev_server(tmp_path, host_executables={"host_a": host("sleep")})
    mux = Mux(server.port, [{"id": "p", "route": "project.stream"}], token=server.session_token)
    service = server.services.get(MultiplexService)
    assert service.open_streams == 1
    server.close()
    # The stream ended: no hang until a keep-alive, and nothing left open.
    with pytest.raises(AssertionError, match="ended"):
        while True:
            mux.frame()
    assert service.open_streams == 0
    mux.close()
