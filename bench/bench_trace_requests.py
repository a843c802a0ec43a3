"""Requests per second of a guarded `GET /api/trace`, against two peers measured in the same run.

Server under test: `start_dev_server(tmpdir)` (werkzeug app, guard, gevent pywsgi shell) with a
few hundred published entries, asked for the last ten (`after=latest-10`), so each response is
a ~1.6 KB TraceReplay and the figure is the per-request cost of the stack, not of JSON.

Peers, serving the same JSON body (re-serialized on every request, as the server does):
  (a) a bare gevent `pywsgi.WSGIServer` WSGI function with TCP_NODELAY on accepted sockets
      (the ceiling for our shell: everything above it is our app);
  (b) uvicorn + starlette, one route doing the same `x-bundle-session` check, in uvicorn's
      default configuration for what is installed (the h11 / asyncio fallbacks when httptools
      or uvloop are missing; printed below).
Each server runs alone in its own process; the load comes from CLIENTS other processes, each
with one keep-alive connection sending pre-built requests over a raw socket in a loop (cheaper
than http.client, so the clients take less of the two shared cores). Servers are measured in
a rotated order each round; figures are medians over ROUNDS rounds. Goals stated by the issue:
at least 0.7x bare gevent and at least 1x starlette. The machine is shared and noisy: read the
ratios, not the absolute numbers, and nothing here asserts on speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import multiprocessing as mp
import socket
import statistics
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

ROUNDS = 5
DURATION = 2.0  # seconds of counted load per server per round
WARMUP = 0.3  # seconds of load before counting starts (connections, caches)
CLIENTS = 3
ENTRIES = 300
TAIL = 10

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
        conn.send((server.port, path, server.session_token))
        conn.recv()  # until told to stop


def serve_gevent(conn: Connection, body: Any, token: str) -> None:
    import gevent.socket
    from gevent import pywsgi

    expected = token.encode("ascii")

    class NoDelayHandler(pywsgi.WSGIHandler):  # type: ignore[misc]
        def __init__(self, sock: socket.socket, *args: Any) -> None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            super().__init__(sock, *args)

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        given = environ.get("HTTP_X_BUNDLE_SESSION", "").encode("latin-1")
        if not hmac.compare_digest(given, expected):
            start_response("401 Unauthorized", [("Content-Length", "0")])
            return []
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        start_response(
            "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        )
        return [data]

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
    conn.send((listener.getsockname()[1], "/api/trace", token))
    # Wait for the stop message in a way that lets the gevent loop serve meanwhile.
    gevent.socket.wait_read(conn.fileno())
    server.stop()


def serve_starlette(conn: Connection, body: Any, token: str) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    expected = token.encode("ascii")

    async def trace(request: Request) -> Response:
        given = request.headers.get("x-bundle-session", "").encode("latin-1")
        if not hmac.compare_digest(given, expected):
            return Response(status_code=401)
        return JSONResponse(body)

    listener = tcp_listener()
    config = uvicorn.Config(
        Starlette(routes=[Route("/api/trace", trace)]), log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    config.load()
    implementation = f"uvicorn {uvicorn.__version__}, http={config.http_protocol_class.__name__}"
    conn.send((listener.getsockname()[1], "/api/trace", token, implementation))

    def stop_on_message() -> None:
        with contextlib.suppress(EOFError):  # the parent gone: stop all the same
            conn.recv()
        server.should_exit = True

    threading.Thread(target=stop_on_message, daemon=True).start()
    asyncio.run(server.serve(sockets=[listener]))


# --- load: client processes (forked) ---


def request_bytes(port: int, path: str, token: str) -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nx-bundle-session: {token}\r\n\r\n"
    ).encode("ascii")


def client(target: Target, start_at: float, stop_at: float, out: Connection) -> None:
    """Requests on one keep-alive connection; counts 200s completed in [start_at, stop_at)."""
    port, request = target
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    counted = errors = 0
    buffer = b""
    while True:
        now = time.monotonic()
        if now >= stop_at:
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
            buffer += sock.recv(65536)
        buffer = buffer[length:]
        if now >= start_at:
            if head.startswith(b"HTTP/1.1 200"):
                counted += 1
            else:
                errors += 1
    sock.close()
    out.send((counted, errors))


def measure(target: Target) -> tuple[float, int]:
    """Requests/s of CLIENTS processes against `target` for DURATION seconds; and errors."""
    fork = mp.get_context("fork")
    start_at = time.monotonic() + 0.2 + WARMUP  # 0.2 s for the processes to start
    stop_at = start_at + DURATION
    pipes, processes = [], []
    for _ in range(CLIENTS):
        receive, send = fork.Pipe(duplex=False)
        process = fork.Process(target=client, args=(target, start_at, stop_at, send))
        process.start()
        pipes.append(receive)
        processes.append(process)
    results = [pipe.recv() for pipe in pipes]
    for process in processes:
        process.join()
    return sum(r[0] for r in results) / DURATION, sum(r[1] for r in results)


def fetch(target: Target) -> tuple[int, bytes]:
    port, request = target
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += sock.recv(65536)
    return int(head.split()[1]), body


def main() -> None:
    spawn = mp.get_context("spawn")
    servers: dict[str, tuple[Any, Connection, Target]] = {}

    def start(name: str, target: Any, *args: Any) -> tuple[Any, ...]:
        parent, child = spawn.Pipe()
        process = spawn.Process(target=target, args=(child, *args), daemon=True)
        process.start()
        info = parent.recv()
        port, path, token = info[:3]
        servers[name] = (process, parent, (port, request_bytes(port, path, token)))
        return tuple(info)

    start("devkit", serve_devkit)
    status, body = fetch(servers["devkit"][2])
    assert status == 200, status
    replay = json.loads(body)
    token = "bench-token-" + "x" * 31
    start("bare gevent", serve_gevent, replay, token)
    implementation = start("starlette", serve_starlette, replay, token)[3]
    for name, (_, _, target) in servers.items():
        got_status, got_body = fetch(target)
        assert got_status == 200 and len(got_body) == len(body), (name, got_status, len(got_body))
    # The guard is really on: a request without the session is refused by all three.
    for name, (_, _, (port, _)) in servers.items():
        bare = f"GET /api/trace HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        assert fetch((port, bare))[0] == 401, name

    print(f"GET /api/trace, {len(body)}-byte JSON body, {ENTRIES} entries, after=latest-{TAIL}")
    print(
        f"{CLIENTS} client processes x 1 keep-alive connection, {DURATION:.0f} s per server "
        f"per round, {ROUNDS} rounds, rotated order ({sys.executable})"
    )
    print(f"starlette peer: {implementation}")
    figures: dict[str, list[float]] = {name: [] for name in servers}
    names = list(servers)
    for round_ in range(ROUNDS):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        line = []
        for name in order:
            rate, errors = measure(servers[name][2])
            figures[name].append(rate)
            line.append(f"{name} {rate:7.0f}" + (f" ({errors} errors)" if errors else ""))
        print(f"  round {round_ + 1}: " + ", ".join(line))
    for _, parent, _ in servers.values():
        parent.send("stop")
    medians = {name: statistics.median(values) for name, values in figures.items()}
    print("medians (requests/s):")
    for name, value in medians.items():
        spread = f"{min(figures[name]):.0f}-{max(figures[name]):.0f}"
        print(f"  {name:12} {value:8.0f}   (range {spread})")
    devkit = medians["devkit"]
    print(f"  devkit / bare gevent  {devkit / medians['bare gevent']:5.2f}x (goal >= 0.7x)")
    print(f"  devkit / starlette    {devkit / medians['starlette']:5.2f}x (goal >= 1x)")
    for process, _, _ in servers.values():
        process.join(5)
        if process.is_alive():
            process.terminate()


if __name__ == "__main__":
    main()
