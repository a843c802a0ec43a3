"""Request bodies a client frames badly: refused in the envelope, never a 500 or a traceback.

Raw sockets against the real server stack (`serve`): chunked bodies with a malformed size, a
size that lies, a missing CRLF, and a client that leaves mid-body; and Content-Type headers
that name another charset or come twice.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
from collections.abc import Iterator

import pytest
from _live import RECEIPT_TOKEN, TOKEN, Server, serve

from bundle_server import create_app
from bundle_server._http.shell import LoopbackShell, _RequestHeaders, check_framing
from bundle_server.logs.hub import LogHub
from bundle_server.trace.hub import TraceHub

RECEIPTS = "/api/trace/receipts"


@pytest.fixture
def server() -> Iterator[Server]:
    yield from serve(TraceHub())


def send(server: Server, head: str, body: bytes, *, read: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head.encode("ascii") + body)
        if not read:
            return b""
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def chunked_head(server: Server, path: str = RECEIPTS) -> str:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {server.host}\r\n"
        f"Authorization: Bearer {RECEIPT_TOKEN}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )


def status_and_code(raw: bytes) -> tuple[int, str]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"Transfer-Encoding: chunked" in head:
        size, _, rest = body.partition(b"\r\n")
        body = rest[: int(size, 16)]
    return status, json.loads(body)["error"]["code"]


def errors_logged(server: Server) -> list[str]:
    entries = server.hub.replay(0)["entries"]
    return [e["summary"] for e in entries if e.get("status") == "error" or "error" in e["kind"]]


BAD_FRAMING = {
    "a size that is not hex": b"zz\r\n{}\r\n0\r\n\r\n",
    "a negative size": b"-5\r\n{}\r\n0\r\n\r\n",
    "a size of 20 hex digits": b"f" * 20 + b"\r\n{}\r\n0\r\n\r\n",
    "a size smaller than the data": b"1\r\n{}\r\n0\r\n\r\n",
    "no CRLF after the data": b"2\r\n{}XX0\r\n\r\n",
}


@pytest.mark.parametrize("case", sorted(BAD_FRAMING))
def test_malformed_chunked_framing_is_a_400_in_the_envelope(server: Server, case: str) -> None:
    raw = send(server, chunked_head(server), BAD_FRAMING[case])
    assert status_and_code(raw) == (400, "BX1004"), raw[:300]
    assert b"Traceback" not in raw
    assert errors_logged(server) == []


def test_a_client_that_leaves_mid_body_is_not_a_server_error(server: Server) -> None:
    send(server, chunked_head(server), b'40\r\n{"version": 1,', read=False)
    time.sleep(0.3)  # the server notices the end of the connection
    assert errors_logged(server) == []


@pytest.mark.parametrize(
    "headers",
    [
        "Content-Type: application/json; charset=utf-16\r\n",
        "Content-Type: application/json\r\nContent-Type: text/plain\r\n",
    ],
)
def test_another_charset_or_a_second_content_type_is_refused(server: Server, headers: str) -> None:
    body = b"{}"
    head = (
        f"POST {RECEIPTS} HTTP/1.1\r\nHost: {server.host}\r\n"
        f"Authorization: Bearer {RECEIPT_TOKEN}\r\n{headers}"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    assert status_and_code(send(server, head, body)) == (415, "BX1003")


@pytest.fixture
def quick_body_server() -> Iterator[Server]:
    """The real stack with a half-second body deadline (the spec's is 30 s)."""
    hub, logs = TraceHub(), LogHub()
    shell = LoopbackShell("127.0.0.1", 0, body_timeout=0.5)
    app = create_app(
        port=shell.port, session_token=TOKEN, receipt_token=RECEIPT_TOKEN, hub=hub, logs=logs
    )
    shell.start(app)
    try:
        yield Server(shell.port, hub, logs)
    finally:
        shell.stop()


def trickle(server: Server, chunked: bool) -> tuple[float, bytes]:
    framing = "Transfer-Encoding: chunked" if chunked else "Content-Length: 100"
    head = (
        f"POST {RECEIPTS} HTTP/1.1\r\nHost: {server.host}\r\n"
        f"Authorization: Bearer {RECEIPT_TOKEN}\r\nContent-Type: application/json\r\n"
        f"{framing}\r\n\r\n"
    )
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head.encode())
        received = b""
        for _ in range(100):  # a byte every 0.1 s: 10 s for the whole body, if let
            # Read before each write: a write after the server closed would draw a reset,
            # which can discard its answer unread.
            ready, _, _ = select.select([sock], [], [], 0.1)
            if ready:
                chunk = sock.recv(65536)
                if not chunk:  # the server answered and closed: the whole answer is in
                    break
                received += chunk
                continue
            try:
                sock.sendall(b"1\r\n{\r\n" if chunked else b"{")
            except OSError:
                break
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                received += chunk
    return time.monotonic() - started, received


