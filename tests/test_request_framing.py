"""Request bodies a client frames badly: refused in the envelope, never a 500 or a traceback.

Raw sockets against the real server stack (`serve`): chunked bodies with a malformed size, a
size that lies, a missing CRLF, and a client that leaves mid-body; and Content-Type headers
that name another charset or come twice.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest
from _live import RECEIPT_TOKEN, Server, serve

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
