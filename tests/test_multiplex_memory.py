"""What multiplexed streams cost the server's memory, read from /proc, with readers that read and
readers that stopped.

The server runs in a process of its own (tests/_multiplex_memory_server.py). Two bounds:

- 200 multiplexed streams, each subscribed to the whole trace history (10,000 entries of
  ~500 bytes), cost what 200 trace streams cost (tests/test_stream_memory.py): the hub's shared
  frames, written in bounded pieces, never copies of the history; at most 64 MiB over idle
  whether they read or not, and back within 16 MiB of idle once they close.
- A tab that stopped reading while the history moves on holds nothing of it: its writer is
  blocked and its subscription held the history's replay (~30 MiB of frames); once the history
  rolled past it the hub cut the subscription and the replay was let go. What the RSS keeps
  after that is the allocator's high water, free for reuse: rolling the history over again
  does not grow it, and `malloc_trim` (the server's `trim` command) gives it back, to within
  16 MiB of idle. Were the replay still held, neither would be true.
"""

from __future__ import annotations

import json
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

MIB = 1 << 20
TESTS = Path(__file__).parent


class MemoryServer:
    def __init__(self, entries: int, filler: int) -> None:
        self.entries = entries
        self.process = subprocess.Popen(
            [sys.executable, str(TESTS / "_multiplex_memory_server.py"), str(entries), str(filler)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=TESTS,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    def ask(self, command: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def subscribers(self) -> int:
        return int(self.ask("subscribers"))

    def rss(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024

    def stop(self) -> None:
        self.process.kill()
        self.process.communicate()


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[MemoryServer]:
    entries, filler = request.param
    server = MemoryServer(entries, filler)
    try:
        yield server
    finally:
        server.stop()


def subscribe(port: int, *, receive_buffer: int | None = None) -> socket.socket:
    """A multiplexed stream of the whole trace, on a raw socket."""
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", port))
    body = json.dumps(
        {"subscriptions": [{"id": "t", "route": "trace.stream", "query": {"after": 0}}]}
    ).encode()
    sock.sendall(
        f"POST /api/multiplex/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"x-bundle-session: {TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    return sock


def read_everything(socks: list[socket.socket], entries: int) -> None:
    """Read every stream until it has delivered the last retained entry."""
    last = b'"sequence":%d,' % entries
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
    time.sleep(seconds)  # the allocator's trims and the streams' greenlets settle
    return server.rss()


@pytest.mark.parametrize("server", [(10_000, 400)], indirect=True)
def test_two_hundred_multiplexed_replays_cost_pieces_not_copies(server: MemoryServer) -> None:
    warm = subscribe(server.port)
    read_everything([warm], server.entries)
    warm.close()
    wait_for(lambda: server.subscribers() == 0)
    idle = settle(server)

    socks = [subscribe(server.port) for _ in range(200)]
    try:
        wait_for(lambda: server.subscribers() == 200, timeout=30)
        not_reading = settle(server)
        assert not_reading - idle <= 64 * MIB, (idle / MIB, not_reading / MIB)
        read_everything(socks, server.entries)
        reading = server.rss()
        assert reading - idle <= 64 * MIB, (idle / MIB, reading / MIB)
    finally:
        for sock in socks:
            sock.close()
    wait_for(lambda: server.subscribers() == 0, timeout=5)
    after = settle(server)
    print(
        f"\nRSS (MiB): idle {idle / MIB:.1f}, 200 streams not reading {not_reading / MIB:.1f},"
        f" reading {reading / MIB:.1f}, closed {after / MIB:.1f}"
    )
    assert after - idle <= 16 * MIB, (idle / MIB, after / MIB)


@pytest.mark.parametrize("server", [(10_000, 3_000)], indirect=True)
def test_a_tab_that_stopped_reading_holds_nothing_of_a_history_that_moved_on(
    server: MemoryServer,
) -> None:
    idle = settle(server)
    stalled = subscribe(server.port, receive_buffer=4096)
    try:
        wait_for(lambda: server.subscribers() == 1)
        # Twice the history: every entry the stalled stream's replay referred to is evicted.
        assert server.ask(f"publish {2 * server.entries}") == "ok"
        wait_for(lambda: server.subscribers() == 0, timeout=10)  # cut by its hub
        moved_on = settle(server)
        assert server.ask(f"publish {2 * server.entries}") == "ok"
        again = settle(server)
        assert again - moved_on <= 4 * MIB, (moved_on / MIB, again / MIB)
        server.ask("trim")
        trimmed = settle(server)
        print(
            f"\nRSS (MiB): idle {idle / MIB:.1f}, a stalled reader's history rolled over"
            f" {moved_on / MIB:.1f}, again {again / MIB:.1f}, trimmed {trimmed / MIB:.1f}"
        )
        assert trimmed - idle <= 16 * MIB, (idle / MIB, moved_on / MIB, trimmed / MIB)
    finally:
        stalled.close()