@pytest.mark.parametrize("chunked", [False, True], ids=["length", "chunked"])
def test_a_trickled_body_is_cut_at_the_body_deadline(
    quick_body_server: Server, chunked: bool
) -> None:
    elapsed, received = trickle(quick_body_server, chunked)
    assert received.startswith(b"HTTP/1.1 408 "), received[:200]
    assert b"BX1008" in received
    assert elapsed < 5  # the deadline, not the 10 s the trickle would take
    assert errors_logged(quick_body_server) == []


def test_a_body_shorter_than_its_length_is_a_400_not_a_server_error(server: Server) -> None:
    head = (
        f"POST {RECEIPTS} HTTP/1.1\r\nHost: {server.host}\r\n"
        f"Authorization: Bearer {RECEIPT_TOKEN}\r\nContent-Type: application/json\r\n"
        "Content-Length: 100\r\n\r\n"
    )
    raw = send(server, head, b'{"version": 1')  # then the client stops sending
    assert status_and_code(raw) == (400, "BX1004"), raw[:300]
    assert errors_logged(server) == []


EXECUTION = {"event": "tool/before", "executionId": "x1", "host": "host_a", "nativeEvent": "x"}
RECEIPT = json.dumps(
    {
        "version": 1,
        "execution": EXECUTION,
        "startedAt": "2025-01-31T12:00:00Z",
        "events": [],
        "host": "host_a",
        "lineage": {"axis": "turn", "value": "t1"},
    }
).encode()
CHUNKED_RECEIPT = b"%x\r\n%s\r\n0\r\n\r\n" % (len(RECEIPT), RECEIPT)
TWO_WAYS = {
    "length-then-chunked": (
        f"Content-Length: {len(CHUNKED_RECEIPT)}\r\nTransfer-Encoding: chunked\r\n",
        CHUNKED_RECEIPT,
    ),
    "chunked-then-length": (
        f"Transfer-Encoding: chunked\r\nContent-Length: {len(CHUNKED_RECEIPT)}\r\n",
        CHUNKED_RECEIPT,
    ),
    "two-lengths": (f"Content-Length: {len(RECEIPT)}\r\n" * 2, RECEIPT),
}


