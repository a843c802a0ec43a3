"""Fan-out of the NDJSON trace stream: 200 subscribers, a publisher at 5,000 entries/s.

Server under test: `start_dev_server(tmpdir)`, which serves from its own thread (gevent, one
OS thread) in this process. The publisher is this process's main thread, calling
`hub.publish(...)` at RATE entries/s for PUBLISH seconds, each entry carrying its publish time
in `details.t` (time.time_ns()). Subscribers are SUBSCRIBER_PROCESSES other processes holding
SOCKETS_EACH `GET /api/trace/stream` connections each, read with `selectors`, so reading does
not compete with the server for this process's GIL. A subscriber timestamps each read once
and charges every frame in it `now - t`: the delivery latency, publish to client.

Phase 1 measures the 200 alone. Phase 2 repeats it on a fresh server with one extra stalled
subscriber (it connects, asks for the stream, and never reads, with a tiny receive buffer):
the spec's promise is that a slow reader never slows the producer or the others, so the
others' p99 should not move (ratio near 1) and the stalled one should be cut once its queue
(limit trace-retention: how far a trace reader may fall behind) is exceeded.

Each round runs both phases, each on a fresh server; `--rounds` (default 2) and `--rate` change
the run (about 13 s per round). Printed per phase: the achieved publish rate, frames delivered
vs expected (entries x subscribers), streams complete, streams the server ended early (cut as
lagging) and how far into publishing, latency p50 / p99 / max over all delivered frames, and
the busiest reader's share of a core (near 100% would mean the readers, not the server, limit
delivery); then medians over the rounds and the p99 ratio. No assertions on speed: the
machine is shared and noisy, with 2 cores.
"""

from __future__ import annotations

import argparse
import array
import multiprocessing as mp
import re
import resource
import selectors
import socket
import statistics
import tempfile
import time
from multiprocessing.connection import Connection
from typing import Any

RATE = 5000  # entries per second
PUBLISH = 3.0  # seconds of publishing per phase
DRAIN = 2.0  # seconds after the last publish for frames still in flight
SUBSCRIBER_PROCESSES = 4
SOCKETS_EACH = 50
READ_SIZE = 256 * 1024
# The publish time in an entry frame, as the publisher writes it: details {"t": <ns>}.
PUBLISH_TIME = re.compile(rb'"details":\{"t":([0-9]+)\}')
ROUNDS = 2


# --- subscribers, in spawned processes ---


