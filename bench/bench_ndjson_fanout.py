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

The rule for a stalled reader: it is cut when history drops a record it still had to write (at
5,000 entries/s that is ~2 s after it stalled, retention being 10,000), or when a write makes no
progress for `socket-io-timeout`; until then it must be harmless (the others complete, and
their p99 stays within 2x of the phase without it). A round where it is neither cut nor
harmless, or where a reader that reads was cut or missed frames, fails the bench (exit 1).

Then the memory phase, on a fresh server holding 10,000 entries of ~500 bytes: 200 subscribers
ask for the whole history (`after=0`); the server's RSS (this process, read from /proc) over
idle is printed while they do not read, after they read it all, and 2 s after they close (goal:
at most 64 MiB over idle, back within 16 MiB). Last, how long the server takes to notice a
client that closed its idle stream (median of 20; the keep-alive is 15 s away).

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
    failures = verdicts(runs, subscribers)
    memory = memory_phase()
    print(
        f"memory, 200 subscribers replaying {REPLAY_ENTRIES} entries (RSS over idle "
        f"{memory['idle'] / MIB:.0f} MiB): not reading {memory['not_reading'] / MIB:+.1f} MiB, "
        f"after reading all {memory['reading'] / MIB:+.1f} MiB (goal <= 64), 2 s after they "
        f"closed {memory['closed'] / MIB:+.1f} MiB (goal <= 16)"
    )
    if max(memory["not_reading"], memory["reading"]) > 64 * MIB or memory["closed"] > 16 * MIB:
        failures.append("memory above its goal")
    noticed = disconnect_latency()
    print(
        f"a client that closed its idle stream noticed in: median {noticed[len(noticed) // 2]:.1f}"
        f" ms, max {noticed[-1]:.1f} ms over {len(noticed)} (keep-alive every 15 s)"
    )
    if noticed[-1] > 1000:
        failures.append("a closed client not noticed within a second")
    if not failures:
        print("every round: no reader that reads was cut, the stalled one cut or harmless")
    for failure in failures:
        print(f"FAILED: {failure}")
    if failures:
        raise SystemExit(1)


def verdicts(runs: dict[bool, list[dict[str, Any]]], subscribers: int) -> list[str]:
    """What failed, over every round: a reader that reads was cut or short-changed, or the
    stalled one was neither cut nor harmless."""
    failures = []
    for stalled, results in runs.items():
        for index, result in enumerate(results, 1):
            if result["cut"] or result["complete"] != subscribers:
                failures.append(
                    f"round {index} {'with' if stalled else 'without'} a stalled reader: "
                    f"{result['cut']} readers cut, {result['complete']}/{subscribers} complete"
                )
    for index, (alone, with_stalled) in enumerate(zip(runs[False], runs[True], strict=True), 1):
        harmless = (
            with_stalled["complete"] == subscribers and with_stalled["p99"] <= 2 * alone["p99"]
        )
        if not with_stalled["stalled_cut"] and not harmless:
            failures.append(f"round {index}: the stalled reader was neither cut nor harmless")
    return failures


# --- memory of full replays, and noticing a client that left ---

REPLAY_ENTRIES = 10_000
MIB = 1 << 20


def rss() -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def replayer(port: int, token: str, count: int, last: int, control: Connection) -> None:
    """`count` streams at after=0: connected at once, read to `last` on "read", closed on
    "close"."""
    request = (
        f"GET /api/trace/stream?after=0 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"x-bundle-session: {token}\r\n\r\n"
    ).encode("ascii")
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(request)
        socks.append(sock)
    control.send("connected")
    assert control.recv() == "read"
    marker = b'"sequence":%d,' % last
    tails = {sock: b"" for sock in socks}
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        deadline = time.monotonic() + 120
        while tails and time.monotonic() < deadline:
            for key, _ in selector.select(1.0):
                sock = key.fileobj  # type: ignore[assignment]
                data = sock.recv(READ_SIZE)
                tail = tails[sock][-64:] + data
                if marker in tail or not data:
                    del tails[sock]
                    selector.unregister(sock)
                else:
                    tails[sock] = tail
    control.send(len(tails))
    assert control.recv() == "close"
    for sock in socks:
        sock.close()
    control.send("closed")


def memory_phase() -> dict[str, int]:
    from bundle_server._dev_server import start_dev_server

    spawn = mp.get_context("spawn")
    filler = "x" * 400
    with tempfile.TemporaryDirectory() as root, start_dev_server(root) as server:
        for index in range(REPLAY_ENTRIES):
            server.hub.publish(
                "diagnostic", "bench.entry", f"entry {index}", details={"filler": filler}
            )
        last = server.hub.latest_sequence
        controls, processes = [], []
        idle = settled_rss()
        for _ in range(SUBSCRIBER_PROCESSES):
            parent, child = spawn.Pipe()
            process = spawn.Process(
                target=replayer,
                args=(server.port, server.session_token, SOCKETS_EACH, last, child),
                daemon=True,
            )
            process.start()
            controls.append(parent)
            processes.append(process)
        for control in controls:
            assert control.recv() == "connected"
        wanted = SUBSCRIBER_PROCESSES * SOCKETS_EACH
        deadline = time.monotonic() + 30
        while server.hub.subscriber_count < wanted and time.monotonic() < deadline:
            time.sleep(0.05)
        not_reading = settled_rss()
        for control in controls:
            control.send("read")
        unfinished = sum(control.recv() for control in controls)
        if unfinished:
            raise SystemExit(f"FAILED: {unfinished} streams did not deliver their replay")
        reading = settled_rss()
        for control in controls:
            control.send("close")
        for control in controls:
            control.recv()
        for process in processes:
            process.join(5)
        deadline = time.monotonic() + 5
        while server.hub.subscriber_count and time.monotonic() < deadline:
            time.sleep(0.05)
        closed = settled_rss(2.0)
    return {
        "idle": idle,
        "not_reading": not_reading - idle,
        "reading": reading - idle,
        "closed": closed - idle,
    }


def settled_rss(seconds: float = 1.0) -> int:
    time.sleep(seconds)
    return rss()


def disconnect_latency(tries: int = 20) -> list[float]:
    """Milliseconds from a client closing an idle stream to its subscription being dropped."""
    from bundle_server._dev_server import start_dev_server

    noticed = []
    with tempfile.TemporaryDirectory() as root, start_dev_server(root) as server:
        for _ in range(tries):
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(
                f"GET /api/trace/stream HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                f"x-bundle-session: {server.session_token}\r\n\r\n".encode()
            )
            sock.recv(READ_SIZE)  # the response has started: the stream is subscribed
            before = server.hub.subscriber_count
            began = time.monotonic()
            sock.close()
            while server.hub.subscriber_count >= before and time.monotonic() - began < 30:
                time.sleep(0.0005)
            noticed.append((time.monotonic() - began) * 1000)
    return sorted(noticed)


if __name__ == "__main__":
    main()
