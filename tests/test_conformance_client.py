"""The kit's HTTP client against a target of its own: a flood on one kept-alive connection
goes on when the target closes that connection without saying so."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conformance._client import Client
from conformance._target import Target


class SilentCloser(BaseHTTPRequestHandler):
    """HTTP/1.1, keep-alive by default, yet every second connection ends after one answer
    with no `Connection: close`: the client learns it only when it sends the next request."""

    protocol_version = "HTTP/1.1"
    answered = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        SilentCloser.answered += 1  # before the answer: the client may look at once
        self.close_connection = SilentCloser.answered % 2 == 0
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def target() -> Iterator[Target]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), SilentCloser)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield Target(f"http://127.0.0.1:{server.server_address[1]}", "token")
    finally:
        server.shutdown()
        server.server_close()


def test_a_flood_survives_connections_the_target_closes_silently(target: Target) -> None:
    SilentCloser.answered = 0
    bodies = (b"{}" for _ in range(20))
    replies = list(Client(target).requests_kept_alive("POST", "/receipts", bodies, auth="none"))
    assert [reply.status for reply in replies] == [204] * 20
    assert SilentCloser.answered == 20  # each body answered once: none lost, none sent twice
