"""PTY output throughput through the host-session SSE stream vs a raw read loop of the same PTY.

The host: `/bin/cat FILE`, FILE being SIZE bytes of letters (no newline, so the tty's output
processing leaves the byte count alone). Each measurement runs the same command on a PTY of the
same size and times from the first byte received to the last. The measuring side does the least
it can while timed: the two that receive over TCP take the bytes into one preallocated buffer
and take them apart (HTTP, chunked framing, SSE, base64) and hash them only after the clock
stops. On 2 cores the receiver shares the machine with the child, the kernel's tty worker and
the sender: a client parsing with http.client as it went cost the stream ~15% (0.70-0.74x of
raw for the same server, against 0.56-0.64x with that client).

- raw: this process spawns it on a PTY (ptyprocess) and reads the master fd (blocking) with
  `os.readv` into one preallocated buffer in a tight loop: the ceiling, what the kernel's PTY
  gives one reader;
- pipe: the bare pipeline the stream stands on, without HTTP, SSE framing or a server: a
  separate process reads the same PTY with one select loop, base64-encodes each read as it
  arrives (as the server does) and sends what it gathered over loopback TCP to this process,
  which receives it like the stream. It is what any server that must base64 the output and
  send it to another process pays on this machine; sse/pipe is what the server adds to that;
- sse: a development server (`start_dev_server`, in a separate process, so the measuring client
  does not compete with it for a GIL) runs it as host_a; this process creates the session and at
  once sends `GET /api/sessions/<id>/stream` on a plain socket and receives until the server
  closes the stream after `end`; then it checks the status, undoes the chunked framing,
  decodes each `output` event's base64 and counts and hashes the decoded bytes. The session is
  created with a prompt-less `POST /api/sessions` right before the stream opens, so some of the
  output is in the replay frame: it is counted too, byte-exact.

Printed per round: bytes/s of each, the ratios sse/raw and sse/pipe, and whether each was
complete (every byte, checked by sha256) or the stream was cut as lagging. Then medians over
every round, and the median of the per-round ratios (each round measures all three back to
back, so it is the less noisy figure when the machine's load drifts between rounds). The
stream is paced by its reader, never cut for reading as fast as it can: a round where any path
lost a byte or the stream was cut is a failure, counted and printed, and fails the bench (exit
1); it is never dropped from the medians. Goal: sse/raw >= 0.7, 0 cuts in 20 rounds. No
assertions on speed: the machine is shared and noisy, with 2 cores.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import http.client
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SIZE = 64 * 1024 * 1024
ROUNDS = 20
CAT = "/bin/cat"


def make_file(directory: Path, size: int) -> Path:
    letters = bytes(range(ord("a"), ord("z") + 1)) * 2521  # 65546 bytes, no newline
    path = directory / "letters.bin"
    with path.open("wb") as handle:
        left = size
        while left:
            block = letters[: min(left, len(letters))]
            handle.write(block)
            left -= len(block)
    return path


def raw_read(path: Path, size: int) -> tuple[float, str]:
    """Seconds from first to last byte of `cat path` read straight from the PTY master (a
    blocking fd) by the same timed loop as the TCP receivers; the digest is taken after the
    clock stops."""
    import ptyprocess

    child = ptyprocess.PtyProcess.spawn([CAT, str(path)], dimensions=(24, 80))

    def read_into(view: memoryview) -> int:
        try:
            return os.readv(child.fd, [view])
        except OSError:  # EIO: the child is gone and everything was read
            return 0

    try:
        seconds, received = receive_timed(read_into, size)
    finally:
        child.close(force=True)
    digest = hashlib.sha256(received).hexdigest()
    return seconds, digest if len(received) == size else "short"


# --- the bare pipeline: PTY -> base64 -> TCP, no HTTP, no server ---


def pipe_serve(path: str, port: str) -> None:
    """The bare pipeline's sending side, in its own process like the server: read the PTY
    (what is waiting, up to 64 KiB), base64 each read as it arrives (as the server does), send
    what was gathered to 127.0.0.1:port; one select loop."""
    import ptyprocess

    sock = socket.create_connection(("127.0.0.1", int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setblocking(False)
    child = ptyprocess.PtyProcess.spawn([CAT, path], dimensions=(24, 80))
    fd = child.fd
    os.set_blocking(fd, False)
    pending = bytearray()
    carry = b""  # base64 goes in whole 3-byte groups, so the concatenation decodes as one
    open_ = True
    while open_ or pending:
        readers = [fd] if open_ else []
        writers = [sock] if pending else []
        readable, writable, _ = select.select(readers, writers, [], 5)
        if readable:
            for _ in range(16):
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    break
                except OSError:  # EIO: the child is gone and everything was read
                    open_ = False
                    break
                if not data:
                    open_ = False
                    break
                data = carry + data
                whole = len(data) - len(data) % 3
                pending += base64.b64encode(memoryview(data)[:whole])
                carry = data[whole:]
            if not open_:
                pending += base64.b64encode(carry)
        if writable:
            del pending[: sock.send(pending)]
    sock.close()
    child.close(force=True)


def receive_timed(read_into: Callable[[memoryview], int], expected: int) -> tuple[float, bytes]:
    """Everything `read_into` (a `recv_into`) delivers until it returns 0; seconds from first
    to last byte. Received into one preallocated buffer (`expected` bytes, grown if need be):
    the receiving side allocates and copies nothing more while it is timed."""
    buffer = bytearray(expected)
    view = memoryview(buffer)
    got = 0
    first = last = 0.0
    while True:
        if got == len(buffer):
            view.release()
            buffer.extend(bytes(len(buffer)))
            view = memoryview(buffer)
        count = read_into(view[got:])
        if not count:
            break
        last = time.perf_counter()
        if not got:
            first = last
        got += count
    view.release()
    del buffer[got:]
    return last - first, bytes(buffer)


def base64_bound(size: int) -> int:
    """Room for `size` bytes in base64 plus framing."""
    return size * 4 // 3 + (1 << 20)


def pipe_read(path: Path, size: int) -> tuple[float, str]:
    """Seconds from first to last byte the bare pipeline delivered; the decoded digest."""
    listener = socket.create_server(("127.0.0.1", 0))
    sender = subprocess.Popen(
        [sys.executable, __file__, "--pipe", str(path), str(listener.getsockname()[1])]
    )
    conn, _ = listener.accept()
    try:
        seconds, received = receive_timed(conn.recv_into, base64_bound(size))
    finally:
        conn.close()
        listener.close()
        sender.wait(30)
    decoded = base64.b64decode(received)
    digest = hashlib.sha256(decoded).hexdigest()
    return seconds, digest if len(decoded) == size else f"short {len(decoded)}"


# --- the server, in its own process ---


def serve(root: str, path: str, on_input: bool = False) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import bundle_server.sessions.handlers  # noqa: F401  (registers the session routes)
    from bundle_server import start_dev_server

    # `on_input`: the host starts its output only once it reads a line, so a reader can be
    # attached first and see every byte (bench_workbench_terminal.py).
    host = (
        {"executable": "/bin/sh", "args": ["-c", f"stty -echo; read x; exec {CAT} {path}"]}
        if on_input
        else {"executable": CAT, "args": [path]}
    )
    server = start_dev_server(root, host_executables={"host_a": host})
    print(json.dumps({"port": server.port, "token": server.session_token}), flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    server.close()


class Server:
    def __init__(self, root: str, path: Path, on_input: bool = False) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", root, str(path), *(["on-input"] * on_input)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        info = json.loads(self.process.stdout.readline())
        self.port: int = info["port"]
        self.token: str = info["token"]

    def headers(self) -> dict[str, str]:
        return {
            "Host": f"127.0.0.1:{self.port}",
            "x-bundle-session": self.token,
            "Content-Type": "application/json",
        }

    def post(self, path: str, body: Any) -> Any:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("POST", path, json.dumps(body).encode(), self.headers())
            response = conn.getresponse()
            return response.status, json.loads(response.read() or b"null")
        finally:
            conn.close()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)


def dechunk(body: bytes) -> bytes:
    """The payload of a chunked HTTP/1.1 body."""
    parts: list[bytes] = []
    at = 0
    while True:
        line_end = body.index(b"\r\n", at)
        length = int(body[at:line_end].split(b";")[0], 16)
        if not length:
            return b"".join(parts)
        start = line_end + 2
        parts.append(body[start : start + length])
        at = start + length + 2


def sse_read(server: Server, size: int) -> tuple[float, str, str]:
    """Seconds from the first to the last byte received on the session stream; the digest of
    the decoded output; how the stream ended. The client only receives while it is timed: the
    HTTP response (status, chunked framing) and the events' base64 are taken apart after the
    clock stops, so the client's parsing and decoding (a quarter of a core at these rates
    with http.client) do not compete with the server for the two cores: what is timed is what
    the server delivers."""
    status, body = server.post("/api/sessions", {"host": "host_a", "cols": 80, "rows": 24})
    assert status == 201, body
    session_id = body["session"]["id"]
    request = f"GET /api/sessions/{session_id}/stream HTTP/1.1\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in server.headers().items()
    )
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.settimeout(None)  # blocking receives, like the pipeline's (a timeout adds a poll each)
    try:
        sock.sendall(request.encode() + b"\r\n")
        # The server closes the stream after its `end` event (or after `: lagged`).
        seconds, received = receive_timed(sock.recv_into, base64_bound(size))
    finally:
        sock.close()
    head, _, payload = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head[:200]
    if b"\r\ntransfer-encoding: chunked" in head.lower():
        payload = dechunk(payload)
    digest = hashlib.sha256()
    got = 0
    ending = "closed early"
    for event in payload.split(b"\n\n"):
        if event.startswith(b"event: output\n"):
            decoded = base64.b64decode(event.split(b"data: ", 1)[1][9:-2])  # {"data":"...."}
            got += len(decoded)
            digest.update(decoded)
        elif event.startswith(b"event: end\n"):
            ending = "end"
        elif event.startswith(b": lagged"):
            ending = "cut (lagged)"
    return seconds, digest.hexdigest() if got == size else f"short {got}", ending


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=SIZE)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--serve", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--pipe", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], on_input=args.serve[2:] == ["on-input"])
        return
    if args.pipe:
        pipe_serve(*args.pipe)
        return
    with tempfile.TemporaryDirectory() as root:
        path = make_file(Path(root), args.size)
        expected = hashlib.sha256(path.read_bytes()).hexdigest()
        server = Server(root, path)
        raws: list[float] = []
        pipes: list[float] = []
        sses: list[float] = []
        failures: list[int] = []
        try:
            for round_ in range(1, args.rounds + 1):
                raw_seconds, raw_digest = raw_read(path, args.size)
                pipe_seconds, pipe_digest = pipe_read(path, args.size)
                sse_seconds, sse_digest, ending = sse_read(server, args.size)
                raw_rate, sse_rate = args.size / raw_seconds, args.size / sse_seconds
                pipe_rate = args.size / pipe_seconds
                raws.append(raw_rate)
                pipes.append(pipe_rate)
                sses.append(sse_rate)
                if not raw_digest == pipe_digest == sse_digest == expected or ending != "end":
                    failures.append(round_)
                print(
                    f"round {round_}: raw {raw_rate / 1e6:6.1f} MB/s"
                    f" ({'exact' if raw_digest == expected else raw_digest})"
                    f"  pipe {pipe_rate / 1e6:6.1f} MB/s"
                    f" ({'exact' if pipe_digest == expected else pipe_digest})"
                    f"  sse {sse_rate / 1e6:6.1f} MB/s"
                    f" ({'exact' if sse_digest == expected else sse_digest}, {ending})"
                    f"  sse/raw {sse_rate / raw_rate:.2f}  sse/pipe {sse_rate / pipe_rate:.2f}"
                )
        finally:
            server.close()
    raw_median, sse_median = statistics.median(raws), statistics.median(sses)
    pipe_median = statistics.median(pipes)
    print(
        f"median over all {args.rounds} rounds ({args.size / 2**20:.0f} MiB each): raw"
        f" {raw_median / 1e6:.1f} MB/s, pipe {pipe_median / 1e6:.1f} MB/s,"
        f" sse {sse_median / 1e6:.1f} MB/s; sse/raw {sse_median / raw_median:.2f} (goal >= 0.7),"
        f" per-round {statistics.median(s / r for s, r in zip(sses, raws, strict=True)):.2f};"
        f" pipe/raw {pipe_median / raw_median:.2f};"
        f" sse/pipe {sse_median / pipe_median:.2f},"
        f" per-round {statistics.median(s / p for s, p in zip(sses, pipes, strict=True)):.2f}"
    )
    print(f"rounds short or cut: {len(failures)} of {args.rounds} (goal 0)")
    if failures:
        print(f"FAILED: rounds {', '.join(map(str, failures))} lost bytes or were cut")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
