"""A server in a process of its own whose memory a test reads from /proc, and a reader of many
streams at once: for the tests of what streams cost the server's memory
(test_stream_memory.py, test_multiplex_memory.py)."""

from __future__ import annotations

import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _live import wait_for

from bundle_server._streams.trim import TRIM_DELAY

MIB = 1 << 20
TESTS = Path(__file__).parent


class MemoryServer:
    """`script` (a server of tests/, run with `arguments`) prints its port, then answers one
    line per command line on its stdin."""

    def __init__(self, script: str, *arguments: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(TESTS / script), *arguments],
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

    def settled_rss(self) -> int:
        """The RSS once the server has trimmed its heap after the streams that just ended (it
        trims `TRIM_DELAY` after the last one ended) and their greenlets have finished."""
        time.sleep(TRIM_DELAY + 0.25)
        return self.rss()

    def stop(self) -> None:
        self.process.kill()
        self.process.communicate()


def read_everything(socks: list[socket.socket], last_sequence: int) -> None:
    """Read every stream until it has delivered the entry numbered `last_sequence`."""
    last = b'"sequence":%d,' % last_sequence
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


def crowd_costs(
    server: MemoryServer, subscribe: Callable[[int], socket.socket], crowd: int, entries: int
) -> dict[str, int]:
    """The RSS of `server` idle (after one stream warmed the code paths a stream uses), with
    `crowd` streams replaying all `entries` not reading, then having read everything, and
    after they closed; each bound is asserted where it is measured: at most 64 MiB over idle
    with the crowd, reading or not, and within 16 MiB of idle once it closed."""
    warm = subscribe(server.port)
    read_everything([warm], entries)
    warm.close()
    wait_for(lambda: server.subscribers() == 0)
    idle = server.settled_rss()
    socks = [subscribe(server.port) for _ in range(crowd)]
    try:
        wait_for(lambda: server.subscribers() == crowd, timeout=30)
        not_reading = server.settled_rss()
        assert not_reading - idle <= 64 * MIB, (idle / MIB, not_reading / MIB)
        read_everything(socks, entries)
        reading = server.rss()
        assert reading - idle <= 64 * MIB, (idle / MIB, reading / MIB)
    finally:
        for sock in socks:
            sock.close()
    wait_for(lambda: server.subscribers() == 0, timeout=5)
    after = server.settled_rss()
    assert after - idle <= 16 * MIB, (idle / MIB, after / MIB)
    return {"idle": idle, "not reading": not_reading, "reading": reading, "closed": after}
