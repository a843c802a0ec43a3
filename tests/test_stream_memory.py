"""What 200 trace-stream subscribers cost the server's memory, read from /proc.

The server runs in a process of its own (tests/_stream_memory_server.py) with 10,000 retained
entries of ~500 bytes; every subscriber asks for the whole history (`after=0`). A stream
writes the hub's shared frame bytes in bounded pieces, so the subscribers cost pieces, not
copies of the history: at most 64 MiB over idle, whether they read or not, and the RSS comes
back within 16 MiB of idle once they close.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from _live import TOKEN
from _memory_probe import MemoryServer, crowd_costs

# Run alone, after the parallel tests (make unit): the server's memory is measured.
pytestmark = pytest.mark.solo

ENTRIES = 10_000
SUBSCRIBERS = 200


@pytest.fixture
def server() -> Iterator[MemoryServer]:
    server = MemoryServer("_stream_memory_server.py", str(ENTRIES))
    try:
        yield server
    finally:
        server.stop()


def subscribe(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        f"GET /api/trace/stream?after=0 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"x-bundle-session: {TOKEN}\r\n\r\n".encode()
    )
    return sock


def test_two_hundred_full_replays_cost_pieces_not_copies(server: MemoryServer) -> None:
    crowd_costs(server, subscribe, SUBSCRIBERS, ENTRIES)