class Stream:
    """One subscriber connection: HTTP head, then chunked NDJSON decoded incrementally."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.head_done = False
        self.raw = b""  # undecoded transfer bytes
        self.text = b""  # decoded body bytes not yet split into lines
        self.payload_left = 0  # bytes of the current chunk still to come
        self.crlf_left = 0  # bytes of the CRLF after the current chunk still to come
        self.ended = False  # the server ended the stream (last chunk or EOF)
        self.frames = 0

    def feed(self, data: bytes, now: int, latencies: array.array[int]) -> None:
        raw = self.raw + data
        if not self.head_done:
            head, found, rest = raw.partition(b"\r\n\r\n")
            if not found:
                self.raw = raw
                return
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"stream refused: {head[:80]!r}")
            self.head_done, raw = True, rest
        parts, pos = [], 0
        while True:
            if self.payload_left:
                take = min(self.payload_left, len(raw) - pos)
                parts.append(raw[pos : pos + take])
                pos += take
                self.payload_left -= take
                if self.payload_left:
                    break
                self.crlf_left = 2
            if self.crlf_left:
                take = min(self.crlf_left, len(raw) - pos)
                pos += take
                self.crlf_left -= take
                if self.crlf_left:
                    break
            end = raw.find(b"\r\n", pos)
            if end < 0:
                break
            size = int(raw[pos:end].split(b";")[0], 16)
            pos = end + 2
            if size == 0:
                self.ended = True
                break
            self.payload_left = size
        self.raw = raw[pos:]
        body = self.text + b"".join(parts)
        end = body.rfind(b"\n") + 1  # whole frames only; the rest waits for the next read
        self.text = body[end:]
        # One regex pass in C over every whole frame of the read, instead of json.loads per
        # frame: at 5,000 entries/s x 50 sockets the readers must stay far cheaper than the
        # server, or they, not the server, would be what falls behind.
        stamps = PUBLISH_TIME.findall(body, 0, end)
        self.frames += len(stamps)
        latencies.extend([now - int(stamp) for stamp in stamps])


def subscriber(port: int, token: str, after: int, count: int, control: Connection) -> None:
    request = (
        f"GET /api/trace/stream?after={after} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"x-bundle-session: {token}\r\n\r\n"
    ).encode("ascii")
    selector = selectors.DefaultSelector()
    streams = []
    latencies: array.array[int] = array.array("q")
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(request)
        sock.setblocking(False)
        stream = Stream(sock)
        streams.append(stream)
        selector.register(sock, selectors.EVENT_READ, stream)
    ended_at: list[float] = []

    def pump(timeout: float) -> None:
        for key, _ in selector.select(timeout):
            stream: Stream = key.data
            try:
                data = stream.sock.recv(READ_SIZE)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            stream.feed(data, time.time_ns(), latencies)
            if not data or stream.ended:
                stream.ended = True
                ended_at.append(time.monotonic())
                selector.unregister(stream.sock)

    while not all(s.head_done for s in streams):
        pump(0.05)
    control.send("ready")
    busy_from, wall_from = _cpu_seconds(), time.monotonic()
    while not control.poll(0):
        pump(0.02)
    control.recv()
    for stream in streams:
        stream.sock.close()
    # Share of one core this reader used while measuring: near 1.0 means the readers, not the
    # server, may be what limits delivery.
    busy = (_cpu_seconds() - busy_from) / (time.monotonic() - wall_from)
    control.send((latencies.tobytes(), [s.frames for s in streams], ended_at, busy))


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- the server side, in this process ---


def phase(stalled: bool, rate: int) -> dict[str, Any]:
    """One measurement on a fresh server (a closed subscriber of an earlier phase would
    still cost the server a write before it noticed)."""
    from bundle_server._dev_server import start_dev_server

    spawn = mp.get_context("spawn")
    subscribers = SUBSCRIBER_PROCESSES * SOCKETS_EACH
    with tempfile.TemporaryDirectory() as root, start_dev_server(root) as server:
        after = server.hub.latest_sequence
        controls, processes = [], []
        for _ in range(SUBSCRIBER_PROCESSES):
            parent, child = spawn.Pipe()
            process = spawn.Process(
                target=subscriber,
                args=(server.port, server.session_token, after, SOCKETS_EACH, child),
                daemon=True,
            )
            process.start()
            controls.append(parent)
            processes.append(process)
        for control in controls:
            assert control.recv() == "ready"
        stall = None
        if stalled:
            stall = socket.socket()
            # A small receive buffer, so that the server's writes to it block soon.
            stall.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stall.connect(("127.0.0.1", server.port))
            stall.sendall(
                f"GET /api/trace/stream?after={after} HTTP/1.1\r\nHost: 127.0.0.1:"
                f"{server.port}\r\nx-bundle-session: {server.session_token}\r\n\r\n".encode()
            )
        wanted = subscribers + (1 if stalled else 0)
        deadline = time.monotonic() + 10
        while server.hub.subscriber_count < wanted and time.monotonic() < deadline:
            time.sleep(0.01)
        subscribed = server.hub.subscriber_count

        published = 0
        start = time.monotonic()
        while (elapsed := time.monotonic() - start) < PUBLISH:
            # Paced in small bursts; sleeping between them leaves the GIL to the server.
            for _ in range(int(elapsed * rate) - published):
                server.hub.publish(
                    "diagnostic",
                    "bench.entry",
                    "fan-out bench entry",
                    details={"t": time.time_ns()},
                )
                published += 1
            time.sleep(0.001)
        publish_seconds = time.monotonic() - start
        time.sleep(DRAIN)
        still_subscribed = server.hub.subscriber_count
        for control in controls:
            control.send("stop")
        results = [control.recv() for control in controls]
        for process in processes:
            process.join(5)
        if stall is not None:
            stall.close()
    latencies: array.array[int] = array.array("q")
    frames: list[int] = []
    ended_at: list[float] = []
    cpu_seconds = []
    for blob, per_stream, ends, cpu in results:
        latencies.frombytes(blob)
        frames.extend(per_stream)
        ended_at.extend(ends)
        cpu_seconds.append(cpu)
    lat = sorted(v / 1e6 for v in latencies)
    return {
        "subscribed": subscribed,
        "published": published,
        "rate": published / publish_seconds,
        "expected": published * subscribers,
        "delivered": sum(frames),
        "complete": sum(1 for f in frames if f == published),
        "cut": len(ended_at),
        # CLOCK_MONOTONIC is system-wide on Linux: the subscribers' times compare with ours.
        "cut_after_ms": statistics.median(e - start for e in ended_at) * 1000 if ended_at else 0,
        # Beyond the streams still open at the clients, only the stalled one can be subscribed.
        "stalled_cut": still_subscribed <= subscribers - len(ended_at),
        "reader_cpu": max(cpu_seconds),
        "p50": percentile(lat, 50),
        "p99": percentile(lat, 99),
        "max": lat[-1] if lat else float("nan"),
    }


def percentile(ordered: list[float], p: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def show(result: dict[str, Any], stalled: bool) -> str:
    share = result["delivered"] / result["expected"] if result["expected"] else 0.0
    text = (
        f"{result['rate']:5.0f}/s, delivered {share:6.1%} "
        f"({result['delivered']}/{result['expected']}), complete {result['complete']:3}, "
        f"cut {result['cut']:3} (median {result['cut_after_ms']:5.0f} ms in), "
        f"latency ms p50 {result['p50']:6.1f} p99 {result['p99']:6.1f} max {result['max']:6.1f}, "
        f"busiest reader {result['reader_cpu']:.0%} of a core"
    )
    if stalled:
        text += f", stalled one cut: {'yes' if result['stalled_cut'] else 'no'}"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=RATE, help="entries per second")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    subscribers = SUBSCRIBER_PROCESSES * SOCKETS_EACH
    print(
        f"NDJSON fan-out: {subscribers} subscribers ({SUBSCRIBER_PROCESSES} processes x "
        f"{SOCKETS_EACH}), {args.rate} entries/s for {PUBLISH:.0f} s, {DRAIN:.0f} s drain, "
        f"{args.rounds} rounds alternating"
    )
    runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    for round_ in range(args.rounds):
        for stalled in (False, True):
            result = phase(stalled, args.rate)
            runs[stalled].append(result)
            label = "+1 stalled" if stalled else "alone     "
            print(f"  round {round_ + 1} {label}: {show(result, stalled)}")
    print("medians:")
    medians = {}
    for stalled, results in runs.items():
        medians[stalled] = {
            key: statistics.median(r[key] for r in results)
            for key in ("delivered", "expected", "cut", "p50", "p99", "max")
        }
        m = medians[stalled]
        print(
            f"  {'200 + 1 stalled' if stalled else '200 alone      '}: delivered "
            f"{m['delivered'] / m['expected']:6.1%}, cut {m['cut']:5.0f}, latency ms "
            f"p50 {m['p50']:6.1f} p99 {m['p99']:6.1f} max {m['max']:6.1f}"
        )
    ratio = medians[True]["p99"] / medians[False]["p99"]
    print(f"  others' p99 with a stalled subscriber / without: {ratio:.2f}x (goal: about 1x)")


if __name__ == "__main__":
    main()
