"""What 200 trace-stream subscribers cost the server's memory, read from /proc.

The server runs in a process of its own (tests/_stream_memory_server.py) with 10,000 retained
entries of ~500 bytes; every subscriber asks for the whole history (`after=0`). A stream
writes the hub's shared frame bytes in bounded pieces, so the subscribers cost pieces, not
copies of the history: at most 64 MiB over idle, whether they read or not, and the RSS comes
back within 16 MiB of idle once they close.
"""

from __future__ import annotations

import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _live import TOKEN, wait_for

# Run alone, after the parallel tests (make unit): the server's memory is measured.
pytestmark = pytest.mark.solo

ENTRIES = 10_000
SUBSCRIBERS = 200
MIB = 1 << 20
TESTS = Path(__file__).parent


class MemoryServer:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(TESTS / "_stream_memory_server.py"), str(ENTRIES)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=TESTS,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    def subscribers(self) -> int:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("subscribers\n")
        self.process.stdin.flush()
        return int(self.process.stdout.readline())

    def rss(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024

    def stop(self) -> None:
        self.process.kill()
        self.process.communicate()


@pytest.fixture
def server() -> Iterator[MemoryServer]:
    server = MemoryServer()
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


def read_everything(socks: list[socket.socket]) -> None:
    """Read every stream until it has delivered the last retained entry."""
    last = b'"sequence":%d,' % ENTRIES
    tails = {sock: b"" for sock in socks}
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        deadline = time.monotonic() + 120
        while tails and time.monotonic() < deadline:
            for key, _ in selector.select(1.0):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                data = sock.recv(1 << 20)
                assert data, "a stream ended before delivering its replay"
                tail = tails[sock][-64:] + data
                if last in tail:
                    del tails[sock]
                    selector.unregister(sock)
                else:
                    tails[sock] = tail
    assert not tails, f"{len(tails)} streams did not deliver their replay"


def settle(server: MemoryServer, seconds: float = 1.0) -> int:
    time.sleep(seconds)
    return server.rss()


def test_two_hundred_full_replays_cost_pieces_not_copies(server: MemoryServer) -> None:
    # Warm the code paths a stream uses, so idle includes them.
    warm = subscribe(server.port)
    read_everything([warm])
    warm.close()
    wait_for(lambda: server.subscribers() == 0)
    idle = settle(server)

    socks = [subscribe(server.port) for _ in range(SUBSCRIBERS)]
    try:
        wait_for(lambda: server.subscribers() == SUBSCRIBERS, timeout=30)
        not_reading = settle(server)
        assert not_reading - idle <= 64 * MIB, (idle / MIB, not_reading / MIB)
        read_everything(socks)
        reading = server.rss()
        assert reading - idle <= 64 * MIB, (idle / MIB, reading / MIB)
    finally:
        for sock in socks:
            sock.close()
    wait_for(lambda: server.subscribers() == 0, timeout=5)
    after = settle(server)
    assert after - idle <= 16 * MIB, (idle / MIB, after / MIB)
