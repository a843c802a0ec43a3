"""Requests per second and latency of a guarded `GET /api/trace`, against three peers in one run.

Server under test: `start_dev_server(tmpdir)` (werkzeug app, guard, gevent pywsgi shell) with a
few hundred published entries, asked for the last ten (`after=latest-10`): a ~1.6 KB
TraceReplay the hub answers from cached encodings, so the figure is the per-request cost of the
stack, not of JSON.

Peers send exactly what ours sends: the body bytes and the headers of our response (fetched
from it first, then checked byte for byte on each peer, `Date` aside), prepared once, behind
the same `x-bundle-session` check in constant time:
  (a) a bare gevent `pywsgi.WSGIServer` WSGI function with TCP_NODELAY on accepted sockets
      (the ceiling for our shell: everything above it is our app);
  (b) uvicorn + starlette on uvicorn's pure-Python stack (h11, asyncio);
  (c) the same starlette app on uvicorn[standard]'s fast stack (httptools, uvloop).
Each server runs alone in its own process. The load comes from client processes, each with
one keep-alive connection sending a pre-built request over a raw socket and timing every
answer; each round measures every server at every concurrency level (-c = client processes),
servers in a rotated order. Throughput figures are medians over ROUNDS rounds; p50/p99 are
over every request of every round at a level. Every round counts: a non-200 answer or a
client that failed is reported and makes the bench exit 1, never a dropped sample.

Goals stated by the issue: at least 0.9x bare gevent and 1x starlette/h11 in throughput, p99
at most 10 ms at -c8; the uvicorn[standard] ratio is reported as it is. The machine is shared
and noisy: read the ratios, not the absolute numbers; nothing here asserts on speed.

`python bench/bench_trace_requests.py [ROUNDS [DURATION]]` (defaults 5 and 2 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hmac
import multiprocessing as mp
import socket
import statistics
import sys
import tempfile
import threading
import time
from array import array
from multiprocessing.connection import Connection
from typing import Any

ROUNDS = 5
DURATION = 2.0  # seconds of counted load per server per level per round
WARMUP = 0.3  # seconds of load before counting starts (connections, caches)
LEVELS = (8, 3)  # client processes (one keep-alive connection each)
ENTRIES = 300
TAIL = 10
TOKEN = "bench-token-" + "x" * 31
# What each peer answers with: the body and the headers of our own response.
Payload = tuple[bytes, list[tuple[str, str]]]
Target = tuple[int, bytes]  # (port, the complete request bytes)


# --- servers, each in its own spawned process ---


def tcp_listener() -> socket.socket:
    """A listening loopback socket on a free port, created with proto IPPROTO_TCP.

    asyncio sets TCP_NODELAY on accepted connections only when the socket's proto says TCP;
    `socket.create_server` leaves it 0, and uvicorn on such a socket then stalls every
    keep-alive response ~40 ms on the delayed ACK (measured: 68 req/s). uvicorn binding its
    own host and port gets IPPROTO_TCP from getaddrinfo, so this is the fair configuration.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def serve_devkit(conn: Connection) -> None:
    from bundle_server._dev_server import start_dev_server

    with tempfile.TemporaryDirectory() as root, start_dev_server(root) as server:
        for index in range(ENTRIES):
            server.hub.publish("diagnostic", "bench.entry", f"bench entry {index}")
        path = f"/api/trace?after={server.hub.latest_sequence - TAIL}"
        conn.send((server.port, path, server.session_token, ""))
        conn.recv()  # until told to stop


def serve_gevent(conn: Connection, payload: Payload) -> None:
    import gevent.socket
    from gevent import pywsgi

    expected = TOKEN.encode("ascii")
    body, headers = payload

    class NoDelayHandler(pywsgi.WSGIHandler):  # type: ignore[misc]
        def __init__(self, sock: socket.socket, *args: Any) -> None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            super().__init__(sock, *args)

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        given = environ.get("HTTP_X_BUNDLE_SESSION", "").encode("latin-1")
        if not hmac.compare_digest(given, expected):
            start_response("401 Unauthorized", [("Content-Length", "0")])
            return []
        start_response("200 OK", list(headers))
        return [body]

    listener = tcp_listener()
    # pywsgi accepts in a loop until EWOULDBLOCK: a blocking listener would hang its loop.
    listener.setblocking(False)
    server = pywsgi.WSGIServer(
        listener,
        app,
        log=None,
        error_log=None,
        handler_class=NoDelayHandler,
        # As the shell does: otherwise pywsgi calls getfqdn(), a blocking DNS query.
        environ={"SERVER_NAME": "127.0.0.1", "SERVER_PORT": str(listener.getsockname()[1])},
    )
    server.start()
    conn.send((listener.getsockname()[1], "/api/trace", TOKEN, f"gevent {gevent.__version__}"))
    # Wait for the stop message in a way that lets the gevent loop serve meanwhile.
    gevent.socket.wait_read(conn.fileno())
    server.stop()