def test_a_receipt_framed_once_is_taken(server: Server) -> None:
    head = (
        f"POST {RECEIPTS} HTTP/1.1\r\nHost: {server.host}\r\n"
        f"Authorization: Bearer {RECEIPT_TOKEN}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    assert send(server, head, CHUNKED_RECEIPT).startswith(b"HTTP/1.1 204 ")


@pytest.mark.parametrize("case", sorted(TWO_WAYS))
def test_a_body_framed_two_ways_is_a_400_in_the_envelope(server: Server, case: str) -> None:
    # Which framing counts would be each reader's guess (request smuggling): refused outright.
    framing, body = TWO_WAYS[case]
    head = (
        f"POST {RECEIPTS} HTTP/1.1\r\nHost: {server.host}\r\n"
        f"Authorization: Bearer {RECEIPT_TOKEN}\r\nContent-Type: application/json\r\n"
        f"{framing}\r\n"
    )
    raw = send(server, head, body)
    assert status_and_code(raw) == (400, "BX1004"), raw[:300]
    assert b"Connection: close" in raw
    assert server.hub.replay(0)["entries"] == []  # nothing was taken in


def exchange(server: Server, data: bytes, wait: float = 5.0) -> tuple[bytes, bool]:
    """Send `data` on a keep-alive connection, our side left open; what came back, and
    whether the server closed the connection (False: still open after `wait` seconds)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=wait) as sock:
        sock.sendall(data)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except TimeoutError:
            return received, False
        return received, True


def keep_alive_head(server: Server, framing: str, version: str = "HTTP/1.1") -> bytes:
    return (
        f"POST {RECEIPTS} {version}\r\nHost: {server.host}\r\n"
        f"Authorization: Bearer {RECEIPT_TOKEN}\r\nContent-Type: application/json\r\n"
        f"{framing}\r\n"
    ).encode("ascii")


@pytest.mark.parametrize("coding", ["gzip", "identity"])
def test_a_transfer_encoding_other_than_chunked_alone_is_a_400_and_closed(
    server: Server, coding: str
) -> None:
    # pywsgi reads a body as chunked only for exactly `chunked`: any other left the body
    # unread, and a request hidden in it ran next on the same connection (smuggling).
    hidden = f"GET /api/trace?after=0 HTTP/1.1\r\nHost: {server.host}\r\n\r\n".encode()
    raw, closed = exchange(
        server, keep_alive_head(server, f"Transfer-Encoding: {coding}\r\n") + hidden
    )
    assert status_and_code(raw) == (400, "BX1004"), raw[:300]
    assert raw.count(b"HTTP/1.1 ") == 1, raw[:600]  # the hidden request never ran
    assert b"Connection: close" in raw and closed
    assert server.hub.replay(0)["entries"] == []


def test_transfer_encoding_in_an_http_1_0_request_is_a_400_and_closed(server: Server) -> None:
    # RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing.
    head = keep_alive_head(
        server, "Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n", "HTTP/1.0"
    )
    raw, closed = exchange(server, head + CHUNKED_RECEIPT)
    assert status_and_code(raw) == (400, "BX1004"), raw[:300]
    assert closed
    assert server.hub.replay(0)["entries"] == []


@pytest.mark.parametrize(
    "length",
    [f"+{len(RECEIPT)}", f"{len(RECEIPT) // 10}_{len(RECEIPT) % 10}"],
    ids=["plus", "underscore"],
)
def test_a_content_length_that_is_not_digits_only_is_a_400_and_closed(
    server: Server, length: str
) -> None:
    # int() reads "+5" and "1_0" as numbers; another reader on the way need not.
    raw, closed = exchange(
        server, keep_alive_head(server, f"Content-Length: {length}\r\n") + RECEIPT
    )
    assert status_and_code(raw) == (400, "BX1004"), raw[:300]
    assert b"Connection: close" in raw and closed
    assert server.hub.replay(0)["entries"] == []


@pytest.mark.parametrize(
    "fields",
    [
        ["Transfer-Encoding: chunked, identity"],
        ["Transfer-Encoding: gzip, chunked"],
        ["Transfer-Encoding: chunked", "Transfer-Encoding: chunked"],
        ["Content-Length: 5 5"],
        ["Content-Length: 0x5"],
    ],
    ids=["chunked-identity", "gzip-chunked", "two-codings", "two-words", "hex"],
)
def test_the_head_allows_one_framing_spelled_one_way(fields: list[str]) -> None:
    # Framings the app happened to refuse (or read as chunked) are refused by the head itself,
    # whatever the app does with the body.
    headers = _RequestHeaders([f"{field}\r\n".encode() for field in fields])
    with pytest.raises(ValueError):
        check_framing(headers)
    for fine in (["Transfer-Encoding: Chunked"], ["Content-Length: 007"], []):
        check_framing(_RequestHeaders([f"{field}\r\n".encode() for field in fine]))
