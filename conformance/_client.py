"""A small raw HTTP client on `http.client` and `socket`: full control over what is sent.

Browsers and ordinary clients normalise exactly the things the kit must vary (Host, Origin,
cookies, chunked bodies, header counts), so requests are written header by header. Nothing is
added implicitly: no Host unless asked (the default is the target's), no Accept-Encoding.
Plain requests use `http.client`; streams and hand-written requests (withheld or chunked
bodies, partial heads) use a raw socket and `_stream.Stream`, which can wait and look again.

Every transport failure (refused, reset, timed out, unparsable response) is translated once,
here, into `TransportError`; the runner turns an unexpected one into NOT_TESTABLE, and checks
for which a closed connection is an acceptable answer catch it themselves.
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from conformance import _expect
from conformance._reply import Reply
from conformance._stream import Stream, StreamClosed, StreamError
from conformance._target import Target

HeaderValue = str | bytes
Headers = Sequence[tuple[str, HeaderValue]]
Auth = Literal["header", "cookie", "none"]
DEFAULT = "\0default"  # sentinel Host: the target's own host header


class TransportError(Exception):
    """The connection failed, was closed, timed out, or the answer was not HTTP."""


class ConnectionClosed(TransportError):
    """The peer closed or reset the connection instead of answering (not a timeout)."""


class Client:
    """Requests to one target, each on a fresh connection (no state leaks between checks)."""

    def __init__(self, target: Target) -> None:
        self.target = target

    def credentials(self, auth: Auth) -> list[tuple[str, HeaderValue]]:
        """The headers presenting the foreground session the way `auth` says."""
        if auth == "header":
            return [(_expect.session_header(), self.target.session)]
        if auth == "cookie":
            name = self.target.cookie_name()
            if name is None:  # the checks ask only when the target has said its name
                raise ValueError("the target has not said its session cookie's name")
            return [("Cookie", f"{name}={self.target.session}")]
        return []

    def _connection(self, timeout: float | None = None) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(
            self.target.hostname, self.target.port, timeout=timeout or self.target.timeout
        )

    def _send(
        self,
        connection: http.client.HTTPConnection,
        method: str,
        path: str,
        headers: Headers,
        body: bytes | None,
        host: str | None,
        auth: Auth,
    ) -> None:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            connection.putheader("Host", self.target.host_header if host == DEFAULT else host)
        for name, value in [*self.credentials(auth), *headers]:
            connection.putheader(name, value)
        names = {name.lower() for name, _ in headers}
        if body is not None and not {"content-length", "transfer-encoding"} & names:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)

    def request(
        self,
        method: str,
        path: str,
        *,
        headers: Headers = (),
        body: bytes | None = None,
        host: str | None = DEFAULT,
        auth: Auth = "header",
    ) -> Reply:
        """Send one request and read the whole response.

        `host=None` sends no Host header at all; `auth` presents the session by header, by
        cookie or not at all.
        """
        connection = self._connection()
        try:
            self._send(connection, method, path, headers, body, host, auth)
            response = connection.getresponse()
            return Reply(response.status, tuple(response.getheaders()), response.read())
        except (OSError, http.client.HTTPException) as exc:
            raise TransportError(f"{method} {path}: {type(exc).__name__}: {exc}") from None
        finally:
            connection.close()

    def requests_kept_alive(
        self,
        method: str,
        path: str,
        bodies: Iterable[bytes],
        *,
        headers: Headers = (),
        auth: Auth = "header",
    ) -> Generator[Reply, None, None]:
        """Send one request per body, back to back on one kept-alive connection (opened again
        whenever the target closes it), yielding each reply. For the kit's floods, where a
        connection per request would be most of the cost; every other check keeps a fresh
        connection per request."""
        connection: http.client.HTTPConnection | None = None
        try:
            for body in bodies:
                # A kept-alive connection the target closed without saying so fails at once:
                # that body is sent again, once, on a fresh connection.
                for reused in (connection is not None, False):
                    if connection is None:
                        connection = self._connection()
                    try:
                        self._send(connection, method, path, headers, body, DEFAULT, auth)
                        response = connection.getresponse()
                        status, head = response.status, tuple(response.getheaders())
                        reply = Reply(status, head, response.read())
                        break
                    except (
                        http.client.RemoteDisconnected,
                        ConnectionResetError,
                        BrokenPipeError,
                    ) as exc:
                        connection.close()
                        connection = None
                        if not reused:
                            raise TransportError(
                                f"{method} {path}: {type(exc).__name__}: {exc}"
                            ) from None
                    except (OSError, http.client.HTTPException) as exc:
                        raise TransportError(
                            f"{method} {path}: {type(exc).__name__}: {exc}"
                        ) from None
                if response.will_close and connection is not None:
                    connection.close()
                    connection = None
                yield reply
        finally:
            if connection is not None:
                connection.close()

    def get(self, path: str, **kwargs: Any) -> Reply:
        return self.request("GET", path, **kwargs)

    @contextmanager
    def stream(
        self, path: str, *, headers: Headers = (), auth: Auth = "header"
    ) -> Iterator[Stream | Reply]:
        """GET a stream. Yields a `Stream` for a 200, else the complete error `Reply`."""
        sock = self.connect()
        try:
            head = self.request_head("GET", path, [*self.credentials(auth), *headers])
            try:
                sock.sendall(head)
                opened = Stream(sock, self.target.timeout)
            except (OSError, StreamError) as exc:
                raise TransportError(f"GET {path}: {type(exc).__name__}: {exc}") from None
            if opened.status != 200:
                yield Reply(opened.status, opened.headers, opened.read_body(self.target.timeout))
                return
            yield opened
        finally:
            sock.close()

    def connect(self, receive_buffer: int | None = None) -> socket.socket:
        """A raw connected socket (optionally with a small receive buffer, set before connect)."""
        family = socket.AF_INET6 if ":" in self.target.hostname else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            if receive_buffer is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            sock.settimeout(self.target.timeout)
            sock.connect((self.target.hostname, self.target.port))
            return sock
        except OSError as exc:
            sock.close()
            raise TransportError(f"connect: {type(exc).__name__}: {exc}") from None

    def request_head(
        self, method: str, path: str, headers: Headers, host: str | None = DEFAULT
    ) -> bytes:
        """The bytes of a request line and headers, for writing to a raw socket."""
        lines = [f"{method} {path} HTTP/1.1".encode()]
        if host is not None:
            lines.append(
                b"Host: " + (self.target.host_header if host == DEFAULT else host).encode()
            )
        for name, value in headers:
            lines.append(name.encode("ascii") + b": " + _bytes(value))
        return b"\r\n".join(lines) + b"\r\n\r\n"


def _bytes(value: HeaderValue) -> bytes:
    return value if isinstance(value, bytes) else value.encode("latin-1")


def read_reply(sock: socket.socket, method: str, timeout: float) -> Reply:
    """Read one HTTP response from a raw socket: ConnectionClosed when the peer closed or reset
    the connection before answering, TransportError on a timeout or an answer that is not HTTP."""
    try:
        response = Stream(sock, timeout)
        body = b"" if method == "HEAD" else response.read_body(timeout)
    except (StreamClosed, ConnectionError) as exc:
        raise ConnectionClosed(f"{type(exc).__name__}: {exc}") from None
    except (OSError, StreamError) as exc:
        raise TransportError(f"{type(exc).__name__}: {exc}") from None
    return Reply(response.status, response.headers, body)