def serve_starlette(conn: Connection, payload: Payload, http: str, loop: str) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    expected = TOKEN.encode("ascii")
    body, headers = payload
    # Content-Length is Starlette's to add (it always does for a body); the rest as ours.
    fixed = {name: value for name, value in headers if name.lower() != "content-length"}

    async def trace(request: Request) -> Response:
        given = request.headers.get("x-bundle-session", "").encode("latin-1")
        if not hmac.compare_digest(given, expected):
            return Response(status_code=401)
        return Response(body, headers=fixed)

    listener = tcp_listener()
    config = uvicorn.Config(
        Starlette(routes=[Route("/api/trace", trace)]),
        http=http,
        loop=loop,
        log_level="warning",
        access_log=False,
        server_header=False,  # ours sends none
    )
    server = uvicorn.Server(config)
    config.load()
    implementation = (
        f"uvicorn {uvicorn.__version__}, http={config.http_protocol_class.__name__}, loop={loop}"
    )
    conn.send((listener.getsockname()[1], "/api/trace", TOKEN, implementation))

    def stop_on_message() -> None:
        with contextlib.suppress(EOFError):  # the parent gone: stop all the same
            conn.recv()
        server.should_exit = True

    threading.Thread(target=stop_on_message, daemon=True).start()
    if loop == "uvloop":
        import uvloop

        uvloop.run(server.serve(sockets=[listener]))
    else:
        asyncio.run(server.serve(sockets=[listener]))


# --- load: client processes (forked) ---


def request_bytes(port: int, path: str, token: str) -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nx-bundle-session: {token}\r\n\r\n"
    ).encode("ascii")


def client(target: Target, start_at: float, stop_at: float, out: Connection) -> None:
    """Requests on one keep-alive connection; sends back (200s, other answers, latencies in
    seconds, failure) for the requests sent in [start_at, stop_at)."""
    gc.disable()  # the client's own pauses must not show up as the server's latency
    port, request = target
    counted = errors = 0
    latencies = array("d")
    failure = ""
    try:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buffer = b""
        while True:
            sent = time.monotonic()
            if sent >= stop_at:
                break
            sock.sendall(request)
            while b"\r\n\r\n" not in buffer:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("server closed the connection")
                buffer += chunk
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(buffer) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("server closed the connection mid-body")
                buffer += chunk
            buffer = buffer[length:]
            if sent >= start_at:
                latencies.append(time.monotonic() - sent)
                if head.startswith(b"HTTP/1.1 200"):
                    counted += 1
                else:
                    errors += 1
        sock.close()
    except Exception as exc:
        failure = f"{type(exc).__name__}: {exc}"
    out.send((counted, errors, latencies.tobytes(), failure))


def measure(target: Target, clients: int) -> tuple[float, int, array[float], list[str]]:
    """Requests/s of `clients` processes against `target` for DURATION seconds; the count of
    other answers, every latency, and the failures of clients."""
    fork = mp.get_context("fork")
    start_at = time.monotonic() + 0.2 + WARMUP  # 0.2 s for the processes to start
    stop_at = start_at + DURATION
    pipes, processes = [], []
    for _ in range(clients):
        receive, send = fork.Pipe(duplex=False)
        process = fork.Process(target=client, args=(target, start_at, stop_at, send))
        process.start()
        pipes.append(receive)
        processes.append(process)
    results = [pipe.recv() for pipe in pipes]
    for process in processes:
        process.join()
    latencies = array("d")
    for result in results:
        latencies.frombytes(result[2])
    failures = [result[3] for result in results if result[3]]
    return sum(r[0] for r in results) / DURATION, sum(r[1] for r in results), latencies, failures


def fetch(target: Target) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request on a fresh connection: status, headers, body."""
    port, request = target
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = [(n.strip(), v.strip()) for n, _, v in (x.partition(":") for x in lines[1:])]
        length = int(next((v for n, v in headers if n.lower() == "content-length"), "0"))
        while len(body) < length:
            body += sock.recv(65536)
    return int(lines[0].split()[1]), headers, body


def comparable(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Headers by lower-case name, sorted, without Date (its value is the time)."""
    return sorted((n.lower(), v) for n, v in headers if n.lower() != "date")


