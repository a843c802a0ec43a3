"""A live server for black-box tests: the real app on a free loopback port, and a small
`http.client` helper that controls every header (Host, Origin, session, cookies, bodies).

`serve()` runs the app in the production gevent shell (its own thread and hub, no monkey
patching), sharing the hubs with the test, which publishes into them directly.
`stalled_reader()` opens a stream on a raw socket that never reads it.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bundle_contract._schemas import reference_validator
from bundle_server import create_app
from bundle_server._http.routing import Handler
from bundle_server._http.shell import LoopbackShell
from bundle_server.logs.hub import LogBridge, LogHub
from bundle_server.sessions.pty import SessionManager
from bundle_server.trace.hub import TraceHub

TOKEN = "t" * 43
RECEIPT_TOKEN = "r" * 43
DEV_ORIGIN = "http://localhost:5173"


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    data: bytes

    def json(self) -> Any:
        assert self.headers["Content-Type"] == "application/json"
        return json.loads(self.data)

    def code(self) -> str:
        envelope = self.json()
        reference_validator("ErrorEnvelope.json").validate(envelope)
        code: str = envelope["error"]["code"]
        return code


@dataclass
class Server:
    port: int
    hub: TraceHub
    logs: LogHub

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def connect(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str | bytes] | None = None,
        body: bytes | None = None,
        *,
        auth: bool = True,
        host: str | None = "default",
        timeout: float = 10,
    ) -> http.client.HTTPConnection:
        """A connection with the request sent; read it with `getresponse()`."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if host == "default":
            conn.putheader("Host", self.host)
        elif host is not None:
            conn.putheader("Host", host)
        if auth:
            conn.putheader("x-bundle-session", TOKEN)
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        # A chunked body is framed by its chunks alone: a length beside it is refused (400).
        framed = {"Content-Length", "Transfer-Encoding"} & set(headers or {})
        if body is not None and not framed:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        return conn

    def request(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str | bytes] | None = None,
        body: bytes | None = None,
        **kwargs: Any,
    ) -> Response:
        conn = self.connect(method, path, headers, body, **kwargs)
        try:
            raw = conn.getresponse()
            return Response(raw.status, dict(raw.getheaders()), raw.read())
        finally:
            conn.close()

    def get(self, path: str, **kwargs: Any) -> Response:
        return self.request("GET", path, **kwargs)


class Stream:
    """An open NDJSON response, read frame by frame with a deadline."""

    def __init__(self, conn: http.client.HTTPConnection) -> None:
        self.conn = conn
        self.response = conn.getresponse()

    def frame(self) -> dict[str, Any]:
        line = self.response.readline()
        assert line.endswith(b"\n"), f"stream ended: {line!r}"
        frame: dict[str, Any] = json.loads(line)
        return frame

    def frames(self, count: int) -> list[dict[str, Any]]:
        return [self.frame() for _ in range(count)]

    def close(self) -> None:
        self.response.close()
        self.conn.close()


def serve(
    hub: TraceHub,
    handlers: Mapping[str, Handler] | None = None,
    *,
    logs: LogHub | None = None,
    keepalive: float | None = None,
    io_timeout: float | None = None,
    sessions: SessionManager | None = None,
) -> Iterator[Server]:
    shell = LoopbackShell("127.0.0.1", 0, io_timeout=io_timeout)
    logs = logs or LogHub()
    app = create_app(
        port=shell.port,
        session_token=TOKEN,
        receipt_token=RECEIPT_TOKEN,
        hub=hub,
        logs=logs,
        dev_origins=(DEV_ORIGIN,),
        handlers=handlers,
        keepalive=keepalive,
        sessions=sessions,
    )
    bridge = LogBridge(logs, trace=hub).attach()
    shell.start(app)
    try:
        yield Server(shell.port, hub, logs)
    finally:
        bridge.detach()
        shell.stop()


def stalled_reader(port: int, path: str, token: str = TOKEN) -> socket.socket:
    """A raw connection that asks for the stream at `path` and never reads it.

    Its receive buffer is made tiny before connecting (so the advertised window stays small):
    the server's writes soon block on it. Close it when done.
    """
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(("127.0.0.1", port))
    stalled.sendall(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"x-bundle-session: {token}\r\n\r\n".encode()
    )
    return stalled


def wait_for(predicate: Any, timeout: float = 5.0) -> None:
    """Poll `predicate` until true or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)
