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
import socket
from collections.abc import Iterator

import pytest
from _live import TOKEN, wait_for
from _memory_probe import MIB, MemoryServer, crowd_costs

# Run alone, after the parallel tests (make unit): the server's memory is measured.
pytestmark = pytest.mark.solo


ENTRIES = 10_000  # retained trace entries of the server


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[MemoryServer]:
    filler = request.param  # bytes of each entry's filler
    server = MemoryServer("_multiplex_memory_server.py", str(ENTRIES), str(filler))
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


@pytest.mark.parametrize("server", [400], indirect=True)
def test_two_hundred_multiplexed_replays_cost_pieces_not_copies(server: MemoryServer) -> None:
    costs = crowd_costs(server, subscribe, 200, ENTRIES)
    print("\nRSS (MiB): " + ", ".join(f"{k} {v / MIB:.1f}" for k, v in costs.items()))


@pytest.mark.parametrize("server", [3_000], indirect=True)
def test_a_tab_that_stopped_reading_holds_nothing_of_a_history_that_moved_on(
    server: MemoryServer,
) -> None:
    idle = server.settled_rss()
    stalled = subscribe(server.port, receive_buffer=4096)
    try:
        wait_for(lambda: server.subscribers() == 1)
        # Twice the history: every entry the stalled stream's replay referred to is evicted.
        assert server.ask(f"publish {2 * ENTRIES}") == "ok"
        wait_for(lambda: server.subscribers() == 0, timeout=10)  # cut by its hub
        moved_on = server.settled_rss()
        assert server.ask(f"publish {2 * ENTRIES}") == "ok"
        again = server.settled_rss()
        assert again - moved_on <= 4 * MIB, (moved_on / MIB, again / MIB)
        server.ask("trim")
        trimmed = server.settled_rss()
        print(
            f"\nRSS (MiB): idle {idle / MIB:.1f}, a stalled reader's history rolled over"
            f" {moved_on / MIB:.1f}, again {again / MIB:.1f}, trimmed {trimmed / MIB:.1f}"
        )
        assert trimmed - idle <= 16 * MIB, (idle / MIB, moved_on / MIB, trimmed / MIB)
    finally:
        stalled.close()