def percentile(values: list[float], fraction: float) -> float:
    return values[min(len(values) - 1, int(fraction * len(values)))]


def main() -> None:
    global ROUNDS, DURATION
    if len(sys.argv) > 1:
        ROUNDS = int(sys.argv[1])
    if len(sys.argv) > 2:
        DURATION = float(sys.argv[2])
    spawn = mp.get_context("spawn")
    servers: dict[str, tuple[Any, Connection, Target]] = {}
    implementations: dict[str, str] = {}

    def start(name: str, target: Any, *args: Any) -> None:
        parent, child = spawn.Pipe()
        process = spawn.Process(target=target, args=(child, *args), daemon=True)
        process.start()
        port, path, token, implementation = parent.recv()
        servers[name] = (process, parent, (port, request_bytes(port, path, token)))
        implementations[name] = implementation

    start("devkit", serve_devkit)
    status, headers, body = fetch(servers["devkit"][2])
    assert status == 200, status
    payload: Payload = (body, [(n, v) for n, v in headers if n.lower() != "date"])
    start("bare gevent", serve_gevent, payload)
    start("starlette/h11", serve_starlette, payload, "h11", "asyncio")
    start("uvicorn[std]", serve_starlette, payload, "httptools", "uvloop")
    for name, (_, _, target) in servers.items():
        got_status, got_headers, got_body = fetch(target)
        assert got_status == 200 and got_body == body, (name, got_status, len(got_body))
        assert comparable(got_headers) == comparable(headers), (name, got_headers)
    # The guard is really on: a request without the session is refused by all of them.
    for name, (_, _, (port, _)) in servers.items():
        bare = f"GET /api/trace HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        assert fetch((port, bare))[0] == 401, name

    print(
        f"GET /api/trace, {len(body)}-byte JSON body and {len(headers)} headers, the same bytes "
        f"from every server; {ENTRIES} entries, after=latest-{TAIL}"
    )
    print(
        f"-c N: N client processes x 1 keep-alive connection; levels {LEVELS}, {DURATION:g} s "
        f"per server per level per round, {ROUNDS} rounds, rotated order ({sys.executable})"
    )
    for name, implementation in implementations.items():
        if implementation:
            print(f"  {name}: {implementation}")
    names = list(servers)
    rates: dict[tuple[str, int], list[float]] = {(n, c): [] for n in names for c in LEVELS}
    latencies = {key: array("d") for key in rates}
    problems: list[str] = []
    for round_ in range(ROUNDS):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for clients in LEVELS:
            line = []
            for name in order:
                rate, errors, times, failures = measure(servers[name][2], clients)
                rates[name, clients].append(rate)
                latencies[name, clients].extend(times)
                note = ""
                if errors or failures:
                    note = f" ({errors} non-200, {len(failures)} clients failed)"
                    problems += [f"round {round_ + 1} -c{clients} {name}: {note.strip()}"]
                    problems += [f"    {failure}" for failure in failures]
                line.append(f"{name} {rate:6.0f}{note}")
            print(f"  round {round_ + 1} -c{clients}: " + ", ".join(line), flush=True)
    for _, parent, _ in servers.values():
        parent.send("stop")
    for clients in LEVELS:
        print(f"-c{clients}: median requests/s (range), latency p50 / p99 / max in ms:")
        medians = {name: statistics.median(rates[name, clients]) for name in names}
        for name in names:
            values = rates[name, clients]
            ordered = sorted(latencies[name, clients])
            p50, p99 = percentile(ordered, 0.50) * 1e3, percentile(ordered, 0.99) * 1e3
            print(
                f"  {name:14} {medians[name]:7.0f}  ({min(values):.0f}-{max(values):.0f})   "
                f"{p50:6.2f} / {p99:6.2f} / {ordered[-1] * 1e3:6.1f}   ({len(ordered)} requests)"
            )
        devkit = medians["devkit"]
        print(f"  devkit / bare gevent    {devkit / medians['bare gevent']:5.2f}x (goal >= 0.9x)")
        print(f"  devkit / starlette/h11  {devkit / medians['starlette/h11']:5.2f}x (goal >= 1x)")
        print(f"  devkit / uvicorn[std]   {devkit / medians['uvicorn[std]']:5.2f}x")
    for process, _, _ in servers.values():
        process.join(5)
        if process.is_alive():
            process.terminate()
    if problems:
        print("FAILED: rounds with errors (counted as measured):", file=sys.stderr)
        for problem in problems:
            print("  " + problem, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
